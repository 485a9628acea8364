"""The sandbox worker ("zygote"): runs inside the isolation, forks one process per untrusted program.

Started once per pool slot by :mod:`fade_core.sandbox.pool` inside bubblewrap (or ``unshare``), it
imports the standard library modules that contest programs use, then serves length-prefixed JSON
requests on its stdin/stdout. Each request forks a child that, before any untrusted byte runs:

1. starts its own session and process group (``setsid``) and asks to be killed with the worker;
2. keeps only the descriptors it needs (stdin, stdout, stderr, one or two frame pipes);
3. sets rlimits: CPU seconds, address space, file size, number of processes, open files, no core;
4. enters a fresh work directory and, when the worker runs as root, drops to an unprivileged uid
   (so it cannot signal, trace or read the worker), sets ``no_new_privs`` and drops capabilities.

The worker itself is non-dumpable (no ptrace, no ``/proc/<pid>/fd`` or ``mem`` for same-uid
children) and a child subreaper, so every descendant of a program, even one that escaped its
process group with ``setsid``, is found and killed with SIGKILL after the program ends.

Requests (``op``): ``stdio`` (one run with stdin text, returns stdout/stderr/status), ``serve`` /
``call`` / ``end`` (one process defines a function and answers calls with plain-data arguments, used
for call-style tests; the expected values never come here), ``check`` (the checker role: run a
HumanEval ``check`` program whose ``candidate`` is a proxy; every call is relayed to the parent, which
answers with the plain-data results of the candidate process in the other sandbox).

Standard library only; this file runs under ``python -I`` with its own directory put on sys.path.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plaindata  # noqa: E402

# Modules contest programs commonly import: loaded once here, shared copy-on-write by every fork.
for _m in (
    "math", "collections", "itertools", "heapq", "bisect", "functools", "re", "string", "random",
    "typing", "fractions", "decimal", "statistics", "copy", "datetime", "operator", "array",
    "queue", "hashlib", "io", "textwrap", "dataclasses", "enum", "numbers", "cmath", "builtins",
):  # fmt: skip
    try:
        __import__(_m)
    except ImportError:
        pass

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 4, 38, 36
PR_CAPBSET_DROP = 24
MAXFD = 4096


def close_from(lowfd: int) -> None:
    """Close every descriptor >= ``lowfd`` (one close_range syscall where glibc has it)."""
    fn = getattr(_libc, "close_range", None)
    if fn is None or fn(ctypes.c_uint(lowfd), ctypes.c_uint(0xFFFFFFFF), 0) != 0:
        os.closerange(lowfd, MAXFD)


def _prctl(option: int, arg: int) -> None:
    _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Empty the bounding, effective, permitted and inheritable capability sets of this process."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            break
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    _libc.capset(ctypes.byref(header), ctypes.byref(data))


# ------------------------------------------------------------------------------------------- frames
def write_frame(fd: int, obj: object) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    buf = memoryview(struct.pack(">I", len(data)) + data)
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


def read_exact(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_frame(fd: int, cap: int = 1 << 30) -> dict | None:
    head = read_exact(fd, 4)
    if head is None:
        return None
    n = struct.unpack(">I", head)[0]
    if n > cap:
        raise ValueError(f"frame of {n} bytes exceeds the cap of {cap}")
    body = read_exact(fd, n)
    return None if body is None else json.loads(body)


class FrameBuffer:
    """Reassembles frames from pipe chunks; refuses frames over ``cap`` bytes."""

    def __init__(self, cap: int):
        self.buf = bytearray()
        self.cap = cap
        self.overflow = False

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        if len(self.buf) > self.cap + 4:
            self.overflow = True

    def pop(self) -> dict | None:
        if len(self.buf) < 4:
            return None
        n = struct.unpack(">I", self.buf[:4])[0]
        if n > self.cap:
            self.overflow = True
            return None
        if len(self.buf) < 4 + n:
            return None
        body = bytes(self.buf[4 : 4 + n])
        del self.buf[: 4 + n]
        try:
            obj = json.loads(body)
        except ValueError:
            return {"garbled": True}
        return obj if isinstance(obj, dict) else {"garbled": True}


# -------------------------------------------------------------------------------------- child setup
def _format_exc(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]


def enter_child(fds: dict[int, int], limits: dict, workdir: str, uid: int, gid: int) -> None:
    """Runs in the forked child, before untrusted code: session, descriptors, rlimits, identity."""
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    for sig in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ, signal.SIGXCPU):
        signal.signal(sig, signal.SIG_DFL)
    # move sources out of the way, then place them at their targets
    staged = {t: fcntl.fcntl(s, fcntl.F_DUPFD, 512) for t, s in fds.items()}
    for t, s in staged.items():
        os.dup2(s, t, inheritable=True)
    close_from(max(fds) + 1)
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    mem = int(limits["mem_mb"]) * 1024 * 1024
    for res, soft, hard in (
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, mem, mem),
        (resource.RLIMIT_FSIZE, int(limits["fsize_mb"]) * 1024 * 1024, int(limits["fsize_mb"]) * 1024 * 1024),
        (resource.RLIMIT_NPROC, int(limits["nproc"]), int(limits["nproc"])),
        (resource.RLIMIT_NOFILE, int(limits["nofile"]), int(limits["nofile"])),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(res, (soft, hard))
    os.chdir(workdir)
    if uid >= 0:  # root -> unprivileged uid clears every capability set
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    else:
        drop_capabilities()
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": workdir})
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)  # noqa: SIM115
    sys.setrecursionlimit(10000)


def _flush_and_exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - the program may have closed or replaced them
            pass
    os._exit(code)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    try:
        print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _compile(code: str, name: str, ctl_fd: int) -> object:
    try:
        return compile(code, name, "exec")
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as e:
        write_frame(ctl_fd, {"compile_error": _format_exc(e)})
        os._exit(3)


def program_stdio(code: str) -> None:
    """Child body for one stdin/stdout run. fd 3 carries only a compile error, and is closed before
    the program runs."""
    co = _compile(code, "<solution>", 3)
    os.close(3)
    status = 0
    try:
        exec(co, {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        status = _exit_code(e)
    except BaseException:  # noqa: BLE001 - report every failure as a runtime error
        traceback.print_exc()
        status = 1
    _flush_and_exit(status)


def _resolve(g: dict, fn_name: str):
    fn = g.get(fn_name)
    if callable(fn) and not isinstance(fn, type):
        return fn
    sol = g.get("Solution")
    if isinstance(sol, type) and hasattr(sol, fn_name):
        return getattr(sol(), fn_name)
    raise NameError(f"function {fn_name!r} (or method Solution.{fn_name}) is not defined")


def program_server(code: str, fn_name: str, module_name: str, ctl_fd: int) -> None:
    """Child body for call-style tests: define the program, report readiness on ``ctl_fd``, then
    answer ``{"args": [...]}`` frames on fd 3 with ``{"ok": true, "value": ...}`` or
    ``{"ok": false, "error": ...}`` frames on fd 4."""
    co = _compile(code, "<solution>", ctl_fd)
    g = {"__name__": module_name, "__builtins__": __builtins__}
    try:
        exec(co, g)
        fn = _resolve(g, fn_name)
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc()
        write_frame(ctl_fd, {"ready": False, "error": _format_exc(e)})
        _flush_and_exit(1)
    write_frame(ctl_fd, {"ready": True})
    if ctl_fd != 4:
        os.close(ctl_fd)
    while True:
        req = read_frame(3)
        if req is None:
            _flush_and_exit(0)
        try:
            args = plaindata.decode(req["args"])
            value = fn(*args)
            reply = {"ok": True, "value": plaindata.encode(value)}
        except plaindata.Unencodable as e:
            reply = {"ok": False, "error": str(e), "unencodable": True}
        except BaseException as e:  # noqa: BLE001 - SystemExit included: exiting is not answering
            reply = {"ok": False, "error": _format_exc(e)}
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001
            pass
        write_frame(4, reply)


class CandidateError(Exception):
    """The candidate raised, timed out or could not answer a call of the check program."""


def program_checker(prompt: str, test: str, fn_name: str, result_cap: int) -> None:
    """Child body of the checker role: run the trusted ``check`` program against a proxy.

    The proxy sends each call's arguments as plain data on fd 4 and reads the plain-data result from
    fd 3 (pipes to the candidate process in the other sandbox); this process never runs candidate
    code. Ends with a ``{"done": true, "passed": ...}`` frame on fd 5.
    """
    _prctl(PR_SET_DUMPABLE, 0)

    def candidate(*args, **kwargs):
        if kwargs:
            raise CandidateError("keyword arguments are not supported by the checker proxy")
        try:
            write_frame(4, {"args": plaindata.encode(list(args))})
            reply = read_frame(3, result_cap)
        except (OSError, ValueError) as e:
            raise CandidateError(f"broken channel to the candidate: {e}") from None
        if reply is None:
            raise CandidateError("no reply from the candidate")
        if not reply.get("ok"):
            raise CandidateError(str(reply.get("error", "candidate failed"))[:500])
        return plaindata.decode(reply["value"])

    candidate.__name__ = fn_name
    g = {"__name__": "__fade_check__", "__builtins__": __builtins__}
    try:
        exec(compile(prompt, "<prompt>", "exec"), g)
    except BaseException as e:  # noqa: BLE001
        write_frame(5, {"done": True, "passed": False, "harness_error": "prompt: " + _format_exc(e)})
        _flush_and_exit(0)
    g[fn_name] = candidate
    try:
        exec(compile(test, "<check>", "exec"), g)
        check = g["check"]
    except BaseException as e:  # noqa: BLE001
        write_frame(5, {"done": True, "passed": False, "harness_error": "test program: " + _format_exc(e)})
        _flush_and_exit(0)
    try:
        check(candidate)
        result = {"done": True, "passed": True}
    except AssertionError as e:
        tb = traceback.extract_tb(e.__traceback__)
        line = next((f.lineno for f in reversed(tb) if f.filename == "<check>"), None)
        result = {"done": True, "passed": False, "error": f"assertion failed at check line {line}"}
    except CandidateError as e:
        result = {"done": True, "passed": False, "error": "candidate: " + str(e)}
    except BaseException as e:  # noqa: BLE001
        result = {"done": True, "passed": False, "error": _format_exc(e)}
    write_frame(5, result)
    _flush_and_exit(0)


# ------------------------------------------------------------------------------------ the supervisor
class Child:
    """A forked program as seen by the worker: captured output, a frame pipe, a deadline, its status."""

    def __init__(self, pid: int, out_fd: int, err_fd: int, ctl_fd: int | None, in_fd: int | None, limits: dict):
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.fds = {"out": out_fd, "err": err_fd}
        if ctl_fd is not None:
            self.fds["ctl"] = ctl_fd
        self.in_fd = in_fd
        self.limits = limits
        self.out, self.err = bytearray(), bytearray()
        self.err_dropped = 0
        self.frames = FrameBuffer(int(limits["result_bytes"]))
        self.killed: str | None = None
        self.exited = False
        self.status: int | None = None
        self.cpu = 0.0
        self.t0 = time.monotonic()
        for fd in self.fds.values():
            os.set_blocking(fd, False)

    def kill(self, reason: str | None = None) -> None:
        if reason and not self.killed:
            self.killed = reason
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass

    def _read(self, name: str) -> None:
        fd = self.fds[name]
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            os.close(fd)
            del self.fds[name]
            return
        if name == "out":
            self.out += chunk
            if len(self.out) > self.limits["stdout_bytes"]:
                del self.out[self.limits["stdout_bytes"] :]
                self.kill("output")
        elif name == "err":
            room = self.limits["stderr_bytes"] - len(self.err)
            self.err += chunk[: max(0, room)]
            self.err_dropped += max(0, len(chunk) - max(0, room))
        else:
            self.frames.feed(chunk)
            if self.frames.overflow:
                self.kill("output")

    def pump(self, deadline: float, want_frame: bool, stop_fd: int | None = None) -> dict | None:
        """Serve the pipes until a frame arrives (``want_frame``), ``stop_fd`` is readable, or the
        child has exited and its pipes are closed; kills the child at ``deadline``. Returns the frame
        or None."""
        exit_grace: float | None = None
        while True:
            if want_frame:
                frame = self.frames.pop()
                if frame is not None:
                    return frame
                if self.frames.overflow:
                    return None
            if self.exited and not self.fds:
                return None
            now = time.monotonic()
            if now >= deadline and not self.killed:
                self.kill("wall")
                deadline = now + 1.0
            if self.exited:
                if exit_grace is None:
                    exit_grace = now + 0.2
                elif now >= exit_grace:  # descendants hold the pipes open: kill them and stop listening
                    kill_descendants(exclude={self.pid})
                    for name in list(self.fds):
                        self._read(name)
                        if name in self.fds:
                            os.close(self.fds.pop(name))
                    return None
            readers = list(self.fds.values()) + ([] if self.exited else [self.pidfd])
            if stop_fd is not None:
                readers.append(stop_fd)
            wait = max(0.0, min(deadline, exit_grace or deadline) - now)
            try:
                ready, _, _ = select.select(readers, [], [], wait)
            except InterruptedError:
                continue
            if stop_fd is not None and stop_fd in ready:
                return None
            for fd in ready:
                if fd == self.pidfd:
                    self.exited = True
                else:
                    for name, f in list(self.fds.items()):
                        if f == fd:
                            self._read(name)

    def finish(self, deadline: float) -> dict:
        """Wait for the child (killing it at ``deadline``), reap it and its descendants, and describe it."""
        if self.in_fd is not None:
            os.close(self.in_fd)
            self.in_fd = None
        self.pump(deadline, want_frame=False)
        self.kill()
        _, status, usage = os.wait4(self.pid, 0)
        os.close(self.pidfd)
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
        kill_descendants(exclude=set())
        exit_code = os.waitstatus_to_exitcode(status)
        frames = []
        while (f := self.frames.pop()) is not None:
            frames.append(f)
        return {
            "exit": exit_code if exit_code >= 0 else None,
            "signal": -exit_code if exit_code < 0 else None,
            "killed": self.killed,
            "wall": round(time.monotonic() - self.t0, 6),
            "cpu": round(usage.ru_utime + usage.ru_stime, 6),
            "stdout": self.out.decode("utf-8", "replace"),
            "stderr": self.err.decode("utf-8", "replace"),
            "stderr_dropped": self.err_dropped,
            "frames": frames,
        }


def _proc_children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def kill_descendants(exclude: set[int]) -> None:
    """SIGKILL every descendant of this worker except ``exclude`` and reap those that become its
    children. As a child subreaper the worker inherits orphans (even ones that called ``setsid``), so
    a descendant is always reachable from the worker through /proc's parent links."""
    me = os.getpid()
    for _ in range(500):
        if not exclude:
            try:  # fast path: no children at all means no descendants at all
                os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
        kids = _proc_children()
        todo, found = [p for p in kids.get(me, []) if p not in exclude], []
        while todo:
            p = todo.pop()
            found.append(p)
            todo.extend(kids.get(p, []))
        if not found:
            return
        for p in found:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in kids.get(me, []):
            if p not in exclude:
                try:
                    os.waitpid(p, os.WNOHANG)
                except ChildProcessError:
                    pass
        time.sleep(0.001)


