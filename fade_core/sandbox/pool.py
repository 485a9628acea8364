"""The trusted side of the sandbox: worker slots, the per-program test loop, verdicts.

A :class:`Sandbox` owns ``workers`` slots. A slot is one candidate worker (a pre-forked, pre-imported
Python inside the isolation, see :mod:`fade_core.sandbox._zygote`) plus, started on first need, one
checker worker in a second, separate sandbox for HumanEval check programs. Programs are run one at a
time per slot; :meth:`Sandbox.run_batch` keeps every slot busy from a thread pool (the parent threads
only move bytes through pipes and compare outputs).

Per program:

- ``stdio``: one fresh process per test, stdin from the test, stdout compared here with
  :func:`~fade_core.sandbox.compare.compare_stdout`. Stops at the first failing test.
- ``call``: one process defines the program; each test's arguments go in as plain data and the
  returned plain value is compared here with :func:`~fade_core.sandbox.compare.compare_value`.
- ``humaneval`` (tests with testtype "humaneval"): the candidate process serves calls as above; the
  ``check`` program runs in the checker sandbox against a proxy whose every call is relayed through
  this process to the candidate. The checker never runs candidate code and the candidate never sees
  the check program, so the assert decisions are made on plain data by code the candidate cannot
  touch. What this does not guarantee: a check that inspects the function object or relies on
  argument mutation, printing or files sees only the proxy; weak asserts stay weak; candidates that
  return non-plain objects (generators, custom classes) fail.

Whatever the program does (exit 0 early, print "PASSED", return an object with ``__eq__`` always
True, patch builtins, kill its worker), the pass decision is made here from plain JSON, and an
unanswered test is a failure.

Replies from a worker are parsed with bounded size and depth (:func:`plaindata.loads_bounded`); a
reply that is late, malformed, or reports a sandbox error resets the slot (both of its workers are
killed and restarted on next use), so no later verdict of the slot can be shifted or forged.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from fade_core.sandbox import compare, plaindata
from fade_core.sandbox.cgroups import PoolCgroups, WorkerCgroup
from fade_core.sandbox.isolation import Isolation, payload, resolve

STATUSES = (
    "passed", "wrong_answer", "runtime_error", "timeout", "memory_limit", "output_limit",
    "compile_error", "sandbox_error",
)  # fmt: skip
KINDS = ("stdio", "call")
DEBUG_CHARS = 2000


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sample: a stdio program's run on one test, or a call-style program's
    whole life (loading and every call). With a per-sample cgroup (see :mod:`.cgroups`) memory, tasks
    and CPU time are limited for all the sample's processes together; without one they fall back to
    per-process rlimits, and a memory overrun is then a runtime_error (no kernel evidence of it)."""

    cpu_s: float = 4.0  # CPU seconds of the sample (cgroup CPU time; RLIMIT_CPU per process as well)
    wall_s: float = 8.0  # wall-clock seconds of the sample; every process of it is killed after it
    mem_mb: int = 1024  # memory of the sample, tmpfs included (cgroup; else RLIMIT_AS per process)
    fsize_mb: int = 16  # largest file the program may write (RLIMIT_FSIZE)
    nproc: int = 64  # tasks (processes and threads) of the sample (pids cgroup; else RLIMIT_NPROC per uid)
    nofile: int = 64  # open files per process (RLIMIT_NOFILE)
    stdout_bytes: int = 8 * 1024 * 1024  # captured stdout; more is an output_limit
    stderr_bytes: int = 64 * 1024  # captured stderr; the rest is dropped
    result_bytes: int = 16 * 1024 * 1024  # one call's returned value, serialized
    cpus: float = 1.0  # CPU bandwidth of the sample, in CPUs (cgroup CPU quota)
    tmp_mb: int = 64  # size of the sample's fresh /tmp (its pages count against mem_mb)

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    """The outcome of one program on its tests. ``status`` is one of :data:`STATUSES`."""

    passed: bool
    status: str
    tests_passed: int
    tests_total: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Job:
    """One program for :meth:`Sandbox.run_batch`; fields as in :meth:`Sandbox.run`."""

    code: str
    tests: Sequence[Mapping[str, Any]]
    kind: str
    fn_name: str | None = None
    prompt: str | None = None
    judge: str = "lines"
    float_tol: float = compare.DEFAULT_FLOAT_TOL
    limits: Limits | None = None


