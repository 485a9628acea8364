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
from fade_core.sandbox.isolation import Isolation, resolve

STATUSES = (
    "passed", "wrong_answer", "runtime_error", "timeout", "memory_limit", "output_limit",
    "compile_error", "sandbox_error",
)  # fmt: skip
KINDS = ("stdio", "call")
DEBUG_CHARS = 2000


@dataclass(frozen=True)
class Limits:
    """Resource limits of one test run (a call-style program's limits cover its whole process)."""

    cpu_s: float = 4.0  # CPU seconds (RLIMIT_CPU)
    wall_s: float = 8.0  # wall-clock seconds per test; the process group is killed after it
    mem_mb: int = 1024  # address space (RLIMIT_AS)
    fsize_mb: int = 16  # largest file the program may write (RLIMIT_FSIZE)
    nproc: int = 64  # processes of the sandbox uid (RLIMIT_NPROC)
    nofile: int = 64  # open files (RLIMIT_NOFILE)
    stdout_bytes: int = 8 * 1024 * 1024  # captured stdout; more is an output_limit
    stderr_bytes: int = 64 * 1024  # captured stderr; the rest is dropped
    result_bytes: int = 16 * 1024 * 1024  # one call's returned value, serialized

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
    """The worker died, hung or broke the protocol."""


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
    """One worker process and its framed pipe protocol."""

    def __init__(self, iso: Isolation, role: str):
        self.role = role
        self._log = tempfile.TemporaryFile()
        self.fd_sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = _spawner.call(
                lambda: subprocess.Popen(
                    iso.worker_argv(role, theirs.fileno()),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._log,
                    env=iso.worker_env(),
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(theirs.fileno(),),
                )
            )
        finally:
            theirs.close()
        self.rfd = self.proc.stdout.fileno()
        self.wfd = self.proc.stdin.fileno()
        try:
            self.hello = self.recv(time.monotonic() + 60)
        except WorkerLost as e:
            self._log.seek(0)
            err = self._log.read()[-1500:]
            self.close()
            raise WorkerLost(f"{role} worker failed to start: {e}; stderr: {err!r}") from None

    def send(self, obj: Mapping[str, Any]) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode()
        try:
            self.proc.stdin.write(struct.pack(">I", len(data)) + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise WorkerLost(f"write failed: {e}") from None

    def _read_exact(self, n: int, deadline: float) -> bytes:
        parts, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerLost("no answer before the deadline")
            ready, _, _ = select.select([self.rfd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.rfd, min(n - got, 1 << 20))
            if not chunk:
                raise WorkerLost("worker exited")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def recv(self, deadline: float) -> dict[str, Any]:
        n = struct.unpack(">I", self._read_exact(4, deadline))[0]
        obj = json.loads(self._read_exact(n, deadline))
        if not isinstance(obj, dict):
            raise WorkerLost("malformed frame")
        return obj

    def request(self, obj: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        self.send(obj)
        return self.recv(time.monotonic() + timeout)

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
        for f in (self.proc.stdin, self.proc.stdout, self.fd_sock):
            try:
                f.close()
            except OSError:
                pass
        self.proc.wait()
        self._log.close()


class _Slot:
    def __init__(self, iso: Isolation):
        self.iso = iso
        self.cand: _Worker | None = None
        self.check: _Worker | None = None

    def candidate(self) -> _Worker:
        if self.cand is None or not self.cand.alive():
            if self.cand is not None:
                self.cand.close()
            self.cand = _Worker(self.iso, "candidate")
        return self.cand

    def checker(self) -> _Worker:
        if self.check is None or not self.check.alive():
            if self.check is not None:
                self.check.close()
            self.check = _Worker(self.iso, "checker")
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
    """Failure status of one finished process (the worker's exec record), or None if it ended cleanly."""
    frames = res.get("frames") or []
    if any("compile_error" in f for f in frames):
        return "compile_error"
    sig = res.get("signal")
    if res.get("killed") == "output" or sig == signal.SIGXFSZ:
        return "output_limit"
    if res.get("killed") == "wall" or sig == signal.SIGXCPU or (sig == signal.SIGKILL and res.get("cpu", 0) >= limits.cpu_s - 0.05):
        return "timeout"
    failed = sig is not None or res.get("exit") not in (0, None)
    err = res.get("stderr", "")
    if failed and ("MemoryError" in err or "Cannot allocate memory" in err or "bad_alloc" in err):
        return "memory_limit"
    return "runtime_error" if failed else None


def default_workers() -> int:
    """Slots of a pool sized to the machine: one per CPU plus two, so that while one slot waits on a
    pipe hop another keeps the CPUs busy."""
    return (os.cpu_count() or 1) + 2


class Sandbox:
    """A pool of sandbox worker slots. Use as a context manager or call :meth:`close`.

    ``workers``: parallel slots (default: :func:`default_workers`). ``backend``: "auto" (bwrap, else
    unshare), "bwrap", "unshare" or "none". ``unsafe``: allow running without isolation (warned).
    """

    def __init__(self, workers: int | None = None, *, backend: str = "auto", unsafe: bool = False, limits: Limits | None = None):
        self.isolation = resolve(backend, unsafe=unsafe)
        self.workers = max(1, workers or default_workers())
        self.limits = limits or Limits()
        self._slots: queue.Queue[_Slot] = queue.Queue()
        self._all = [_Slot(self.isolation) for _ in range(self.workers)]
        for s in self._all:
            self._slots.put(s)
        self._closed = False
        self._lock = threading.Lock()

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
        for i, t in enumerate(tests):
            if not isinstance(t, Mapping) or "input" not in t:
                raise ValueError(f"tests[{i}] must be a mapping with an 'input' key, got {t!r:.200}")
        slot = self._slots.get()
        try:
            try:
                if any(t.get("testtype") == "humaneval" for t in tests):
                    if not fn_name:
                        raise ValueError("humaneval tests need fn_name (the entry point)")
                    return self._run_humaneval(slot, code, tests, fn_name, prompt or "", lim)
                if kind == "stdio":
                    return self._run_stdio(slot, code, tests, judge, float_tol, lim)
                if not fn_name:
                    raise ValueError("call-style tests need fn_name")
                return self._run_call(slot, code, tests, fn_name, float_tol, lim)
            except WorkerLost as e:
                logs = slot.logs()
                slot.reset()
                return Verdict(False, "sandbox_error", 0, len(tests), detail=f"sandbox worker lost: {e}; {logs}"[:DEBUG_CHARS])
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
        return lim.wall_s + 10.0

    def _run_stdio(self, slot: _Slot, code: str, tests: list, judge: str, tol: float, lim: Limits) -> Verdict:
        wall = cpu = 0.0
        last: dict[str, Any] = {}
        for i, t in enumerate(tests):
            stdin = t["input"] if isinstance(t["input"], str) else json.dumps(t["input"])
            w = slot.candidate()
            res = w.request({"op": "stdio", "code": code, "stdin": stdin, "limits": lim.to_wire()}, self._budget(lim))
            if "sandbox_error" in res:
                return Verdict(False, "sandbox_error", i, len(tests), detail=res["sandbox_error"])
            wall += res["wall"]
            cpu += res["cpu"]
            last = res
            status = classify(res, lim)
            if status is None:
                expected = t.get("output")
                if not isinstance(expected, str):
                    raise ValueError(f"tests[{i}].output must be the expected stdout text, got {type(expected).__name__}")
                ok, why = compare.compare_stdout(res["stdout"], expected, judge, tol)
                if ok:
                    continue
                status, detail = "wrong_answer", f"test {i}: {why}"
            else:
                detail = f"test {i}: {status}" + _compile_detail(res)
            return Verdict(False, status, i, len(tests), wall, cpu, _trim(res["stdout"]), _trim(res["stderr"]), detail)
        return Verdict(True, "passed", len(tests), len(tests), wall, cpu, _trim(last.get("stdout", "")), _trim(last.get("stderr", "")), "ok")

    def _serve(self, w: _Worker, code: str, fn_name: str, lim: Limits, module_name: str) -> Verdict | None:
        res = w.request(
            {"op": "serve", "code": code, "fn_name": fn_name, "limits": lim.to_wire(), "module_name": module_name},
            self._budget(lim),
        )
        if "sandbox_error" in res:
            return Verdict(False, "sandbox_error", 0, 0, detail=res["sandbox_error"])
        if res.get("ready") is True:
            return None
        ex = res.get("exec") or {}
        frame = res.get("frame") or {}
        status = "compile_error" if "compile_error" in frame else classify(ex, lim) or "runtime_error"
        msg = frame.get("error") or frame.get("compile_error") or next(
            (f.get("compile_error") for f in ex.get("frames", []) if "compile_error" in f), ""
        )
        return Verdict(False, status, 0, 0, ex.get("wall", 0.0), ex.get("cpu", 0.0), _trim(ex.get("stdout", "")),
                       _trim(ex.get("stderr", "")), f"program did not load: {status}: {msg}"[:DEBUG_CHARS])  # fmt: skip

    def _run_call(self, slot: _Slot, code: str, tests: list, fn_name: str, tol: float, lim: Limits) -> Verdict:
        w = slot.candidate()
        failed = self._serve(w, code, fn_name, lim, "__fade_solution__")
        if failed is not None:
            return replace(failed, tests_total=len(tests))
        wall = 0.0
        verdict: Verdict | None = None
        for i, t in enumerate(tests):
            args = t["input"]
            if not isinstance(args, list):
                args = [args]
            reply = w.request({"op": "call", "args": plaindata.encode(args)}, self._budget(lim))
            wall += reply.get("wall", 0.0)
            if reply.get("ok") is not True:
                ex = reply.get("exec") or {}
                status = classify(ex, lim) if reply.get("dead") else None
                status = status or "runtime_error"
                verdict = Verdict(False, status, i, len(tests), detail=f"test {i}: {status}: {str(reply.get('error', ''))[:500]}")
                break
            try:
                value = plaindata.decode(reply.get("value"))
            except (ValueError, TypeError, KeyError) as e:
                verdict = Verdict(False, "wrong_answer", i, len(tests), detail=f"test {i}: undecodable value: {e}")
                break
            ok, why = compare.compare_value(value, t.get("output"), tol)
            if not ok:
                verdict = Verdict(False, "wrong_answer", i, len(tests), detail=f"test {i}: {why}")
                break
        end = w.request({"op": "end"}, self._budget(lim)).get("exec") or {}
        if verdict is None:
            verdict = Verdict(True, "passed", len(tests), len(tests), detail="ok")
        verdict.wall_s = round(wall, 6)
        verdict.cpu_s = end.get("cpu", 0.0)
        verdict.stdout, verdict.stderr = _trim(end.get("stdout", "")), _trim(end.get("stderr", ""))
        return verdict

    def _run_humaneval(self, slot: _Slot, code: str, tests: list, fn_name: str, prompt: str, lim: Limits) -> Verdict:
        cand, chk = slot.candidate(), slot.checker()
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
            ready = cand.recv(time.monotonic() + self._budget(lim))
            msg = chk.recv(time.monotonic() + self._budget(lim))
            if ready.get("ready") is True:
                end = cand.request({"op": "end"}, self._budget(lim)).get("exec") or {}
            else:
                end = ready.get("exec") or {}
            cpu += end.get("cpu", 0.0)
            for reply in (ready, msg):
                if "sandbox_error" in reply:
                    return Verdict(False, "sandbox_error", passed, len(tests), detail=reply["sandbox_error"])
            result = msg.get("result") or {}
            if ready.get("ready") is True and result.get("passed") is True:
                passed += 1
                continue
            cand_status = classify(end, lim)
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
                detail = f"test {i}: " + str(result.get("error") or classify(ex, lim) or "check did not finish")
            return Verdict(False, status, passed, len(tests), round(time.monotonic() - t0, 6), cpu,
                           _trim(end.get("stdout", "")), _trim(end.get("stderr", "")), detail[:DEBUG_CHARS])  # fmt: skip
        return Verdict(True, "passed", passed, len(tests), round(time.monotonic() - t0, 6), cpu,
                       _trim(end.get("stdout", "")), _trim(end.get("stderr", "")), "ok")  # fmt: skip


def _compile_detail(res: Mapping[str, Any]) -> str:
    for f in res.get("frames") or []:
        if "compile_error" in f:
            return ": " + str(f["compile_error"])[:500]
    return ""


def _as_completed(futures: Mapping[Any, int]):
    from concurrent.futures import as_completed

    return as_completed(futures)


# ------------------------------------------------------------------------------ module-level API
_default: Sandbox | None = None
_default_key: tuple | None = None
_default_lock = threading.Lock()


def default_sandbox(workers: int | None = None, *, unsafe: bool = False, backend: str = "auto") -> Sandbox:
    """A process-wide sandbox pool, created on first use and closed at interpreter exit."""
    global _default, _default_key
    key = (workers or default_workers(), unsafe, backend)
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


__all__ = ["Job", "Limits", "Sandbox", "Verdict", "STATUSES", "classify", "default_sandbox", "default_workers", "run", "run_batch"]
