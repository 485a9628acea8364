"""The sandbox worker ("zygote"): runs inside the isolation, forks one process per untrusted program.

Started once per pool slot by :mod:`fade_core.sandbox.pool` inside bubblewrap or ``unshare`` (see
:mod:`fade_core.sandbox.isolation`), as PID 1 of its own PID namespace. Its source arrives over the
protocol socket (nothing of the project is mounted). It imports the standard library modules contest
programs use, then serves length-prefixed JSON requests on that socket. Each request forks a child
that, before any untrusted byte runs:

1. starts its own session and asks to be killed with the worker;
2. is born in the worker's cgroup, whose limits the worker set for this sample (memory, tasks, CPU:
   see :class:`SampleCgroup`), and makes itself the kernel's first choice when memory runs out;
3. enters fresh mount, IPC and cgroup namespaces (as an ordinary user: inside a fresh user namespace
   first) and mounts a fresh tmpfs on ``/tmp`` and ``/dev/shm``; nothing it writes survives it;
4. keeps only the descriptors it needs (stdin, stdout, stderr, its frame pipes);
5. sets rlimits, drops to its unprivileged uid (root parent) or drops every capability (user
   parent), sets ``no_new_privs`` and installs the seccomp filter of
   :mod:`fade_core.sandbox.syscall_filter`;
6. compiles the program and closes its setup pipe: setup failures and compile errors travel only on
   that pipe, before any untrusted byte runs, so a program cannot forge them.

The worker is PID 1 and non-dumpable: programs can neither signal it (the kernel drops signals to a
namespace's init that it does not handle, SIGKILL and SIGSTOP included), nor trace it, nor open its
``/proc`` entries or descriptors. After each program every other process of the namespace is killed
(``kill(-1)`` from PID 1) and reaped, so nothing a program started outlives it.

Requests (``op``): ``stdio`` (one run with stdin text, returns stdout/stderr/status), ``serve`` /
``call`` / ``end`` (one process defines a function and answers calls with plain-data arguments, used
for call-style tests; the expected values never come here), ``check`` (the checker role: run a
HumanEval ``check`` program whose ``candidate`` is a proxy; every call goes to the candidate process
in the other sandbox over pipes the parent handed both sides).

Standard library only.
"""

from __future__ import annotations

import contextlib
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
import warnings

from fade_core.sandbox import plaindata, syscall_filter

