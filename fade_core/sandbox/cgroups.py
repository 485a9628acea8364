"""Per-sample cgroups, host side: find where this process may create cgroups, and make one per worker.

A :class:`PoolCgroups` owns ``<base>/fade-<pid>-<token>/`` and, inside it, one leaf cgroup per
sandbox worker (``w<n>``). The worker (inside its sandbox) receives directory descriptors of its
leaf, writes each request's limits there (memory with no swap, number of tasks, CPU bandwidth), and
every program it forks moves itself into the leaf before any untrusted code runs. One program runs
per worker at a time and everything of it is killed before the next starts, so the leaf is the
program's own cgroup: memory, tasks and CPU are limited and counted for the sample as a whole, not
per process (counters are read as differences across the sample).

Where the cgroups go (the first that works):

- ``parent`` (``Sandbox(cgroup_parent=...)``, env ``FADE_SANDBOX_CGROUP``): a cgroup path such as
  ``/fade`` or ``/user.slice/user-1000.slice/user@1000.service/fade`` (a delegated subtree when not
  root);
- cgroup v2 (the unified hierarchy has the memory, pids and cpu controllers): the nearest ancestor of
  this process's cgroup that we may write to and that can enable those controllers for its children
  (as root usually the parent cgroup; as a user, a systemd-delegated ``user@UID.service``);
- cgroup v1 (memory and pids hierarchies mounted; cpu and cpuacct used when present): this process's
  own cgroup in each hierarchy, when writable (as root).

Tested on this project's CI machine with cgroup v1 as root and as a user with a delegated v1 subtree;
the v2 code is exercised against a simulated hierarchy only (see tests/unit/test_sandbox_cgroups.py).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field

V1_REQUIRED = ("memory", "pids")
V1_OPTIONAL = ("cpu", "cpuacct")
V2_CONTROLLERS = ("memory", "pids", "cpu")
POOL_PREFIX = "fade-"


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy: its mount point, the cgroup path shown at that mount point, and the
    controllers it carries (v2: the ones available at its root)."""

    version: int
    mountpoint: str
    root: str
    controllers: tuple[str, ...]

    def dir_of(self, cgroup_path: str) -> str | None:
        """The directory of ``cgroup_path`` under this mount (None when the mount does not show it)."""
        root = self.root.rstrip("/")
        if root and not (cgroup_path == root or cgroup_path.startswith(root + "/")):
            return None
        return os.path.normpath(os.path.join(self.mountpoint, cgroup_path[len(root) :].lstrip("/")))


@dataclass(frozen=True)
class Layout:
    """Where pools are created: ``bases`` maps controller (v2: ``"unified"``) to a directory."""

    version: int
    bases: dict[str, str]
    how: str

    def describe(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in sorted(self.bases.items()))
        return f"cgroup v{self.version} ({self.how}: {where})"


def read_mountinfo(text: str) -> list[Hierarchy]:
    """The cgroup hierarchies in a /proc/self/mountinfo text."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        f, r = left.split(), right.split()
        if len(f) < 5 or len(r) < 3:
            continue
        fstype, opts = r[0], r[2].split(",")
        point, root = f[4].replace("\\040", " "), f[3].replace("\\040", " ")
        if fstype == "cgroup2":
            ctrls = ()
            with contextlib.suppress(OSError):
                with open(os.path.join(point, "cgroup.controllers")) as fh:
                    ctrls = tuple(fh.read().split())
            out.append(Hierarchy(2, point, root, ctrls))
        elif fstype == "cgroup":
            ctrls = tuple(o for o in opts if o in (*V1_REQUIRED, *V1_OPTIONAL))
            if ctrls:
                out.append(Hierarchy(1, point, root, ctrls))
    return out


def read_own_cgroups(text: str) -> dict[str, str]:
    """Controller (v2: ``"unified"``) -> this process's cgroup path, from a /proc/self/cgroup text."""
    own: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if ctrls == "":
            own["unified"] = path
        for c in ctrls.split(","):
            if c:
                own[c] = path
    return own


def _writable(d: str) -> bool:
    return os.access(d, os.W_OK | os.X_OK) and os.access(os.path.join(d, "cgroup.procs"), os.W_OK)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _enable_v2(d: str) -> bool:
    """Make the memory, pids and cpu controllers available to the children of ``d``."""
    try:
        try:
            have = set(_read(os.path.join(d, "cgroup.subtree_control")).split())
        except FileNotFoundError:  # only in a simulated hierarchy
            have = set()
        missing = [c for c in V2_CONTROLLERS if c not in have]
        if missing:
            with open(os.path.join(d, "cgroup.subtree_control"), "w") as f:
                f.write(" ".join("+" + c for c in missing))
        return True
    except OSError:
        return False


def _v2_candidates(own: str, parent: str | None) -> list[str]:
    if parent is not None:
        return [parent]
    if own in ("/", ""):
        return ["/"]
    parts = own.rstrip("/").split("/")
    # ancestors, nearest first: our own cgroup holds processes, so children of it cannot get controllers
    return ["/".join(parts[:i]) or "/" for i in range(len(parts) - 1, 0, -1)]


