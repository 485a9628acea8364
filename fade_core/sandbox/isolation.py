"""How sandbox workers are started, and which guarantees each way gives on this machine.

Two backends build the same sandbox; ``auto`` takes the first whose self-test passes:

``bwrap`` (bubblewrap): a new root holding read-only binds of /usr, the /bin and /lib links, the
    loader's files from /etc and the Python installation (its prefixes, wherever they are: under
    /root, /opt or /tmp), a fresh /proc, a minimal read-only /dev, and new network, PID, IPC and UTS
    namespaces (and a user namespace when not root). The worker is PID 1 (``--as-pid-1``): there is
    no bubblewrap init inside that a program could trace or signal.
``unshare`` (util-linux): the same namespaces; the worker itself builds the same root (bind mounts,
    ``pivot_root``) before serving, so the host file system is gone here too.
``none``: no namespaces, only rlimits, cgroups and the seccomp filter; used only when asked for with
    ``unsafe`` (``sandbox.unsafe``, ``--unsafe``, ``FADE_SANDBOX_UNSAFE=1``), with a loud warning.

Per program, whatever the backend, the worker adds what :mod:`fade_core.sandbox._zygote` lists: a
cgroup, fresh mount/IPC/cgroup namespaces with a fresh /tmp and /dev/shm, an unprivileged identity
and the seccomp filter. A root parent runs slot ``k``'s candidate programs as uid ``64000 + 2k`` and
its check programs as ``64000 + 2k + 1``; a user parent runs them in a user namespace of their own.

This module states facts about backends; which one a pool uses is decided by
:func:`fade_core.sandbox.pool.resolve` from :func:`fade_core.sandbox.selftest.self_test`'s findings
(:class:`Guarantees`), never silently.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from dataclasses import dataclass, field

from fade_core.sandbox import cgroups

BACKENDS = ("bwrap", "unshare", "none")
PREFERENCE = ("bwrap", "unshare")
SANDBOX_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
PAYLOAD_MODULES = ("plaindata", "syscall_filter", "_zygote")  # sent to the worker, in import order
SLOT_UID_BASE = 64000  # root parent: slot k runs candidates as 64000+2k and checks as 64000+2k+1
SLOT_UIDS = 500
USERNS_ID = 1000  # user parent: the uid/gid programs have inside their own user namespace
WORKER_TMPFS_BYTES = 4 * 1024 * 1024  # the worker's /tmp holds only mount points
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
REQUIRED = ("filesystem", "network", "sample_state", "python")


class SandboxUnavailable(RuntimeError):
    """No isolation backend works here and unsafe execution was not requested."""


# The worker's first lines: read its own source (and plaindata's, syscall_filter's) from the protocol
# socket, so that nothing of the project has to be mounted into the sandbox.
BOOTSTRAP = r"""
import json, os, struct, sys, types
fd = int(sys.argv[sys.argv.index("--proto-fd") + 1])
def _read(n):
    b = bytearray()
    while len(b) < n:
        c = os.read(fd, n - len(b))
        if not c:
            os._exit(70)
        b += c
    return bytes(b)
mods = json.loads(_read(struct.unpack(">I", _read(4))[0]))
for name in ("fade_core", "fade_core.sandbox"):
    pkg = types.ModuleType(name)
    pkg.__path__ = []
    sys.modules[name] = pkg
sys.modules["fade_core"].sandbox = sys.modules["fade_core.sandbox"]
for short, src in mods:
    m = types.ModuleType("fade_core.sandbox." + short)
    m.__file__ = "<fade-sandbox>/" + short + ".py"
    sys.modules[m.__name__] = m
    setattr(sys.modules["fade_core.sandbox"], short, m)
    exec(compile(src, m.__file__, "exec"), m.__dict__)
sys.modules["fade_core.sandbox._zygote"].main()
"""


@functools.cache
def payload() -> bytes:
    """The worker's modules as one JSON frame body: [[name, source], ...]."""
    mods = []
    for name in PAYLOAD_MODULES:
        with open(os.path.join(SANDBOX_PKG_DIR, name + ".py"), encoding="utf-8") as f:
            mods.append([name, f.read()])
    return json.dumps(mods).encode()