# Modules contest programs commonly import: loaded once here, shared copy-on-write by every fork.
for _m in (
    "math", "collections", "itertools", "heapq", "bisect", "functools", "re", "string", "random",
    "typing", "fractions", "decimal", "statistics", "copy", "datetime", "operator", "array",
    "queue", "hashlib", "io", "textwrap", "dataclasses", "enum", "numbers", "cmath", "builtins",
    "threading",
):  # fmt: skip
    try:
        __import__(_m)
    except ImportError:
        pass

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_CAPBSET_DROP = 1, 4, 36, 24
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x02000000, 0x08000000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18,
)  # fmt: skip
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
MAXFD = 4096
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


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
    """Empty the bounding, effective, permitted, inheritable (and so ambient) capability sets."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            break
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda x: None if x is None else x.encode())  # noqa: E731
    _check(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


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
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_frame(fd: int, cap: int = 1 << 30) -> dict | None:
    """One frame from ``fd`` (None at end of file); frames over ``cap`` bytes or nested deeper than
    :data:`plaindata.MAX_JSON_DEPTH` raise ValueError."""
    head = read_exact(fd, 4)
    if head is None:
        return None
    n = struct.unpack(">I", head)[0]
    if n > cap:
        raise ValueError(f"frame of {n} bytes exceeds the cap of {cap}")
    body = read_exact(fd, n)
    return None if body is None else plaindata.loads_bounded(body, max_bytes=cap)


class FrameBuffer:
    """Reassembles frames from a program's pipe; refuses frames over ``cap`` bytes, and turns a frame
    that is not a bounded JSON object into ``{"garbled": True}``."""

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
            obj = plaindata.loads_bounded(body, max_bytes=self.cap)
        except ValueError:
            return {"garbled": True}
        return obj if isinstance(obj, dict) else {"garbled": True}


# -------------------------------------------------------------------------------------- the cgroup
class SampleCgroup:
    """The cgroup of this worker and of the one sample it runs at a time, reached through directory
    descriptors the trusted parent opened (cgroup v1: one per controller; v2: one).

    The worker moves itself in once, at start; every program it forks is then born inside (moving a
    process between cgroups takes a system-wide lock and an RCU grace period, 10-30 ms under load,
    too slow per program). Before each program the limits are set to the worker's idle usage plus the
    request's: ``mem_mb`` more memory (no swap), ``nproc`` more tasks, ``cpus`` CPUs of bandwidth.
    Counters (CPU time, OOM kills) are read as differences across the program. Programs are the
    kernel's first choice when memory runs out (``oom_score_adj`` 1000); a root worker is exempt."""

    def __init__(self, version: int, fds: dict[str, int]):
        self.version = version
        self.fds = fds
        self._written: dict[tuple[str, str], str] = {}
        self.main = "unified" if version == 2 else "pids"

    @classmethod
    def parse(cls, spec: str) -> SampleCgroup | None:
        """``"1:memory=5,pids=6,cpu=7,cpuacct=8"`` or ``"2:unified=5"``; empty: None."""
        if not spec:
            return None
        version, _, pairs = spec.partition(":")
        fds = {k: int(v) for k, v in (p.split("=") for p in pairs.split(",") if p)}
        return cls(int(version), fds)

    def has(self, controller: str) -> bool:
        return self.version == 2 or controller in self.fds

    def _open(self, ctrl: str, name: str, flags: int) -> int:
        return os.open(name, flags, dir_fd=self.fds["unified" if self.version == 2 else ctrl])

    def _write(self, ctrl: str, name: str, value: str, *, optional: bool = False) -> None:
        if self._written.get((ctrl, name)) == value:
            return
        try:
            fd = self._open(ctrl, name, os.O_WRONLY)
            try:
                os.write(fd, value.encode())
            finally:
                os.close(fd)
        except OSError:
            if optional:
                return
            raise
        self._written[(ctrl, name)] = value

    def _read(self, ctrl: str, name: str) -> str:
        fd = self._open(ctrl, name, os.O_RDONLY)
        try:
            return os.read(fd, 65536).decode()
        finally:
            os.close(fd)

    def join(self) -> None:
        """Move the calling process (the worker, at start) into the cgroup, every hierarchy."""
        for ctrl in sorted(self.fds):
            fd = self._open(ctrl, "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        try:  # only a root worker may lower its own score; programs raise theirs to the maximum
            _write_file("/proc/self/oom_score_adj", "-1000")
        except OSError:
            pass

    def configure(self, limits: dict) -> None:
        """Limits of the next program: the worker's idle usage plus the request's memory (no swap),
        tasks and CPU bandwidth."""
        usage = self._read("memory", "memory.current" if self.version == 2 else "memory.usage_in_bytes")
        base = -(-int(usage.strip() or 0) // (4 << 20)) * (4 << 20)  # rounded up to 4 MiB: rarely rewritten
        mem = str(base + int(limits["mem_mb"]) * 1024 * 1024)
        tasks = str(int(limits["nproc"]) + 1)  # + the worker
        quota, period = int(float(limits.get("cpus", 1.0)) * 100_000), 100_000
        if self.version == 2:
            self._write("unified", "memory.max", mem)
            self._write("unified", "memory.swap.max", "0", optional=True)
            self._write("unified", "pids.max", tasks)
            self._write("unified", "cpu.max", f"{quota} {period}", optional=True)
            return
        try:
            self._write("memory", "memory.limit_in_bytes", mem)
        except OSError:  # below the current memory+swap limit only: raise that first
            self._write("memory", "memory.memsw.limit_in_bytes", mem, optional=True)
            self._write("memory", "memory.limit_in_bytes", mem)
        self._write("memory", "memory.memsw.limit_in_bytes", mem, optional=True)
        self._write("memory", "memory.swappiness", "0", optional=True)
        self._write("pids", "pids.max", tasks)
        if "cpu" in self.fds:
            self._write("cpu", "cpu.cfs_period_us", str(period), optional=True)
            self._write("cpu", "cpu.cfs_quota_us", str(quota), optional=True)

    def cpu_ns(self) -> int | None:
        """CPU time used by every task that ran in the cgroup, in ns (None: not accounted)."""
        if self.version == 2:
            for line in self._read("unified", "cpu.stat").splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
            return None
        if "cpuacct" in self.fds:
            return int(self._read("cpuacct", "cpuacct.usage").strip() or 0)
        return None

    def oom_kills(self) -> int:
        """Processes the kernel killed for the cgroup's memory limit, so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for line in self._read("memory", name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def others(self) -> list[int]:
        """Processes in the cgroup other than the worker (pids as this namespace sees them)."""
        me = os.getpid()
        return [p for p in (int(x) for x in self._read(self.main, "cgroup.procs").split()) if p != me]

    def snapshot(self) -> tuple[int | None, int]:
        return self.cpu_ns(), self.oom_kills()


# ----------------------------------------------------------------------------------- file systems
def _mount_flags_of(path: str) -> int:
    """The per-mount flags of ``path`` that a remount must keep (locked in a user namespace)."""
    f = os.statvfs(path).f_flag
    flags = 0
    for st, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                   (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):  # fmt: skip
        if f & st:
            flags |= ms
    return flags


def _bind_from_fd(fd: int, target: str, read_only: bool) -> None:
    src = f"/proc/self/fd/{fd}"
    if os.path.isdir(src):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(src, target, None, MS_BIND | MS_REC)
    if read_only:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _mount_flags_of(target))


def build_root(binds: list[str], symlinks: dict[str, str]) -> None:
    """For the ``unshare`` backend (own mount namespace, root in it): make a new root that holds only
    ``binds`` (read-only, at their own paths), ``symlinks``, a fresh /proc, a minimal read-only /dev
    and an empty /tmp, pivot into it and make it read-only. The host file system is gone after."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    sources = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in sorted(binds) if os.path.lexists(p)]
    devs = [(d, os.open(f"/dev/{d}", os.O_PATH | os.O_CLOEXEC)) for d in DEV_NODES if os.path.exists(f"/dev/{d}")]
    proc = os.open("/proc", os.O_PATH | os.O_CLOEXEC)
    new = "/tmp"  # exists everywhere; binds that lived under it were opened above
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
    for path, fd in sources:
        _bind_from_fd(fd, new + path, read_only=True)
        os.close(fd)
    for link, target in symlinks.items():
        os.symlink(target, new + link)
    os.mkdir(new + "/proc")
    _mount(f"/proc/self/fd/{proc}", new + "/proc", None, MS_BIND | MS_REC)
    os.close(proc)
    os.mkdir(new + "/dev")
    _mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for d, fd in devs:
        _bind_from_fd(fd, f"{new}/dev/{d}", read_only=False)
        os.close(fd)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{new}/dev/{name}")
    os.mkdir(new + "/dev/shm")
    _mount(None, new + "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    os.makedirs(new + "/tmp", 0o755, exist_ok=True)  # exists when Python lives under /tmp
    os.chdir(new)
    _check(_libc.syscall(155 if syscall_filter.machine() == "x86_64" else 41, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def enter_sample_namespaces(identity: str, uid: int, gid: int, rebind: list[str], tmp_bytes: int) -> None:
    """In the child: fresh mount, IPC and cgroup namespaces (``identity == "userns"``: inside a fresh
    user namespace in which ``uid``/``gid`` are this user), a fresh tmpfs on /tmp and /dev/shm owned by
    the program, and the Python directories of ``rebind`` (those under /tmp) bound back on top."""
    if identity == "userns":
        euid, egid = os.geteuid(), os.getegid()
        _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWCGROUP), "unshare")
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {euid} 1\n")
        _write_file("/proc/self/gid_map", f"{gid} {egid} 1\n")
    else:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWCGROUP), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in rebind]
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_bytes},mode=0700,uid={uid},gid={gid}")
    for path, fd in keep:
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               f"size={min(tmp_bytes, 64 << 20)},mode=0700,uid={uid},gid={gid}")  # fmt: skip