class Worker:
    def __init__(self, role: str, uid: int, gid: int, work_root: str):
        self.role = role
        self.uid, self.gid = uid, gid
        self.work_root = work_root
        self.counter = 0
        self.server: Child | None = None
        self.server_dir: str | None = None
        self.server_deadline = 0.0
        self.fd_sock: socket.socket | None = None
        os.makedirs(work_root, exist_ok=True)

    # -- helpers
    def _workdir(self) -> str:
        self.counter += 1
        path = os.path.join(self.work_root, f"w{os.getpid()}-{self.counter}")
        os.mkdir(path, 0o700)
        if self.uid >= 0:
            os.chown(path, self.uid, self.gid)
        return path

    def _spawn(self, body, fds: dict[int, int], limits: dict, workdir: str) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                enter_child(fds, limits, workdir, self.uid, self.gid)
                body()
            except BaseException:  # noqa: BLE001
                try:
                    traceback.print_exc()
                finally:
                    os._exit(71)
            os._exit(0)
        return pid

    @staticmethod
    def _rmtree(path: str | None) -> None:
        if not path:
            return
        try:
            os.rmdir(path)  # the common case: the program left nothing behind
        except OSError:
            import shutil

            shutil.rmtree(path, ignore_errors=True)

    # -- ops
    def op_stdio(self, req: dict) -> dict:
        limits = req["limits"]
        workdir = self._workdir()
        stdin_fd = os.memfd_create("stdin")
        os.write(stdin_fd, req.get("stdin", "").encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        code = req["code"]
        pid = self._spawn(lambda: program_stdio(code), {0: stdin_fd, 1: out_w, 2: err_w, 3: ctl_w}, limits, workdir)
        for fd in (stdin_fd, out_w, err_w, ctl_w):
            os.close(fd)
        child = Child(pid, out_r, err_r, ctl_r, None, limits)
        res = child.finish(time.monotonic() + limits["wall_s"])
        self._rmtree(workdir)
        return res

    def op_serve(self, req: dict) -> dict:
        """Start a call server for ``code``. With ``direct``, two pipe ends arrive on the fd socket
        (arguments from, results to a checker in the other sandbox) and this worker only watches it."""
        self._end_server()
        limits = req["limits"]
        direct = bool(req.get("direct"))
        self.server_dir = self._workdir()
        null = os.open("/dev/null", os.O_RDONLY)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        if direct:
            args_r, res_w = self.recv_fds(2)
            args_w = res_r = None
        else:
            args_r, args_w = os.pipe()
            res_r, res_w = os.pipe()
        code, fn_name, module = req["code"], req["fn_name"], req.get("module_name", "__fade_solution__")
        pid = self._spawn(
            lambda: program_server(code, fn_name, module, 5),
            {0: null, 1: out_w, 2: err_w, 3: args_r, 4: res_w, 5: ctl_w},
            limits,
            self.server_dir,
        )
        for fd in (null, out_w, err_w, args_r, res_w, ctl_w):
            os.close(fd)
        self.server = Child(pid, out_r, err_r, ctl_r, args_w, limits)
        if res_r is not None:
            self.server.fds["res"] = res_r
            os.set_blocking(res_r, False)
        # a direct server lives for one check; a relayed one as long as the parent keeps calling
        self.server_deadline = time.monotonic() + (limits["wall_s"] + 2.0 if direct else 1e7)
        frame = self.server.pump(time.monotonic() + limits["wall_s"], want_frame=True)
        if frame is not None and frame.get("ready") is True:
            if not direct:  # from now on frames come from the result pipe
                os.close(self.server.fds.pop("ctl"))
                self.server.fds["ctl"] = self.server.fds.pop("res")
            return {"ready": True}
        return {"ready": False, "frame": frame, **self._end_server()}

    def op_call(self, req: dict) -> dict:
        srv = self.server
        if srv is None or srv.exited or srv.in_fd is None:
            return {"ok": False, "dead": True, **self._end_server()}
        t0 = time.monotonic()
        try:
            write_frame(srv.in_fd, {"args": req["args"]})  # small; the server is blocked reading
        except OSError:
            return {"ok": False, "dead": True, **self._end_server()}
        frame = srv.pump(t0 + srv.limits["wall_s"], want_frame=True)
        if frame is None or "ok" not in frame:
            return {"ok": False, "dead": True, **self._end_server()}
        frame["wall"] = round(time.monotonic() - t0, 6)
        return frame

    def op_end(self, req: dict) -> dict:
        return self._end_server()

    def _end_server(self) -> dict:
        srv, self.server = self.server, None
        if srv is None:
            return {}
        res = srv.finish(time.monotonic() + 0.5)
        self._rmtree(self.server_dir)
        self.server_dir = None
        return {"exec": res}

    def idle(self, proto_in: int) -> None:
        """Between requests: keep draining a direct server's output (so it never blocks on a full
        pipe) and kill it at its deadline, until the next request arrives."""
        srv = self.server
        if srv is None:
            return
        srv.pump(self.server_deadline, want_frame=False, stop_fd=proto_in)

    def op_check(self, req: dict) -> dict:
        """Run a check program whose candidate proxy talks to a server in the candidate sandbox
        over the two pipe ends that arrive on the fd socket."""
        limits = req["limits"]
        res_r, args_w = self.recv_fds(2)
        workdir = self._workdir()
        null = os.open("/dev/null", os.O_RDONLY)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        prompt, test, fn_name = req.get("prompt", ""), req["test"], req["fn_name"]
        cap = int(limits["result_bytes"])
        pid = self._spawn(
            lambda: program_checker(prompt, test, fn_name, cap),
            {0: null, 1: out_w, 2: err_w, 3: res_r, 4: args_w, 5: ctl_w},
            limits,
            workdir,
        )
        for fd in (null, out_w, err_w, res_r, args_w, ctl_w):
            os.close(fd)
        child = Child(pid, out_r, err_r, ctl_r, None, limits)
        deadline = time.monotonic() + limits["wall_s"]
        done = child.pump(deadline, want_frame=True)
        res = child.finish(deadline)
        self._rmtree(workdir)
        return {"done": True, "result": done, "exec": res}

    def recv_fds(self, n: int) -> list[int]:
        if self.fd_sock is None:
            raise RuntimeError("this worker has no descriptor socket")
        _, fds, _, _ = socket.recv_fds(self.fd_sock, 16, n)
        if len(fds) != n:
            for fd in fds:
                os.close(fd)
            raise RuntimeError(f"expected {n} descriptors, got {len(fds)}")
        return fds


def setup_mounts() -> None:
    """Used with the ``unshare`` backend (own mount namespace): fresh tmpfs over the shared writable
    directories and every other mount remounted read-only."""
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
        1, 2, 4, 8, 32, 4096, 16384, 1 << 18,
    )  # fmt: skip
    flag_of = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}

    def mount(src, target, fstype, flags, data):
        if _libc.mount(src, target, fstype, ctypes.c_ulong(flags), data) != 0:
            raise OSError(ctypes.get_errno(), f"mount {target.decode()}")

    mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    fresh = []
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/user"):
        if os.path.isdir(d):
            mount(b"tmpfs", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=256m,mode=755")
            fresh.append(d)
    with open("/proc/self/mountinfo") as f:
        rows = [line.split() for line in f]
    for row in sorted(rows, key=lambda r: r[4]):
        point, opts = row[4].replace("\\040", " "), row[5].split(",")
        if point in fresh or point.startswith(("/proc", "/sys", "/dev")):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for o in opts:
            flags |= flag_of.get(o, 0)
        try:
            mount(None, point.encode(), None, flags, None)
        except OSError:
            pass  # a mount we cannot remount stays as it is; the uid drop still protects it


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=("candidate", "checker"), required=True)
    ap.add_argument("--uid", type=int, default=-1)
    ap.add_argument("--gid", type=int, default=-1)
    ap.add_argument("--work-root", default="/tmp/fade-work")
    ap.add_argument("--setup-mounts", action="store_true")
    ap.add_argument("--fd-sock", type=int, default=-1)
    a = ap.parse_args()
    if a.setup_mounts:
        setup_mounts()
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_DUMPABLE, 0)
    worker = Worker(a.role, a.uid, a.gid, a.work_root)
    import gc

    gc.collect()
    gc.freeze()  # imported objects leave the collector's view: forks do not copy pages to scan them
    if a.fd_sock >= 0:
        worker.fd_sock = socket.socket(fileno=os.dup(a.fd_sock))
        os.close(a.fd_sock)
    net = "none"
    try:
        net = ",".join(sorted(n for _, n in socket.if_nameindex()))
    except OSError:
        pass
    write_frame(proto_out, {"hello": True, "pid": os.getpid(), "uid": os.getuid(), "interfaces": net})
    while True:
        worker.idle(proto_in)
        req = read_frame(proto_in)
        if req is None:
            worker._end_server()
            kill_descendants(exclude=set())
            os._exit(0)
        op = req.get("op")
        try:
            if op not in ("stdio", "serve", "call", "end", "check"):
                raise ValueError(f"unknown op {op!r}")
            reply = getattr(worker, f"op_{op}")(req)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            reply = {"sandbox_error": f"{type(e).__name__}: {e}"[:2000]}
        write_frame(proto_out, reply)


if __name__ == "__main__":
    main()
