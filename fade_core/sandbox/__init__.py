"""Sandboxed execution of untrusted programs against tests, with the verdict decided outside.

Public API::

    from fade_core import sandbox
    v = sandbox.run(code, tests, kind="stdio")                  # -> Verdict
    v = sandbox.run(code, tests, kind="call", fn_name="twoSum")
    vs = sandbox.run_batch([sandbox.Job(code, tests, "stdio"), ...], workers=None)
    with sandbox.Sandbox(workers=4, limits=sandbox.Limits(cpu_s=2)) as sb: sb.run(...)

Layout: :mod:`.isolation` starts workers (bubblewrap, else unshare, else refuse unless unsafe),
:mod:`._zygote` is the pre-forked worker inside the isolation, :mod:`.pool` is the trusted parent
(slots, test loops, verdicts), :mod:`.compare` decides outputs, :mod:`.plaindata` is the only format
that crosses the boundary. See each module's docstring for the guarantees.
"""

from fade_core.sandbox.compare import JUDGES, compare_stdout, compare_value, judge_from_metadata
from fade_core.sandbox.isolation import Guarantees, Isolation, SandboxUnavailable, resolve
from fade_core.sandbox.pool import (
    STATUSES,
    Job,
    Limits,
    Sandbox,
    Verdict,
    default_sandbox,
    default_workers,
    run,
    run_batch,
    use_settings,
)

__all__ = [
    "JUDGES", "STATUSES", "Guarantees", "Isolation", "Job", "Limits", "Sandbox", "SandboxUnavailable", "Verdict",
    "compare_stdout", "compare_value", "default_sandbox", "default_workers", "judge_from_metadata", "resolve", "run",
    "run_batch", "use_settings",
]  # fmt: skip
