"""The self-test a backend must pass before :func:`~fade_core.sandbox.pool.resolve` uses it.

It starts a real worker of the backend (with this process's cgroup layout, through
:mod:`fade_core.sandbox.workers`, as the pool does) and runs probe programs in it, exactly as
candidate programs run, then states what was observed as
:class:`~fade_core.sandbox.isolation.Guarantees`:

- filesystem: a file this process just created on the host is invisible, and ``/``, ``/usr`` and
  ``/dev`` cannot be written;
- network: the only network interface is ``lo``;
- per-sample state: a memo written to ``/tmp`` and ``/dev/shm`` by one program is gone for the next,
  and SysV shared memory, the kernel keyring and new user namespaces are refused (seccomp);
- worker unreachable: the worker is PID 1 and its descriptors, memory and environment cannot be
  opened;
- python: the standard library modules the zygote does not preload (and numpy, if this Python has
  it) import;
- per-sample limits: a program over its memory cgroup is killed by the kernel (``memory_limit``), a
  program cannot exceed its task count, and CPU time is accounted for the cgroup.

About a second per backend, once per process (:func:`~fade_core.sandbox.pool.tested` caches it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile

from fade_core.sandbox import syscall_filter
from fade_core.sandbox.isolation import Guarantees, Isolation, available, cgroup_layout
from fade_core.sandbox.workers import Limits, Slot, Slots, WorkerLost, classify

PROBE_IMPORTS = ("base64", "csv", "pickle", "subprocess", "json", "decimal", "sqlite3")

PROBE = r"""
import ctypes, json, os, socket
obs = {"uid": os.getuid(), "pid1_fds": None}
obs["interfaces"] = sorted(n for _, n in socket.if_nameindex())
obs["host_file"] = os.path.exists(MARKER)
def writable(p):
    try:
        open(p, "w").close()
        return True
    except OSError:
        return False
obs["write_root"] = writable("/fade-probe")
obs["write_usr"] = writable("/usr/fade-probe")
obs["write_dev"] = writable("/dev/fade-probe")
obs["tmp_leftover"] = os.path.exists("/tmp/fade-memo") or os.path.exists("/dev/shm/fade-memo")
obs["tmp_memo"] = writable("/tmp/fade-memo")
obs["shm_memo"] = writable("/dev/shm/fade-memo")
libc = ctypes.CDLL(None, use_errno=True)
obs["shmget"] = libc.shmget(0, 4096, 0o1600) < 0
obs["keyctl"] = KEYCTL is not None and libc.syscall(KEYCTL, 0, -1, 0) < 0 and ctypes.get_errno() == 1
obs["unshare_user"] = libc.unshare(0x10000000) != 0
def opens(p):
    try:
        os.close(os.open(p, os.O_RDONLY))
        return True
    except OSError:
        return False
obs["pid1_fds"] = any(opens(f"/proc/1/fd/{n}") for n in range(16)) or opens("/proc/1/mem") or opens("/proc/1/environ")
obs["worker_is_pid1"] = open("/proc/1/cmdline", "rb").read().split(b"\0")[0].split(b"/")[-1].startswith(b"python")
obs["cgroup_lines"] = [line.rsplit(":", 1)[-1] for line in open("/proc/self/cgroup").read().split()]
bad = []
for m in IMPORTS:
    try:
        __import__(m)
    except Exception as e:
        bad.append(f"{m}: {type(e).__name__}: {e}"[:200])
obs["imports_failed"] = bad
print(json.dumps(obs))
"""

MEMORY_HOG = "b = bytearray(96 * 1024 * 1024)\nprint(len(b))\n"
TASK_HOG = """
import os
n = 0
for _ in range(12):
    try:
        if os.fork() == 0:
            import time
            time.sleep(5)
            os._exit(0)
        n += 1
    except OSError:
        break