def python_dirs() -> list[str]:
    """Directories the sandboxed Python needs, read-only: its prefixes (a venv and the base install)
    and the real executable's installation, wherever they are (outermost only; /usr is bound anyway)."""
    cands = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    cands |= {os.path.realpath(d) for d in list(cands)}
    cands.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    out: list[str] = []
    for d in sorted(cands, key=len):
        if d in ("/", "/usr") or d.startswith("/usr/") or any(d == o or d.startswith(o + "/") for o in out):
            continue
        out.append(d)
    return out


def system_binds() -> tuple[list[str], dict[str, str]]:
    """(directories and files to bind read-only, symlinks to recreate) of the system."""
    binds = ["/usr", *[f for f in ETC_FILES if os.path.lexists(f)]]
    links: dict[str, str] = {}
    for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(d):
            links[d] = os.readlink(d)
        elif os.path.isdir(d):
            binds.append(d)
    return binds, links


def _ancestors(path: str) -> list[str]:
    """"/a/b/c" -> ["/a", "/a/b"]."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


@dataclass(frozen=True)
class Guarantees:
    """What a backend was shown to enforce here by :func:`~fade_core.sandbox.selftest.self_test`."""

    backend: str
    filesystem: bool = False  # programs see only the system and Python directories, read-only
    network: bool = False  # a network namespace with only a loopback device
    sample_state: bool = False  # fresh /tmp and /dev/shm per program; no SysV IPC, keyrings, namespaces
    syscall_filter: bool = False  # the seccomp filter is in force
    worker_unreachable: bool = False  # the worker is PID 1, untraceable, its descriptors unreachable
    python: bool = False  # the standard library (and numpy, when installed) imports in programs
    cgroup: str | None = None  # "v1" / "v2": per-sample limits below; None: per-process rlimits
    memory_per_sample: bool = False
    tasks_per_sample: bool = False
    cpu_per_sample: bool = False
    identity: str = ""  # how programs are separated from the worker and each other
    failures: tuple[str, ...] = field(default_factory=tuple)

    def missing(self) -> list[str]:
        """The required guarantees (:data:`REQUIRED`) this backend does not give."""
        return [g for g in REQUIRED if not getattr(self, g)]

    def lines(self) -> list[str]:
        """One line per guarantee, for ``fade verify --self-test`` and the logs."""
        yes = {True: "yes", False: "NO"}
        mem = "per sample (cgroup " + str(self.cgroup) + ")" if self.memory_per_sample else "per process (RLIMIT_AS)"
        tasks = "per sample (pids cgroup)" if self.tasks_per_sample else "per uid (RLIMIT_NPROC)"
        cpu = "per sample (cgroup CPU time, 1-CPU quota)" if self.cpu_per_sample else "per process (RLIMIT_CPU)"
        out = [
            f"backend: {self.backend}",
            f"filesystem isolation (host files invisible, read-only system): {yes[self.filesystem]}",
            f"network isolation (loopback only): {yes[self.network]}",
            f"per-sample state (fresh /tmp and /dev/shm; no SysV IPC, keyrings, namespaces): {yes[self.sample_state]}",
            f"seccomp filter: {yes[self.syscall_filter]}",
            f"worker unreachable (PID 1, no ptrace, descriptors closed): {yes[self.worker_unreachable]}",
            f"standard library and numpy importable: {yes[self.python]}",
            f"memory limit: {mem}",
            f"task limit: {tasks}",
            f"CPU limit and share: {cpu}",
            f"identity: {self.identity}",
        ]
        out += [f"failed check: {f}" for f in self.failures]
        return out


@dataclass(frozen=True)
class Isolation:
    """A way to start sandbox workers. ``backend`` is one of :data:`BACKENDS`; ``layout`` says where
    per-sample cgroups go (None: rlimits only); ``guarantees`` is what the self-test showed."""

    backend: str
    layout: cgroups.Layout | None = None
    guarantees: Guarantees | None = None

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    @property
    def isolated(self) -> bool:
        return self.backend != "none"

    def identity(self) -> str:
        """How programs get their identity: ``setuid`` (root parent: a per-slot uid), ``userns``
        (user parent: a user namespace per program) or ``none`` (unsafe backend as a user)."""
        if self.as_root:
            return "setuid"
        return "userns" if self.isolated else "none"

    def program_ids(self, slot: int, role: str) -> tuple[int, int]:
        """uid and gid of the programs of ``slot`` in ``role`` ("candidate" or "checker")."""
        ident = self.identity()
        if ident == "setuid":
            uid = SLOT_UID_BASE + 2 * (slot % SLOT_UIDS) + (role != "candidate")
            return uid, uid
        if ident == "userns":
            return USERNS_ID, USERNS_ID
        return os.getuid(), os.getgid()

    def prefix(self) -> list[str]:
        """The command line that wraps the worker's Python process."""
        if self.backend == "bwrap":
            binds, links = system_binds()
            args = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
            if not self.as_root:
                args.append("--unshare-user")
            args += ["--die-with-parent", "--new-session", "--as-pid-1"]
            made: set[str] = {"/", "/tmp"}

            def bind(path: str) -> None:
                for parent in _ancestors(path):  # bwrap would make them 0700: closed to the program uid
                    if parent not in made:
                        args.extend(["--perms", "0755", "--dir", parent])
                        made.add(parent)
                args.extend(["--ro-bind", path, path])

            for b in binds:
                bind(b)
            for link, target in links.items():
                args += ["--symlink", target, link]
            args += ["--proc", "/proc", "--dev", "/dev", "--dir", "/dev/shm",
                     "--size", str(WORKER_TMPFS_BYTES), "--tmpfs", "/tmp"]  # fmt: skip
            for d in python_dirs():  # after /tmp: a venv under /tmp lands on top of the tmpfs
                bind(d)
            args += ["--remount-ro", "/tmp", "--remount-ro", "/dev", "--remount-ro", "/", "--clearenv"]
            for k, v in ENV.items():
                args += ["--setenv", k, v]
            return [*args, "--chdir", "/"]
        if self.backend == "unshare":
            args = ["unshare", "--net", "--pid", "--fork", "--mount", "--ipc", "--uts", "--mount-proc", "--kill-child"]
            if not self.as_root:
                args[1:1] = ["--user", "--map-root-user"]
            return args
        return []

    def worker_argv(self, role: str, slot: int, proto_fd: int, fd_sock: int, cgroup_spec: str) -> list[str]:
        """Full argv of one worker of ``role`` for ``slot``; ``proto_fd`` is its end of the protocol
        socket, ``fd_sock`` the socket on which HumanEval pipe ends arrive, ``cgroup_spec`` its
        sample cgroup's descriptors (see :meth:`fade_core.sandbox.cgroups.WorkerCgroup.spec`)."""
        uid, gid = self.program_ids(slot, role)
        argv = [*self.prefix(), sys.executable, "-I", "-B", "-c", BOOTSTRAP, "--role", role,
                "--identity", self.identity(), "--uid", str(uid), "--gid", str(gid),
                "--proto-fd", str(proto_fd), "--fd-sock", str(fd_sock), "--cgroup", cgroup_spec]  # fmt: skip
        if self.isolated:
            argv += ["--private-mounts", "--rebind", json.dumps([d for d in python_dirs() if d.startswith("/tmp/")])]
        if self.backend == "unshare":
            binds, links = system_binds()
            argv += ["--build-root", json.dumps({"binds": binds + python_dirs(), "symlinks": links})]
        return argv

    def worker_env(self) -> dict[str, str]:
        """The scrubbed environment a worker starts with."""
        return dict(ENV)


def available(backend: str) -> str | None:
    """None when ``backend``'s program is installed, else why not."""
    if backend == "none":
        return None
    exe = {"bwrap": "bwrap", "unshare": "unshare"}[backend]
    return None if shutil.which(exe) else f"{exe} is not installed"


@functools.cache
def cgroup_layout(parent: str | None) -> tuple[cgroups.Layout | None, str]:
    """Where per-sample cgroups go for ``parent`` (see :func:`fade_core.sandbox.cgroups.detect`)."""
    return cgroups.detect(parent)