class WorkerLost(RuntimeError):
    """The worker died, hung, broke the protocol or reported a sandbox error: the slot is reset."""


def _reply_cap(limits: Limits | None) -> int:
    """Largest reply a worker may send for requests under ``limits``: captured output and a value,
    JSON-escaped (at most 6 bytes per byte), plus framing."""
    lim = limits or Limits()
    return 6 * (lim.stdout_bytes + lim.stderr_bytes + lim.result_bytes) + (1 << 20)


class _Spawner:
    """Starts worker processes from one long-lived daemon thread.

    bubblewrap's --die-with-parent uses PR_SET_PDEATHSIG, which fires when the *thread* that forked
    the process ends, not the process. Workers started from a short-lived pool thread would be killed
    when that thread exits; started from here they live until this process does.
    """

    def __init__(self) -> None:
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _loop(self) -> None:
        while True:
            fn, box, done = self._q.get()
            try:
                box.append((True, fn()))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box.append((False, e))
            done.set()

    def call(self, fn):
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="fade-sandbox-spawner", daemon=True)
                self._thread.start()
        box: list = []
        done = threading.Event()
        self._q.put((fn, box, done))
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value


_spawner = _Spawner()


class _Worker:
    """One worker process and its framed protocol on a private socket (never the worker's stdin or
    stdout: its descriptors 0 and 1 are /dev/null, 2 a log file)."""

    def __init__(self, iso: Isolation, role: str, slot: int, cgroup: WorkerCgroup | None):
        self.role = role
        self.cgroup = cgroup
        self._log = tempfile.TemporaryFile()
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.fd_sock, theirs_fds = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cg_fds = cgroup.open() if cgroup is not None else {}
        try:
            argv = iso.worker_argv(role, slot, theirs.fileno(), theirs_fds.fileno(), cgroup.spec() if cgroup else "")
            self.proc = _spawner.call(
                lambda: subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=self._log,
                    env=iso.worker_env(),
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(theirs.fileno(), theirs_fds.fileno(), *cg_fds.values()),
                )
            )
        finally:
            theirs.close()
            theirs_fds.close()
            if cgroup is not None:
                cgroup.close_fds()
        self.fd = self.sock.fileno()
        try:
            self.send_raw(payload())
            self.hello = self.recv(time.monotonic() + 60)
            if self.hello.get("hello") is not True:
                raise WorkerLost(f"unexpected greeting {self.hello!r:.200}")
        except WorkerLost as e:
            self._log.seek(0)
            err = self._log.read()[-1500:]
            self.close()
            raise WorkerLost(f"{role} worker failed to start: {e}; stderr: {err!r}") from None

    def send_raw(self, data: bytes) -> None:
        try:
            self.sock.sendall(struct.pack(">I", len(data)) + data)
        except OSError as e:
            raise WorkerLost(f"write failed: {e}") from None

    def send(self, obj: Mapping[str, Any]) -> None:
        self.send_raw(json.dumps(obj, separators=(",", ":")).encode())

    def _read_exact(self, n: int, deadline: float) -> bytes:
        parts, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerLost("no answer before the deadline")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, min(n - got, 1 << 20))
            except OSError as e:
                raise WorkerLost(f"read failed: {e}") from None
            if not chunk:
                raise WorkerLost("worker exited")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def recv(self, deadline: float, cap: int | None = None) -> dict[str, Any]:
        """The next reply, parsed with bounded size and depth; anything else is :class:`WorkerLost`."""
        n = struct.unpack(">I", self._read_exact(4, deadline))[0]
        cap = cap or _reply_cap(None)
        if n > cap:
            raise WorkerLost(f"reply of {n} bytes exceeds the cap of {cap}")
        try:
            obj = plaindata.loads_bounded(self._read_exact(n, deadline), max_bytes=cap)
        except ValueError as e:
            raise WorkerLost(f"malformed reply: {e}") from None
        if not isinstance(obj, dict):
            raise WorkerLost("malformed reply: not an object")
        if "sandbox_error" in obj:
            raise WorkerLost(f"worker reported: {str(obj['sandbox_error'])[:1000]}")
        return obj

    def request(self, obj: Mapping[str, Any], timeout: float, cap: int | None = None) -> dict[str, Any]:
        self.send(obj)
        return self.recv(time.monotonic() + timeout, cap)

    def send_fds(self, fds: Sequence[int]) -> None:
        try:
            socket.send_fds(self.fd_sock, [b"F"], list(fds))
        except OSError as e:
            raise WorkerLost(f"descriptor passing failed: {e}") from None

    def stderr_tail(self, n: int = 600) -> str:
        try:
            self._log.seek(0)
            return self._log.read()[-n:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for f in (self.sock, self.fd_sock):
            try:
                f.close()
            except OSError:
                pass
        self.proc.wait()
        self._log.close()
        if self.cgroup is not None:
            self.cgroup.remove()


class _Slot:
    def __init__(self, iso: Isolation, index: int, cgroups: PoolCgroups | None):
        self.iso = iso
        self.index = index
        self.cgroups = cgroups
        self.cand: _Worker | None = None
        self.check: _Worker | None = None

    def _start(self, role: str) -> _Worker:
        cg = self.cgroups.new_worker() if self.cgroups is not None else None
        try:
            return _Worker(self.iso, role, self.index, cg)
        except BaseException:
            if cg is not None:
                cg.remove()
            raise

    def candidate(self) -> _Worker:
        if self.cand is None or not self.cand.alive():
            if self.cand is not None:
                self.cand.close()
                self.cand = None
            self.cand = self._start("candidate")
        return self.cand

    def checker(self) -> _Worker:
        if self.check is None or not self.check.alive():
            if self.check is not None:
                self.check.close()
                self.check = None
            self.check = self._start("checker")
        return self.check

    def logs(self) -> str:
        """The tail of each worker's stderr and its exit status (for a lost-worker verdict)."""
        out = []
        for w in (self.cand, self.check):
            if w is not None:
                out.append(f"{w.role} worker exit={w.proc.poll()} stderr={w.stderr_tail()!r}")
        return "; ".join(out)

    def reset(self) -> None:
        for w in (self.cand, self.check):
            if w is not None:
                w.close()
        self.cand = self.check = None


def _trim(text: str) -> str:
    return text if len(text) <= DEBUG_CHARS else text[:DEBUG_CHARS] + f"... [{len(text) - DEBUG_CHARS} more chars]"


def classify(res: Mapping[str, Any], limits: Limits) -> str | None:
    """Failure status of one finished program (the worker's exec record), or None if it ended cleanly.

    Every status rests on what the worker saw from outside the program (signals, kills, the cgroup's
    OOM counter), never on what the program printed: a program that writes "MemoryError" to stderr
    and exits 1 is a runtime_error."""
    frames = res.get("frames") or []
    if any(isinstance(f, dict) and "compile_error" in f for f in frames):
        return "compile_error"
    sig = res.get("signal")
    if res.get("killed") == "output" or sig == signal.SIGXFSZ:
        return "output_limit"
    if res.get("oom") is True:
        return "memory_limit"
    if res.get("killed") in ("wall", "cpu") or sig == signal.SIGXCPU or (
        sig == signal.SIGKILL and _number(res.get("cpu")) >= limits.cpu_s - 0.05
    ):
        return "timeout"
    failed = sig is not None or res.get("exit") not in (0, None)
    return "runtime_error" if failed else None


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0


def _text(x: Any) -> str:
    return x if isinstance(x, str) else ""


def default_workers() -> int:
    """Slots of a pool sized to the machine: one per CPU plus two, so that while one slot waits on a
    pipe hop another keeps the CPUs busy."""
    return (os.cpu_count() or 1) + 2


def _check_tests(tests: list, kind: str) -> None:
    for i, t in enumerate(tests):
        if not isinstance(t, Mapping) or "input" not in t:
            raise ValueError(f"tests[{i}] must be a mapping with an 'input' key, got {t!r:.200}")
        if kind == "stdio" and t.get("testtype") != "humaneval" and not isinstance(t.get("output"), str):
            raise ValueError(f"tests[{i}].output must be the expected stdout text, got {type(t.get('output')).__name__}")


class Sandbox:
    """A pool of sandbox worker slots. Use as a context manager or call :meth:`close`.

    ``workers``: parallel slots (default: :func:`default_workers`). ``backend``: "auto" (the
    strongest backend that passes its self-test), "bwrap", "unshare" or "none" (default: env
    ``FADE_SANDBOX_BACKEND``, else auto). ``unsafe``: allow a backend without file-system, network
    and per-sample state isolation (warned). ``cgroup_parent``: where per-sample cgroups go (default:
    env ``FADE_SANDBOX_CGROUP``, else found automatically; see :mod:`.cgroups`).
    :attr:`guarantees` says what is in force.
    """

    def __init__(self, workers: int | None = None, *, backend: str | None = None, unsafe: bool = False,
                 limits: Limits | None = None, cgroup_parent: str | None = None, _isolation: Isolation | None = None):  # fmt: skip
        cgroup_parent = cgroup_parent or os.environ.get("FADE_SANDBOX_CGROUP") or None
        backend = backend or os.environ.get("FADE_SANDBOX_BACKEND") or "auto"
        self.isolation = _isolation or resolve(backend, unsafe=unsafe, cgroup_parent=cgroup_parent)
        self.workers = max(1, workers or default_workers())
        self.limits = limits or Limits()
        layout = self.isolation.layout
        # a candidate and a checker worker per slot, each weighing as one process would outside cgroups
        self._cgroups = PoolCgroups(layout, cpu_weight=2 * self.workers) if layout is not None else None
        self._slots: queue.Queue[_Slot] = queue.Queue()
        self._all = [_Slot(self.isolation, i, self._cgroups) for i in range(self.workers)]
        for s in self._all:
            self._slots.put(s)
        self._closed = False
        self._lock = threading.Lock()

    @property
    def guarantees(self):
        """The :class:`~fade_core.sandbox.isolation.Guarantees` of this pool's backend."""
        return self.isolation.guarantees

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for s in self._all:
            s.reset()
        if self._cgroups is not None:
            self._cgroups.close()

    # ---------------------------------------------------------------------------------------- API
    def run(
        self,
        code: str,
        tests: Sequence[Mapping[str, Any]],
        *,
        kind: str,
        fn_name: str | None = None,
        prompt: str | None = None,
        judge: str = "lines",
        float_tol: float = compare.DEFAULT_FLOAT_TOL,
        limits: Limits | None = None,
    ) -> Verdict:
        """Run ``code`` against ``tests`` (each {"input", "output", "testtype"}).

        ``kind``: "stdio" (input is stdin text, output the expected stdout) or "call" (input is the
        list of positional arguments, output the expected value; ``fn_name`` names a function or a
        method of ``class Solution``). Tests with testtype "humaneval" carry a HumanEval check
        program as input: ``code`` is then prompt + completion, ``fn_name`` the entry point, and
        ``prompt`` the HumanEval prompt (its helpers are visible to the check program).
        """
        if self._closed:
            raise RuntimeError("sandbox is closed")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        lim = limits or self.limits
        tests = list(tests)
        if not tests:
            return Verdict(False, "sandbox_error", 0, 0, detail="the problem has no tests")
        _check_tests(tests, kind)
        humaneval = any(t.get("testtype") == "humaneval" for t in tests)
        if humaneval and not fn_name:
            raise ValueError("humaneval tests need fn_name (the entry point)")
        if kind == "call" and not fn_name:
            raise ValueError("call-style tests need fn_name")
        slot = self._slots.get()
        try:
            try:
                if humaneval:
                    return self._run_humaneval(slot, code, tests, fn_name, prompt or "", lim)
                if kind == "stdio":
                    return self._run_stdio(slot, code, tests, judge, float_tol, lim)
                return self._run_call(slot, code, tests, fn_name, float_tol, lim)
            except (WorkerLost, KeyError, TypeError, AttributeError) as e:
                # any anomaly: the slot's workers are replaced, so nothing of it reaches a later sample
                why = str(e) if isinstance(e, WorkerLost) else f"malformed reply: {type(e).__name__}: {e}"
                logs = slot.logs()
                slot.reset()
                return Verdict(False, "sandbox_error", 0, len(tests), detail=f"sandbox worker lost: {why}; {logs}"[:DEBUG_CHARS])
            except BaseException:
                slot.reset()
                raise
        finally:
            self._slots.put(slot)

    def run_batch(self, jobs: Iterable[Job | Mapping[str, Any]], *, progress: bool = False) -> list[Verdict]:
        """Run many programs, every slot busy; results in input order. Jobs are :class:`Job` or
        mappings with the same fields."""
        items = [j if isinstance(j, Job) else Job(**j) for j in jobs]

        def one(j: Job) -> Verdict:
            return self.run(
                j.code, j.tests, kind=j.kind, fn_name=j.fn_name, prompt=j.prompt,
                judge=j.judge, float_tol=j.float_tol, limits=j.limits,
            )  # fmt: skip

        out: list[Verdict | None] = [None] * len(items)
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = {pool.submit(one, j): i for i, j in enumerate(items)}
            if progress and items:
                from rich.progress import Progress

                with Progress(transient=True) as bar:
                    task = bar.add_task("sandbox", total=len(items))
                    for fut in _as_completed(futures):
                        out[futures[fut]] = fut.result()
                        bar.advance(task)
            else:
                for fut in _as_completed(futures):
                    out[futures[fut]] = fut.result()
        return [v for v in out if v is not None]

    # ------------------------------------------------------------------------------------ per kind
    @staticmethod
    def _budget(lim: Limits) -> float:
        """How long the parent waits for a reply: the program's wall limit and time to clean up."""
        return lim.wall_s + 10.0

    def _run_stdio(self, slot: _Slot, code: str, tests: list, judge: str, tol: float, lim: Limits) -> Verdict:
        wall = cpu = 0.0
        last: dict[str, Any] = {}
        cap = _reply_cap(lim)
        for i, t in enumerate(tests):
            stdin = t["input"] if isinstance(t["input"], str) else json.dumps(t["input"])
            w = slot.candidate()
            res = w.request({"op": "stdio", "code": code, "stdin": stdin, "limits": lim.to_wire()}, self._budget(lim), cap)
            wall += _number(res["wall"])
            cpu += _number(res["cpu"])
            last = res
            status = classify(res, lim)
            if status is None:
                ok, why = compare.compare_stdout(_text(res["stdout"]), t["output"], judge, tol)
                if ok:
                    continue
                status, detail = "wrong_answer", f"test {i}: {why}"
            else:
                detail = f"test {i}: {status}" + _compile_detail(res)
            return Verdict(False, status, i, len(tests), wall, cpu, _trim(_text(res["stdout"])), _trim(_text(res["stderr"])), detail)
        return Verdict(True, "passed", len(tests), len(tests), wall, cpu, _trim(_text(last.get("stdout"))),
                       _trim(_text(last.get("stderr"))), "ok")  # fmt: skip

    def _serve(self, w: _Worker, code: str, fn_name: str, lim: Limits, module_name: str) -> Verdict | None:
        res = w.request(
            {"op": "serve", "code": code, "fn_name": fn_name, "limits": lim.to_wire(), "module_name": module_name},
            self._budget(lim), _reply_cap(lim),
        )  # fmt: skip
        if res.get("ready") is True:
            return None
        ex = res.get("exec") or {}
        frame = res.get("frame") or {}
        status = "compile_error" if "compile_error" in frame else classify(ex, lim) or "runtime_error"
        msg = frame.get("error") or frame.get("compile_error") or next(
            (f.get("compile_error") for f in ex.get("frames", []) if "compile_error" in f), ""
        )
        return Verdict(False, status, 0, 0, _number(ex.get("wall")), _number(ex.get("cpu")), _trim(_text(ex.get("stdout"))),
                       _trim(_text(ex.get("stderr"))), f"program did not load: {status}: {msg}"[:DEBUG_CHARS])  # fmt: skip

    def _run_call(self, slot: _Slot, code: str, tests: list, fn_name: str, tol: float, lim: Limits) -> Verdict:
        w = slot.candidate()
        cap = _reply_cap(lim)
        failed = self._serve(w, code, fn_name, lim, "__fade_solution__")
        if failed is not None:
            return replace(failed, tests_total=len(tests))
        wall = 0.0
        verdict: Verdict | None = None
        for i, t in enumerate(tests):
            args = t["input"]
            if not isinstance(args, list):
                args = [args]
            reply = w.request({"op": "call", "args": plaindata.encode(args)}, self._budget(lim), cap)
            wall += _number(reply.get("wall"))
            if reply.get("ok") is not True:
                ex = reply.get("exec") or {}
                status = classify(ex, lim) if reply.get("dead") else None
                status = status or "runtime_error"
                verdict = Verdict(False, status, i, len(tests), detail=f"test {i}: {status}: {str(reply.get('error', ''))[:500]}")
                break
            try:
                value = plaindata.decode(reply.get("value"))
            except (ValueError, TypeError, KeyError, RecursionError) as e:
                verdict = Verdict(False, "wrong_answer", i, len(tests), detail=f"test {i}: undecodable value: {str(e)[:200]}")
                break
            ok, why = compare.compare_value(value, t.get("output"), tol)
            if not ok:
                verdict = Verdict(False, "wrong_answer", i, len(tests), detail=f"test {i}: {why}")
                break
        end = w.request({"op": "end"}, self._budget(lim), cap).get("exec") or {}
        if verdict is None:
            # every answer was right; the program must still end within its limits (threads joined)
            late = classify(end, lim) if end else None
            if late in ("timeout", "memory_limit", "output_limit"):
                verdict = Verdict(False, late, len(tests), len(tests), detail=f"after the last test: {late}")
            else:
                verdict = Verdict(True, "passed", len(tests), len(tests), detail="ok")
        verdict.wall_s = round(wall, 6)
        verdict.cpu_s = _number(end.get("cpu"))
        verdict.stdout, verdict.stderr = _trim(_text(end.get("stdout"))), _trim(_text(end.get("stderr")))
        return verdict

    def _run_humaneval(self, slot: _Slot, code: str, tests: list, fn_name: str, prompt: str, lim: Limits) -> Verdict:
        cand, chk = slot.candidate(), slot.checker()
        cap = _reply_cap(lim)
        t0 = time.monotonic()
        passed, cpu = 0, 0.0
        end: dict[str, Any] = {}
        for i, t in enumerate(tests):
            # fresh pipes per check: checker -> candidate (arguments), candidate -> checker (results)
            a_r, a_w = os.pipe()
            r_r, r_w = os.pipe()
            try:
                cand.send_fds([a_r, r_w])
                cand.send({"op": "serve", "direct": True, "code": code, "fn_name": fn_name,
                           "limits": lim.to_wire(), "module_name": "__fade_candidate__"})  # fmt: skip
                chk.send_fds([r_r, a_w])
                chk.send({"op": "check", "prompt": prompt, "test": t["input"], "fn_name": fn_name, "limits": lim.to_wire()})
            finally:
                for fd in (a_r, a_w, r_r, r_w):
                    os.close(fd)
            ready = cand.recv(time.monotonic() + self._budget(lim), cap)
            msg = chk.recv(time.monotonic() + self._budget(lim), cap)
            if ready.get("ready") is True:
                end = cand.request({"op": "end"}, self._budget(lim), cap).get("exec") or {}
            else:
                end = ready.get("exec") or {}
            cpu += _number(end.get("cpu"))
            result = msg.get("result") or {}
            cand_status = classify(end, lim)
            if ready.get("ready") is True and result.get("passed") is True and cand_status not in ("timeout", "memory_limit", "output_limit"):
                passed += 1
                continue
            ex = msg.get("exec") or {}
            if ready.get("ready") is not True:
                frame = ready.get("frame") or {}
                status = "compile_error" if "compile_error" in frame else cand_status or "runtime_error"
                detail = f"program did not load: {frame.get('error') or frame.get('compile_error') or status}"
            elif result.get("harness_error"):
                status, detail = "sandbox_error", f"check harness: {result['harness_error']}"
            else:
                status = cand_status if cand_status in ("timeout", "memory_limit", "output_limit") else None
                status = status or ("timeout" if classify(ex, lim) == "timeout" else "wrong_answer")
                detail = f"test {i}: " + str(result.get("error") or classify(ex, lim) or status)
            return Verdict(False, status, passed, len(tests), round(time.monotonic() - t0, 6), cpu,
                           _trim(_text(end.get("stdout"))), _trim(_text(end.get("stderr"))), str(detail)[:DEBUG_CHARS])  # fmt: skip
        return Verdict(True, "passed", passed, len(tests), round(time.monotonic() - t0, 6), cpu,
                       _trim(_text(end.get("stdout"))), _trim(_text(end.get("stderr"))), "ok")  # fmt: skip


def _compile_detail(res: Mapping[str, Any]) -> str:
    for f in res.get("frames") or []:
        if isinstance(f, dict) and "compile_error" in f:
            return ": " + str(f["compile_error"])[:500]
    return ""


def _as_completed(futures: Mapping[Any, int]):
    from concurrent.futures import as_completed

    return as_completed(futures)


# ------------------------------------------------------------------------------ module-level API
_default: Sandbox | None = None
_default_key: tuple | None = None
_default_lock = threading.Lock()


def use_settings(*, backend: str | None = None, unsafe: bool | None = None, cgroup_parent: str | None = None) -> None:
    """Make the ``sandbox`` section of the configuration the process-wide default, for this process
    and every process it starts (Dask workers, ``fade`` subcommands): sets ``FADE_SANDBOX_BACKEND``,
    ``FADE_SANDBOX_UNSAFE`` and ``FADE_SANDBOX_CGROUP``. None leaves a setting as it is."""
    if backend is not None:
        os.environ["FADE_SANDBOX_BACKEND"] = backend
    if unsafe is not None:
        if unsafe:
            os.environ["FADE_SANDBOX_UNSAFE"] = "1"
        else:
            os.environ.pop("FADE_SANDBOX_UNSAFE", None)
    if cgroup_parent is not None:
        if cgroup_parent:
            os.environ["FADE_SANDBOX_CGROUP"] = cgroup_parent
        else:
            os.environ.pop("FADE_SANDBOX_CGROUP", None)


def default_sandbox(workers: int | None = None, *, unsafe: bool = False, backend: str | None = None) -> Sandbox:
    """A process-wide sandbox pool, created on first use and closed at interpreter exit. ``backend``
    and ``unsafe`` default to the settings of :func:`use_settings` (the environment)."""
    global _default, _default_key
    backend = backend or os.environ.get("FADE_SANDBOX_BACKEND") or "auto"
    unsafe = unsafe or os.environ.get("FADE_SANDBOX_UNSAFE") == "1"
    key = (workers or default_workers(), unsafe, backend, os.environ.get("FADE_SANDBOX_CGROUP"))
    with _default_lock:
        if _default is None or _default._closed or _default_key != key:
            if _default is not None:
                _default.close()
            _default = Sandbox(workers, unsafe=unsafe, backend=backend)
            _default_key = key
            import atexit

            atexit.register(_default.close)
        return _default


def run(
    code: str,
    tests: Sequence[Mapping[str, Any]],
    *,
    kind: str,
    fn_name: str | None = None,
    limits: Limits | None = None,
    prompt: str | None = None,
    judge: str = "lines",
    float_tol: float = compare.DEFAULT_FLOAT_TOL,
    unsafe: bool = False,
) -> Verdict:
    """Run one program in the process-wide sandbox; see :meth:`Sandbox.run`."""
    return default_sandbox(unsafe=unsafe).run(
        code, tests, kind=kind, fn_name=fn_name, prompt=prompt, judge=judge, float_tol=float_tol, limits=limits
    )


def run_batch(jobs: Iterable[Job | Mapping[str, Any]], *, workers: int | None = None, unsafe: bool = False,
              progress: bool = False) -> list[Verdict]:  # fmt: skip
    """Run many programs in parallel over a pool sized to the machine; see :meth:`Sandbox.run_batch`."""
    return default_sandbox(workers, unsafe=unsafe).run_batch(jobs, progress=progress)


__all__ = [
    "Job", "Limits", "Sandbox", "Verdict", "STATUSES", "classify", "default_sandbox", "default_workers", "run",
    "run_batch", "use_settings",
]  # fmt: skip