print(n)
"""


def _imports() -> list[str]:
    mods = [m for m in PROBE_IMPORTS if importlib.util.find_spec(m) is not None]
    if importlib.util.find_spec("numpy") is not None:
        mods.append("numpy")
    return mods


def self_test(backend: str, cgroup_parent: str | None = None) -> Guarantees:
    """Start a worker of ``backend`` and observe what it enforces (see the module docstring)."""
    why = available(backend)
    if why is not None:
        return Guarantees(backend, failures=(why,))
    layout, _ = cgroup_layout(cgroup_parent)
    iso = Isolation(backend, layout)
    failures: list[str] = []
    with tempfile.NamedTemporaryFile(prefix="fade-selftest-", suffix=".marker") as marker:
        probe = (f"MARKER = {marker.name!r}\nKEYCTL = {syscall_filter.SYSCALLS.get(syscall_filter.machine(), {}).get('keyctl')!r}\n"
                 f"IMPORTS = {_imports()!r}\n" + PROBE)  # fmt: skip
        lim = Limits(cpu_s=5, wall_s=20, mem_mb=256, nproc=16)
        try:
            with Slots(iso, 1) as slots:
                slot = slots.all[0]
                first = _run(slot, probe, lim)
                second = _run(slot, probe, lim)
                mem = _status(slot, MEMORY_HOG, Limits(cpu_s=5, wall_s=20, mem_mb=48))
                tasks = _run(slot, TASK_HOG, Limits(cpu_s=5, wall_s=20, mem_mb=256, nproc=6))
                hello = slot.cand.hello if slot.cand is not None else {}
        except WorkerLost as e:
            return Guarantees(backend, failures=(f"{backend} worker did not start: {e}"[:600],))
    obs, obs2 = _parse(first, failures), _parse(second, failures)
    if not obs or not obs2:
        return Guarantees(backend, failures=tuple(failures))
    filesystem = not obs["host_file"] and not (obs["write_root"] or obs["write_usr"] or obs["write_dev"])
    network = obs["interfaces"] == ["lo"] and hello.get("interfaces") == "lo"
    filtered = obs["shmget"] and obs["keyctl"] and obs["unshare_user"]
    sample_state = filtered and obs["tmp_memo"] and obs["shm_memo"] and not obs2["tmp_leftover"]
    unreachable = obs["pid1_fds"] is False and obs["worker_is_pid1"] and hello.get("pid") == 1
    python = not obs["imports_failed"]
    for name, ok in (("host file visible or system writable", filesystem), ("network interfaces " + str(obs["interfaces"]), network),
                     ("memo kept across samples or SysV/keyring/userns allowed", sample_state),
                     ("worker reachable", unreachable)):  # fmt: skip
        if not ok:
            failures.append(name)
    failures += [f"import {m}" for m in obs["imports_failed"]]
    cg = layout is not None and hello.get("cgroup") is not None
    memory = cg and mem == "memory_limit"
    task_count = tasks.get("stdout", "").strip()
    tasks_ok = cg and task_count.isdigit() and int(task_count) < 6
    if cg and not memory:
        failures.append(f"memory cgroup did not stop a 96 MiB program at 48 MiB ({mem})")
    if cg and not tasks_ok:
        failures.append(f"pids cgroup let a program start {task_count!r} of 12 processes at 6 tasks")
    if obs["cgroup_lines"] and any(p != "/" for p in obs["cgroup_lines"]):
        failures.append(f"programs see host cgroup paths {obs['cgroup_lines']}")
    ident = ("per-slot uid (candidates 64000+2k, checks 64000+2k+1)" if iso.identity() == "setuid"
             else f"own user namespace per program (uid {obs['uid']} inside)")  # fmt: skip
    return Guarantees(
        backend, filesystem=filesystem, network=network, sample_state=sample_state, syscall_filter=filtered,
        worker_unreachable=unreachable, python=python, cgroup=f"v{layout.version}" if cg and layout else None,
        memory_per_sample=memory, tasks_per_sample=tasks_ok,
        cpu_per_sample=cg and layout is not None and ("cpuacct" in layout.bases or layout.version == 2),
        identity=ident, failures=tuple(failures),
    )  # fmt: skip


def _run(slot: Slot, code: str, lim: Limits) -> dict:
    """The worker's exec record of one stdio run of ``code`` (empty stdin); WorkerLost propagates."""
    return slot.candidate().request({"op": "stdio", "code": code, "stdin": "", "limits": lim.to_wire()}, lim.wall_s + 10)


def _status(slot: Slot, code: str, lim: Limits) -> str:
    """How one stdio run of ``code`` ended, as the pool would classify it: a failure status, or
    "ran to the end". A lost worker is a sandbox_error and resets the slot, as in the pool."""
    try:
        res = _run(slot, code, lim)
    except WorkerLost:
        slot.reset()
        return "sandbox_error"
    return classify(res, lim) or "ran to the end"


def _parse(res: dict, failures: list[str]) -> dict | None:
    if "sandbox_error" in res:
        failures.append("probe: " + str(res["sandbox_error"])[:400])
        return None
    try:
        return json.loads(res.get("stdout", "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        failures.append(f"probe failed: exit {res.get('exit')} {res.get('stderr', '')[-400:]!r}")
        return None


def describe() -> str:
    """Where per-sample cgroups would go for the current settings, for ``fade verify --self-test``."""
    layout, why = cgroup_layout(os.environ.get("FADE_SANDBOX_CGROUP") or None)
    return layout.describe() if layout else f"none ({why})"