def detect(parent: str | None = None, *, mountinfo: str | None = None, own_cgroups: str | None = None) -> tuple[Layout | None, str]:
    """Where this process can create per-sample cgroups: (layout, how) or (None, why not).

    ``mountinfo`` and ``own_cgroups`` default to this process's /proc files (tests pass others)."""
    try:
        mountinfo = _read("/proc/self/mountinfo") if mountinfo is None else mountinfo
        own_cgroups = _read("/proc/self/cgroup") if own_cgroups is None else own_cgroups
    except OSError as e:
        return None, f"cannot read /proc: {e}"
    hier = read_mountinfo(mountinfo)
    own = read_own_cgroups(own_cgroups)
    reasons = []
    v2 = next((h for h in hier if h.version == 2), None)
    if v2 is not None and all(c in v2.controllers for c in V2_CONTROLLERS):
        for cand in _v2_candidates(own.get("unified", "/"), parent):
            d = v2.dir_of(cand)
            if d is None or not os.path.isdir(d):
                continue
            if _writable(d) and _enable_v2(d):
                return Layout(2, {"unified": d}, "configured" if parent else "nearest writable ancestor"), ""
        reasons.append("cgroup v2: no writable cgroup that can delegate memory, pids and cpu" + (f" at {parent}" if parent else ""))
    elif v2 is not None:
        reasons.append(f"cgroup v2 has only {list(v2.controllers)} (the rest are on cgroup v1)")
    v1 = {c: h for h in hier if h.version == 1 for c in h.controllers}
    if all(c in v1 for c in V1_REQUIRED):
        bases: dict[str, str] = {}
        for c in (*V1_REQUIRED, *V1_OPTIONAL):
            h = v1.get(c)
            if h is None:
                continue
            d = h.dir_of(parent if parent is not None else own.get(c, "/"))
            if d is not None and os.path.isdir(d) and _writable(d):
                bases[c] = d
        missing = [c for c in V1_REQUIRED if c not in bases]
        if not missing:
            return Layout(1, bases, "configured" if parent else "own cgroup"), ""
        reasons.append(f"cgroup v1: cannot create cgroups in the {'/'.join(missing)} hierarchy"
                       + (f" at {parent}" if parent else " (not root and nothing delegated)"))  # fmt: skip
    else:
        reasons.append("cgroup v1: memory and pids hierarchies are not mounted")
    return None, "; ".join(reasons)


def _rmdir_tree(d: str) -> None:
    """Remove an empty cgroup directory tree (children first); cgroup files cannot and need not be
    deleted. Processes still inside are killed first."""
    if not os.path.isdir(d):
        return
    for name in os.listdir(d):
        sub = os.path.join(d, name)
        if os.path.isdir(sub):
            _rmdir_tree(sub)
    for _ in range(200):
        try:
            os.rmdir(d)
            return
        except FileNotFoundError:
            return
        except OSError:
            with contextlib.suppress(OSError):
                for pid in _read(os.path.join(d, "cgroup.procs")).split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.01)


def remove_stale_pools(bases: dict[str, str]) -> None:
    """Remove pool cgroups left by fade processes that no longer exist."""
    for base in set(bases.values()):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if not name.startswith(POOL_PREFIX):
                continue
            pid = name[len(POOL_PREFIX) :].split("-")[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                _rmdir_tree(os.path.join(base, name))


@dataclass
class WorkerCgroup:
    """One worker's sample cgroup: controller -> directory."""

    version: int
    dirs: dict[str, str]
    fds: dict[str, int] = field(default_factory=dict)

    def open(self) -> dict[str, int]:
        """Directory descriptors to pass to the worker (the same directory opened once)."""
        by_dir: dict[str, int] = {}
        for ctrl, d in self.dirs.items():
            if d not in by_dir:
                by_dir[d] = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self.fds[ctrl] = by_dir[d]
        return dict(self.fds)

    def spec(self) -> str:
        """The worker's ``--cgroup`` argument."""
        return f"{self.version}:" + ",".join(f"{c}={fd}" for c, fd in sorted(self.fds.items()))

    def close_fds(self) -> None:
        for fd in set(self.fds.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}

    def remove(self) -> None:
        self.close_fds()
        for d in set(self.dirs.values()):
            _rmdir_tree(d)


class PoolCgroups:
    """The cgroups of one :class:`~fade_core.sandbox.Sandbox`: a pool directory per hierarchy and a
    leaf per worker. :meth:`close` removes them."""

    def __init__(self, layout: Layout, *, cpu_weight: int = 1):
        self.layout = layout
        remove_stale_pools(layout.bases)
        name = f"{POOL_PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        self.pools: dict[str, str] = {}
        try:
            for ctrl, base in layout.bases.items():
                d = os.path.join(base, name)
                if d not in self.pools.values():
                    os.mkdir(d)
                self.pools[ctrl] = d
            if layout.version == 2 and not _enable_v2(self.pools["unified"]):
                raise OSError(f"cannot enable {V2_CONTROLLERS} in {self.pools['unified']}")
            # the pool weighs as much as its ``cpu_weight`` workers would as separate processes: without
            # this, all of fade's samples would share one process's CPU share on a loaded machine
            if layout.version == 1 and "cpu" in self.pools:
                with contextlib.suppress(OSError), open(os.path.join(self.pools["cpu"], "cpu.shares"), "w") as f:
                    f.write(str(1024 * max(1, cpu_weight)))
            elif layout.version == 2:
                with contextlib.suppress(OSError), open(os.path.join(self.pools["unified"], "cpu.weight"), "w") as f:
                    f.write(str(min(10000, 100 * max(1, cpu_weight))))
        except OSError:
            self.close()
            raise
        self._n = 0
        self._lock = threading.Lock()

    def new_worker(self) -> WorkerCgroup:
        with self._lock:
            self._n += 1
            n = self._n
        dirs: dict[str, str] = {}
        made: dict[str, str] = {}
        for ctrl, pool in self.pools.items():
            d = made.get(pool) or os.path.join(pool, f"w{n}")
            if pool not in made:
                os.mkdir(d)
                made[pool] = d
            dirs[ctrl] = d
        return WorkerCgroup(self.layout.version, dirs)

    def close(self) -> None:
        for d in set(self.pools.values()):
            _rmdir_tree(d)
        self.pools = {}