# -------------------------------------------------------------------------------------- child setup
def _format_exc(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]


class Plan:
    """How this worker's children are set up (from the command line the parent built)."""

    def __init__(self, identity: str, uid: int, gid: int, rebind: list[str], cgroup: SampleCgroup | None,
                 private_mounts: bool, work_root: str):  # fmt: skip
        self.identity = identity  # "setuid" (root parent), "userns" (user parent) or "none"
        self.uid, self.gid = uid, gid
        self.rebind = rebind
        self.cgroup = cgroup
        self.private_mounts = private_mounts
        self.work_root = work_root


def enter_child(fds: dict[int, int], limits: dict, plan: Plan, workdir: str, placed: list[bool]) -> None:
    """Runs in the forked child, before untrusted code: session, cgroup, namespaces, descriptors,
    rlimits, identity, seccomp. Sets ``placed[0]`` once ``fds`` sit at their target numbers."""
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    for sig in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ, signal.SIGXCPU):
        signal.signal(sig, signal.SIG_DFL)
    if plan.identity == "userns":
        # inherited from the non-dumpable worker, this child's /proc files belong to the real root
        # until it is dumpable again: its oom score and id maps could not be written otherwise
        _prctl(PR_SET_DUMPABLE, 1)
    if plan.cgroup is not None:  # born in the sample cgroup; the first process the kernel kills
        _write_file("/proc/self/oom_score_adj", "1000")
    if plan.private_mounts:
        enter_sample_namespaces(plan.identity, plan.uid, plan.gid, plan.rebind, int(limits.get("tmp_mb", 64)) << 20)
    # move sources out of the way, then place them at their targets
    staged = {t: fcntl.fcntl(s, fcntl.F_DUPFD, 512) for t, s in fds.items()}
    for t, s in staged.items():
        os.dup2(s, t, inheritable=True)
    placed[0] = True
    close_from(max(fds) + 1)
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    mem = int(limits["mem_mb"]) * 1024 * 1024
    fsize = int(limits["fsize_mb"]) * 1024 * 1024
    per_sample_memory = plan.cgroup is not None
    rlimits = [
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_FSIZE, fsize, fsize),
        (resource.RLIMIT_NOFILE, int(limits["nofile"]), int(limits["nofile"])),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if not per_sample_memory:  # without a memory cgroup: address space and processes per process/uid
        rlimits += [(resource.RLIMIT_AS, mem, mem), (resource.RLIMIT_NPROC, int(limits["nproc"]), int(limits["nproc"]))]
    for res, soft, hard in rlimits:
        resource.setrlimit(res, (soft, hard))
    os.chdir(workdir)
    if plan.identity == "setuid":  # root -> an unprivileged uid clears every capability set
        os.setgroups([])
        os.setgid(plan.gid)
        os.setuid(plan.uid)
    else:
        drop_capabilities()
    syscall_filter.install()
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": workdir})
    # one CPU per sample: numerical libraries should not start a thread per host core
    os.environ.update(dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1"))
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)  # noqa: SIM115
    sys.setrecursionlimit(10000)


