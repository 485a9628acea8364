"""How a sandbox worker is started: bubblewrap, else ``unshare``, else (only when asked) nothing.

bubblewrap (``bwrap``) builds the worker a new root: a tmpfs with read-only binds of the system
directories (/usr, /etc and the /bin, /lib symlinks) and of the Python installation, a private /tmp
(size-capped tmpfs), a fresh /proc and a minimal /dev, and new network, pid, ipc, uts and (when
available) cgroup namespaces. Nothing else of the host is visible: no home directories, no project
tree, no host /tmp. The network namespace holds only a loopback device, so nothing outside the
sandbox can be reached, not even a server on the host's 127.0.0.1.

``unshare`` (util-linux) is the fallback: new network, pid, mount, ipc and uts namespaces; the worker
mounts fresh tmpfs over /tmp, /var/tmp and /dev/shm and remounts everything else read-only. The host
filesystem stays visible (read-only, and filtered by file permissions for the dropped uid).

When the parent runs as root, the worker stays root in its namespaces and drops each program to an
unprivileged uid (:data:`CANDIDATE_UID` for candidate code, :data:`CHECKER_UID` for HumanEval check
programs), so programs can neither signal nor inspect the worker nor read root-only files. As a normal
user, bwrap/unshare create a user namespace and programs run as that user with every capability
dropped; the worker is then protected by being non-dumpable.

With no backend, :func:`resolve` refuses unless ``unsafe=True`` (or ``FADE_SANDBOX_UNSAFE=1``): the
worker then runs on the host with rlimits, sessions and the uid drop only, and a warning is logged.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass

log = logging.getLogger(__name__)

CANDIDATE_UID = 65534  # nobody
CHECKER_UID = 65533
SANDBOX_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
TMPFS_BYTES = 512 * 1024 * 1024
BACKENDS = ("bwrap", "unshare", "none")


class SandboxUnavailable(RuntimeError):
    """No isolation backend works here and unsafe execution was not requested."""


def _python_dirs() -> list[str]:
    """Directories the sandboxed Python needs, read-only: its prefixes (a venv and the base install)
    and the real executable's installation, outside /usr (which is bound anyway), outermost only."""
    cands = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    cands |= {os.path.realpath(d) for d in list(cands)}
    cands.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    out: list[str] = []
    for d in sorted(cands, key=len):
        if d == "/" or d == "/usr" or d.startswith("/usr/") or any(d.startswith(o + "/") or d == o for o in out):
            continue
        out.append(d)
    return out


def _system_binds() -> list[str]:
    args: list[str] = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


@dataclass(frozen=True)
class Isolation:
    """A way to start sandbox workers. ``backend`` is one of :data:`BACKENDS`."""

    backend: str

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    @property
    def isolated(self) -> bool:
        return self.backend != "none"

    def uid_for(self, role: str) -> tuple[int, int]:
        if not self.as_root:
            return -1, -1
        uid = CANDIDATE_UID if role == "candidate" else CHECKER_UID
        return uid, uid

    def prefix(self) -> list[str]:
        """The command line that wraps the worker's Python process."""
        if self.backend == "bwrap":
            args = [
                "bwrap",
                "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session",
                *_system_binds(),
            ]  # fmt: skip
            if not self.as_root:
                args.insert(1, "--unshare-user")
            for d in _python_dirs():
                args += ["--ro-bind", d, d]
            args += [
                "--ro-bind", SANDBOX_PKG_DIR, "/fade_sandbox",
                "--proc", "/proc", "--dev", "/dev",
                "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
                "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
                "--chdir", "/tmp",
            ]  # fmt: skip
            return args
        if self.backend == "unshare":
            args = ["unshare", "--net", "--pid", "--fork", "--mount", "--ipc", "--uts", "--mount-proc", "--kill-child"]
            if not self.as_root:
                args[1:1] = ["--user", "--map-root-user"]
            return args
        return []

    def worker_argv(self, role: str, fd_sock: int = -1) -> list[str]:
        """Full argv of one worker of ``role`` ("candidate" or "checker"); ``fd_sock`` is the inherited
        unix socket on which pipe ends for HumanEval checks arrive."""
        uid, gid = self.uid_for(role)
        script = "/fade_sandbox/_zygote.py" if self.backend == "bwrap" else os.path.join(SANDBOX_PKG_DIR, "_zygote.py")
        argv = [*self.prefix(), sys.executable, "-I", "-B", script, "--role", role, "--uid", str(uid), "--gid", str(gid),
                "--fd-sock", str(fd_sock)]  # fmt: skip
        if self.backend == "unshare":
            argv.append("--setup-mounts")
        return argv

    def worker_env(self) -> dict[str, str]:
        """The scrubbed environment a worker starts with."""
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}


@functools.cache
def probe(backend: str) -> str | None:
    """None when ``backend`` can start a Python process here, else the reason it cannot."""
    if backend == "none":
        return None
    exe = {"bwrap": "bwrap", "unshare": "unshare"}[backend]
    if shutil.which(exe) is None:
        return f"{exe} is not installed"
    iso = Isolation(backend)
    argv = [*iso.prefix(), sys.executable, "-I", "-c", "import socket; print(len(socket.if_nameindex()))"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=iso.worker_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{exe} failed to start: {e}"
    if p.returncode != 0:
        return f"{exe} failed (exit {p.returncode}): {p.stderr.strip()[-300:]}"
    return None


def resolve(backend: str = "auto", *, unsafe: bool = False) -> Isolation:
    """The isolation to use. ``auto`` takes bwrap, else unshare. Without a working backend this raises
    :class:`SandboxUnavailable` unless ``unsafe`` (or env ``FADE_SANDBOX_UNSAFE=1``) is set, in which
    case it warns loudly and returns the unisolated backend."""
    unsafe = unsafe or os.environ.get("FADE_SANDBOX_UNSAFE") == "1"
    if backend not in ("auto", *BACKENDS):
        raise ValueError(f"unknown sandbox backend {backend!r}; expected auto or one of {BACKENDS}")
    reasons = []
    for b in ("bwrap", "unshare") if backend == "auto" else (backend,):
        if b == "none":
            break
        why = probe(b)
        if why is None:
            return Isolation(b)
        reasons.append(why)
    if not unsafe:
        raise SandboxUnavailable(
            "no sandbox isolation is available ("
            + "; ".join(reasons or ["backend 'none' requested"])
            + "). Install bubblewrap (apt-get install bubblewrap) or enable user namespaces for unshare; "
            "to run untrusted code WITHOUT namespace isolation anyway pass unsafe=True (CLI: --unsafe) "
            "or set FADE_SANDBOX_UNSAFE=1."
        )
    msg = (
        "fade sandbox: running untrusted code WITHOUT namespace isolation (no network or filesystem "
        "isolation; only rlimits, sessions and the uid drop apply). Reasons: " + "; ".join(reasons or ["requested"])
    )
    warnings.warn(msg, RuntimeWarning, stacklevel=2)
    log.warning(msg)
    print("WARNING: " + msg, file=sys.stderr)
    return Isolation("none")
