"""The trusted parent's end of sandbox workers: one worker process and its protocol, a slot of two
workers, and what a sample is and how it ended (:class:`Limits`, :class:`Verdict`, :func:`classify`).

A :class:`Worker` is one pre-forked, pre-imported Python inside the isolation (the zygote, see
:mod:`fade_core.sandbox._zygote`), started from one long-lived thread and spoken to in length-prefixed
JSON frames on a private socket. A :class:`Slot` is one candidate worker plus, started on first need,
one checker worker in a second, separate sandbox for HumanEval check programs; :class:`Slots` is a
set of them with their cgroups. Both :mod:`fade_core.sandbox.pool` (the test loops and verdicts) and
:mod:`fade_core.sandbox.selftest` (the probes a backend must pass before the pool uses it) run
programs through these.

Replies from a worker are parsed with bounded size and depth (:func:`plaindata.loads_bounded`); a
reply that is late, malformed, or reports a sandbox error raises :class:`WorkerLost`, on which the
caller resets the slot (both of its workers are killed and restarted on next use), so no later
verdict of the slot can be shifted or forged.
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
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fade_core.sandbox import compare, plaindata
from fade_core.sandbox.cgroups import PoolCgroups, WorkerCgroup
from fade_core.sandbox.isolation import Isolation, payload

STATUSES = (
    "passed", "wrong_answer", "runtime_error", "timeout", "memory_limit", "output_limit",
    "compile_error", "sandbox_error",
)  # fmt: skip


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
    """One program for :meth:`~fade_core.sandbox.pool.Sandbox.run_batch`; fields as in
    :meth:`~fade_core.sandbox.pool.Sandbox.run`."""

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


def reply_cap(limits: Limits | None) -> int:
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


class Worker:
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
        cap = cap or reply_cap(None)
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


class Slot:
    """Slot ``index``: its candidate worker and, on first need, its checker worker; a worker that
    died is replaced on next use, and :meth:`reset` replaces both."""

    def __init__(self, iso: Isolation, index: int, cgroups: PoolCgroups | None):
        self.iso = iso
        self.index = index
        self.cgroups = cgroups
        self.cand: Worker | None = None
        self.check: Worker | None = None

    def _start(self, role: str) -> Worker:
        cg = self.cgroups.new_worker() if self.cgroups is not None else None
        try:
            return Worker(self.iso, role, self.index, cg)
        except BaseException:
            if cg is not None:
                cg.remove()
            raise

    def candidate(self) -> Worker:
        if self.cand is None or not self.cand.alive():
            if self.cand is not None:
                self.cand.close()
                self.cand = None
            self.cand = self._start("candidate")
        return self.cand

    def checker(self) -> Worker:
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


class Slots:
    """``n`` slots of ``iso`` and the pool's cgroups they take their per-sample cgroups from (None
    without a cgroup layout). Close it, or use it as a context manager, to stop every worker."""

    def __init__(self, iso: Isolation, n: int):
        # a candidate and a checker worker per slot, each weighing as one process would outside cgroups
        self.cgroups = PoolCgroups(iso.layout, cpu_weight=2 * n) if iso.layout is not None else None
        self.all = [Slot(iso, i, self.cgroups) for i in range(n)]

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for s in self.all:
            s.reset()
        if self.cgroups is not None:
            self.cgroups.close()


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
        sig == signal.SIGKILL and reply_number(res.get("cpu")) >= limits.cpu_s - 0.05
    ):
        return "timeout"
    failed = sig is not None or res.get("exit") not in (0, None)
    return "runtime_error" if failed else None


def reply_number(x: Any) -> float:
    """A number field of a worker's reply as a float; anything else (bool included) is 0.0."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0