def _join_threads() -> None:
    """Wait for the program's non-daemon threads, as the interpreter does at exit (the wall limit
    bounds the wait: the worker kills the process at its deadline)."""
    import threading

    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:  # noqa: BLE001 - the program may have broken threading itself
        pass


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


COMPILE_ERRORS = (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError)


def program_stdio(co: object) -> None:
    """Child body for one stdin/stdout run of compiled code ``co``. Non-daemon threads are joined
    before exit, as by the interpreter."""
    status = 0
    try:
        exec(co, {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        status = _exit_code(e)
    except BaseException:  # noqa: BLE001 - report every failure as a runtime error
        traceback.print_exc()
        status = 1
    _join_threads()
    _flush_and_exit(status)


def _resolve(g: dict, fn_name: str):
    fn = g.get(fn_name)
    if callable(fn) and not isinstance(fn, type):
        return fn
    sol = g.get("Solution")
    if isinstance(sol, type) and hasattr(sol, fn_name):
        return getattr(sol(), fn_name)
    raise NameError(f"function {fn_name!r} (or method Solution.{fn_name}) is not defined")


def program_server(co: object, fn_name: str, module_name: str, ctl_fd: int, result_cap: int) -> None:
    """Child body for call-style tests: define the program (compiled code ``co``), report readiness on
    ``ctl_fd``, then answer ``{"args": [...]}`` frames on fd 3 with ``{"ok": true, "value": ...}`` or
    ``{"ok": false, "error": ...}`` frames on fd 4. At end of input, joins non-daemon threads."""
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
        try:
            req = read_frame(3, result_cap)
        except ValueError:
            req = None
        if req is None:
            _join_threads()
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
        try:
            return plaindata.decode(reply["value"])
        except (ValueError, TypeError, KeyError) as e:
            raise CandidateError(f"undecodable value: {e}") from None

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
CPU_POLL_S = 0.1


class Child:
    """A forked program as seen by the worker: captured output, a frame pipe, a deadline, its status,
    and the sample cgroup's counters at its start."""

    def __init__(self, pid: int, out_fd: int, err_fd: int, ctl_fd: int | None, in_fd: int | None, limits: dict,
                 cgroup: SampleCgroup | None, before: tuple[int | None, int]):  # fmt: skip
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.fds = {"out": out_fd, "err": err_fd}
        if ctl_fd is not None:
            self.fds["ctl"] = ctl_fd
        self.in_fd = in_fd
        self.limits = limits
        self.cgroup = cgroup
        self.cpu0, self.oom0 = before
        self.out, self.err = bytearray(), bytearray()
        self.err_dropped = 0
        self.frames = FrameBuffer(int(limits["result_bytes"]))
        self.killed: str | None = None
        self.exited = False
        self.t0 = time.monotonic()
        self.next_cpu_check = self.t0 + CPU_POLL_S
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

    def _cpu_used(self) -> float | None:
        if self.cgroup is None or self.cpu0 is None:
            return None
        now = self.cgroup.cpu_ns()
        return None if now is None else (now - self.cpu0) / 1e9

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
        child has exited and its pipes are closed; kills the child at ``deadline`` and when the sample
        cgroup's CPU time passes ``cpu_s``. Returns the frame or None."""
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
            if now >= self.next_cpu_check and not self.killed:
                self.next_cpu_check = now + CPU_POLL_S
                used = self._cpu_used()
                if used is not None and used > self.limits["cpu_s"]:
                    self.kill("cpu")
            if self.exited:
                if exit_grace is None:
                    exit_grace = now + 0.2
                elif now >= exit_grace:  # descendants hold the pipes open: stop listening
                    for name in list(self.fds):
                        self._read(name)
                        if name in self.fds:
                            os.close(self.fds.pop(name))
                    return None
            readers = list(self.fds.values()) + ([] if self.exited else [self.pidfd])
            if stop_fd is not None:
                readers.append(stop_fd)
            wake = min(deadline, exit_grace or deadline, self.next_cpu_check if self.cgroup is not None else deadline)
            try:
                ready, _, _ = select.select(readers, [], [], max(0.0, wake - now))
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

    def finish(self, deadline: float, end_sample) -> dict:
        """Wait for the child (killing it at ``deadline``), end the sample (every other process of it
        killed and reaped), and describe the run."""
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
        end_sample()
        exit_code = os.waitstatus_to_exitcode(status)
        cpu = self._cpu_used()
        if cpu is None:
            cpu = usage.ru_utime + usage.ru_stime
        elif cpu > self.limits["cpu_s"] and not self.killed:
            self.killed = "cpu"
        oom = self.cgroup is not None and self.cgroup.has("memory") and self.cgroup.oom_kills() > self.oom0
        return {
            "exit": exit_code if exit_code >= 0 else None,
            "signal": -exit_code if exit_code < 0 else None,
            "killed": self.killed,
            "oom": oom,
            "wall": round(time.monotonic() - self.t0, 6),
            "cpu": round(cpu, 6),
            "stdout": self.out.decode("utf-8", "replace"),
            "stderr": self.err.decode("utf-8", "replace"),
            "stderr_dropped": self.err_dropped,
            "frames": [],  # frames the program wrote are never passed on; the worker adds compile errors
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
    children (used only where the worker is not PID 1: the unisolated backend). As a child subreaper
    the worker inherits orphans, so a descendant is reachable through /proc's parent links."""
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


class SampleLeftovers(RuntimeError):
    """Processes of a finished sample could not be removed."""


class Worker:
    def __init__(self, role: str, plan: Plan):
        self.role = role
        self.plan = plan
        self.pid1 = os.getpid() == 1
        self.counter = 0
        self.server: Child | None = None
        self.server_dir: str | None = None
        self.server_deadline = 0.0
        self.fd_sock: socket.socket | None = None
        if not plan.private_mounts:
            os.makedirs(plan.work_root, mode=0o711, exist_ok=True)

    # -- helpers
    def _workdir(self) -> str:
        """Where the next program starts: its own fresh /tmp, or (unisolated backend) a new directory."""
        if self.plan.private_mounts:
            return "/tmp"
        self.counter += 1
        path = os.path.join(self.plan.work_root, f"w{os.getpid()}-{self.counter}")
        os.mkdir(path, 0o700)
        if self.plan.identity == "setuid":
            os.chown(path, self.plan.uid, self.plan.gid)
        return path

    def _release_workdir(self, path: str | None) -> None:
        if not path or self.plan.private_mounts:
            return
        try:
            os.rmdir(path)  # the common case: the program left nothing behind
        except OSError:
            import shutil

            shutil.rmtree(path, ignore_errors=True)

    def end_sample(self) -> None:
        """Kill and reap every process the finished program left (as PID 1: everything else in the
        namespace), and make sure the sample cgroup is empty before the next one starts."""
        if self.pid1:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            give_up = time.monotonic() + 5.0
            while True:
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    if time.monotonic() > give_up:
                        raise SampleLeftovers("processes of the last program do not die")
                    time.sleep(0.0005)
        else:
            kill_descendants(exclude=set())
        cg = self.plan.cgroup
        if cg is not None:
            give_up = time.monotonic() + 5.0
            while procs := cg.others():
                for p in procs:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                if time.monotonic() > give_up:
                    raise SampleLeftovers(f"the sample cgroup still holds {procs}")
                time.sleep(0.001)

    def _spawn(self, body, fds: dict[int, int], limits: dict, workdir: str, code: str | None) -> tuple[int, tuple, dict | None]:
        """Fork a child that sets itself up, compiles ``code`` and runs ``body(compiled)``.

        Setup failures and compile errors come back on a pipe of their own that the child closes
        before any untrusted code runs, so a program cannot forge them. Returns (pid, the cgroup's
        counters before, None or that pipe's frame: ``{"setup_error": ...}`` / ``{"compile_error": ...}``)."""
        before: tuple[int | None, int] = (None, 0)
        if self.plan.cgroup is not None:
            self.plan.cgroup.configure(limits)
            before = self.plan.cgroup.snapshot()
        setup_r, setup_w = os.pipe()
        target = max(fds) + 1
        fds = {**fds, target: setup_w}
        pid = os.fork()
        if pid == 0:
            os.close(setup_r)
            placed = [False]
            try:
                enter_child(fds, limits, self.plan, workdir, placed)
                co = None
                if code is not None:
                    try:
                        with warnings.catch_warnings():  # nothing may block on stderr before the pipe closes
                            warnings.simplefilter("ignore")
                            co = compile(code, "<solution>", "exec")
                    except COMPILE_ERRORS as e:
                        write_frame(target, {"compile_error": _format_exc(e)})
                        os._exit(3)
            except BaseException as e:  # noqa: BLE001
                try:
                    write_frame(target if placed[0] else setup_w, {"setup_error": _format_exc(e)})
                finally:
                    os._exit(70)
            os.close(target)
            try:
                body(co)
            except BaseException:  # noqa: BLE001
                try:
                    traceback.print_exc()
                finally:
                    os._exit(71)
            os._exit(0)
        os.close(setup_w)
        return pid, before, self._read_setup(setup_r, pid, time.monotonic() + max(5.0, float(limits["wall_s"])))

    @staticmethod
    def _read_setup(fd: int, pid: int, deadline: float) -> dict | None:
        """Wait until the child closes its setup pipe; its frame if it wrote one."""
        buf = bytearray()
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    return {"setup_error": "the program's setup did not finish"}
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
        finally:
            os.close(fd)
        if not buf:
            return None
        fb = FrameBuffer(1 << 20)
        fb.feed(bytes(buf))
        return fb.pop() or {"setup_error": "unreadable setup report"}

    # -- ops
    def op_stdio(self, req: dict) -> dict:
        limits = req["limits"]
        workdir = self._workdir()
        stdin_fd = os.memfd_create("stdin")
        os.write(stdin_fd, req.get("stdin", "").encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid, before, early = self._spawn(program_stdio, {0: stdin_fd, 1: out_w, 2: err_w}, limits, workdir, req["code"])
        for fd in (stdin_fd, out_w, err_w):
            os.close(fd)
        child = Child(pid, out_r, err_r, None, None, limits, self.plan.cgroup, before)
        res = child.finish(time.monotonic() + limits["wall_s"], self.end_sample)
        self._release_workdir(workdir)
        if early is not None and "compile_error" in early:
            res["frames"] = [{"compile_error": str(early["compile_error"])}]
        elif early is not None:
            return {"sandbox_error": f"program setup failed: {early.get('setup_error')}"}
        return res

    def op_serve(self, req: dict) -> dict:
        """Start a call server for ``code``. With ``direct``, two pipe ends arrive on the fd socket
        (arguments from, results to a checker in the other sandbox) and this worker only watches it.
        The program's wall limit covers its whole life: loading and every call."""
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
        cap = int(limits["result_bytes"])
        t0 = time.monotonic()
        pid, before, early = self._spawn(
            lambda co: program_server(co, fn_name, module, 5, cap),
            {0: null, 1: out_w, 2: err_w, 3: args_r, 4: res_w, 5: ctl_w},
            limits,
            self.server_dir,
            code,
        )
        for fd in (null, out_w, err_w, args_r, res_w, ctl_w):
            os.close(fd)
        self.server = Child(pid, out_r, err_r, ctl_r, args_w, limits, self.plan.cgroup, before)
        if res_r is not None:
            self.server.fds["res"] = res_r
            os.set_blocking(res_r, False)
        # a direct server lives for one check (the checker has the same wall limit); a relayed one for
        # the whole program
        self.server_deadline = t0 + limits["wall_s"] + (2.0 if direct else 0.0)
        if early is not None:
            ended = self._end_server()
            if "compile_error" in early:
                return {"ready": False, "frame": {"compile_error": str(early["compile_error"])}, **ended}
            return {"sandbox_error": f"program setup failed: {early.get('setup_error')}"}
        frame = self.server.pump(self.server_deadline, want_frame=True)
        if frame is not None and frame.get("ready") is True:
            if not direct:  # from now on frames come from the result pipe
                os.close(self.server.fds.pop("ctl"))
                self.server.fds["ctl"] = self.server.fds.pop("res")
            return {"ready": True}
        # the program wrote this frame (or died): only its error text is passed on
        error = str(frame.get("error", ""))[:2000] if isinstance(frame, dict) else ""
        return {"ready": False, "frame": {"error": error}, **self._end_server()}

    def op_call(self, req: dict) -> dict:
        srv = self.server
        if srv is None or srv.exited or srv.in_fd is None:
            return {"ok": False, "dead": True, **self._end_server()}
        t0 = time.monotonic()
        try:
            write_frame(srv.in_fd, {"args": req["args"]})  # small; the server is blocked reading
        except OSError:
            return {"ok": False, "dead": True, **self._end_server()}
        frame = srv.pump(self.server_deadline, want_frame=True)
        if frame is None or "ok" not in frame:
            return {"ok": False, "dead": True, **self._end_server()}
        # the program wrote this frame: only the fields of an answer are passed on
        reply = {"ok": frame.get("ok") is True, "wall": round(time.monotonic() - t0, 6)}
        if reply["ok"]:
            reply["value"] = frame.get("value")
        else:
            reply["error"] = str(frame.get("error", ""))[:2000]
        return reply

    def op_end(self, req: dict) -> dict:
        return self._end_server()

    def _end_server(self) -> dict:
        srv, self.server = self.server, None
        if srv is None:
            return {}
        res = srv.finish(max(self.server_deadline, time.monotonic() + 0.2), self.end_sample)
        self._release_workdir(self.server_dir)
        self.server_dir = None
        return {"exec": res}

    def idle(self, proto: int) -> None:
        """Between requests: keep draining a direct server's output (so it never blocks on a full
        pipe) and kill it at its deadline, until the next request arrives."""
        srv = self.server
        if srv is None:
            return
        srv.pump(self.server_deadline, want_frame=False, stop_fd=proto)

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
        pid, before, early = self._spawn(
            lambda _: program_checker(prompt, test, fn_name, cap),
            {0: null, 1: out_w, 2: err_w, 3: res_r, 4: args_w, 5: ctl_w},
            limits,
            workdir,
            None,
        )
        for fd in (null, out_w, err_w, res_r, args_w, ctl_w):
            os.close(fd)
        child = Child(pid, out_r, err_r, ctl_r, None, limits, self.plan.cgroup, before)
        deadline = time.monotonic() + limits["wall_s"]
        done = child.pump(deadline, want_frame=True)
        res = child.finish(deadline, self.end_sample)
        self._release_workdir(workdir)
        if early is not None:
            return {"sandbox_error": f"check setup failed: {early.get('setup_error')}"}
        result = None
        if isinstance(done, dict):
            result = {k: done[k] for k in ("done", "passed", "error", "harness_error") if k in done}
        return {"done": True, "result": result, "exec": res}

    def recv_fds(self, n: int) -> list[int]:
        if self.fd_sock is None:
            raise RuntimeError("this worker has no descriptor socket")
        _, fds, _, _ = socket.recv_fds(self.fd_sock, 16, n)
        if len(fds) != n:
            for fd in fds:
                os.close(fd)
            raise RuntimeError(f"expected {n} descriptors, got {len(fds)}")
        return fds


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=("candidate", "checker"), required=True)
    ap.add_argument("--identity", choices=("setuid", "userns", "none"), required=True)
    ap.add_argument("--uid", type=int, default=-1)
    ap.add_argument("--gid", type=int, default=-1)
    ap.add_argument("--proto-fd", type=int, required=True)
    ap.add_argument("--fd-sock", type=int, default=-1)
    ap.add_argument("--cgroup", default="")
    ap.add_argument("--private-mounts", action="store_true")
    ap.add_argument("--rebind", default="[]", help="JSON list: Python directories under /tmp")
    ap.add_argument("--build-root", default="", help="JSON {binds, symlinks}: build the root (unshare backend)")
    ap.add_argument("--work-root", default="/tmp/fade-work")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.umask(0o022)  # directories made for mount points must be traversable by the program uid
    if a.build_root:
        spec = json.loads(a.build_root)
        build_root(spec["binds"], spec["symlinks"])
    proto = a.proto_fd
    cgroup = SampleCgroup.parse(a.cgroup)
    if cgroup is not None:
        cgroup.join()
    plan = Plan(a.identity, a.uid, a.gid, json.loads(a.rebind), cgroup, a.private_mounts, a.work_root)
    worker = Worker(a.role, plan)
    syscall_filter.prepare()  # built once, before the forks
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
    write_frame(proto, {"hello": True, "pid": os.getpid(), "uid": os.getuid(), "interfaces": net,
                        "cgroup": a.cgroup.split(":")[0] if a.cgroup else None})  # fmt: skip
    while True:
        worker.idle(proto)
        req = read_frame(proto)
        if req is None:
            worker._end_server()
            worker.end_sample()
            os._exit(0)
        op = req.get("op")
        try:
            if op not in ("stdio", "serve", "call", "end", "check"):
                raise ValueError(f"unknown op {op!r}")
            reply = getattr(worker, f"op_{op}")(req)
        except Exception as e:  # noqa: BLE001 - report, keep serving (the parent resets the slot)
            reply = {"sandbox_error": f"{type(e).__name__}: {e}"[:2000]}
        write_frame(proto, reply)
