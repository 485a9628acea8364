"""Provenance of a report: the code (git commit), the packages, the machine, the command line and how long
the runs took, gathered where the report is built (the same process as `fade run` / `fade report`), and the
commits the runs trained at (each run's code.jsonl), which can differ from the report's own.

:func:`collect` reads the environment (git, /proc, importlib.metadata, torch's devices); :func:`wall_times`
derives training time from the runs' step records (the sum of each step's ``time_step``, the wall time of
the steps themselves: set-up, checkpoints and evaluation are not in it). Links (a Prefect flow run, the
TensorBoard logs) are given by the caller, which knows the orchestrator.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shlex
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from fade_core.code_version import git_state

PACKAGES = ("fade", "torch", "transformers", "numpy", "pandas", "duckdb", "pyarrow", "prefect", "prefect-dask",
            "dvc", "tensorboard", "math-verify", "vllm", "deepspeed", "wandb", "mlflow")
"""Packages whose versions the report names (those not installed are left out)."""


@dataclass
class Provenance:
    """What produced a report. ``links``: (label, URL or path) pairs, e.g. the Prefect flow run."""

    git_commit: str | None = None
    git_dirty: bool | None = None
    git_branch: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    python: str = ""
    machine: dict[str, str] = field(default_factory=dict)
    command: str = ""
    created: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trained_at: dict[str, int] = field(default_factory=dict)
    """{commit (with " (uncommitted changes)" where tracked files differed): runs that trained at it}, from the
    runs' code.jsonl (:func:`trained_at`); empty when no run recorded it."""


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    """{package: installed version} of ``names`` that are installed."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _memory_gib() -> str | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        return None
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return platform.processor() or None


def machine() -> dict[str, str]:
    """Host name, OS, CPU model and count, memory, and the CUDA devices torch sees (if any)."""
    info = {"host": socket.gethostname(), "os": platform.platform(), "cpus": str(os.cpu_count() or "?")}
    if cpu := _cpu_model():
        info["cpu"] = cpu
    if mem := _memory_gib():
        info["memory"] = mem
    try:
        import torch

        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            info["gpus"] = ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))
        else:
            info["gpus"] = "none visible to torch"
    except ImportError:
        pass
    return info


def command_line(argv: Sequence[str]) -> str:
    """``argv`` as it was typed: the program by its name (``python -m pkg`` for a package's __main__.py),
    the arguments shell-quoted."""
    if not argv:
        return ""
    first = Path(argv[0])
    program = f"python -m {first.parent.name}" if first.name == "__main__.py" else (first.name or argv[0])
    return " ".join([program, shlex.join(argv[1:])]).strip()


def collect(repo: str | Path | None = None, argv: Sequence[str] | None = None,
            links: Sequence[tuple[str, str]] = (), notes: Sequence[str] = (),
            runs: Sequence[str | Path] = ()) -> Provenance:
    """The provenance of this process: git state of ``repo`` (default: the checkout holding fade_core),
    package versions, machine, the command line ``argv`` (default: sys.argv) and the time (UTC); with the run
    folders ``runs``, the commits their training sessions recorded (:func:`trained_at`)."""
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]
    commit, dirty, branch = git_state(repo)
    return Provenance(
        git_commit=commit, git_dirty=dirty, git_branch=branch, packages=package_versions(),
        python=platform.python_version(), machine=machine(), command=command_line(sys.argv if argv is None else argv),
        created=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), links=list(links), notes=list(notes),
        trained_at=trained_at(runs),
    )


def trained_at(run_dirs: Sequence[str | Path]) -> dict[str, int]:
    """{commit label: number of runs} over the training sessions the runs in ``run_dirs`` recorded
    (fade_core.runs.read_code_versions); a run resumed at another commit counts at each."""
    from fade_core.runs import read_code_versions

    counts: dict[str, int] = {}
    for run in run_dirs:
        labels = {f"{r.get('git_commit') or 'n/a (not a git checkout)'}"
                  + (" (uncommitted changes)" if r.get("git_dirty") else "") for r in read_code_versions(run)}
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
    return counts


def wall_times(curves: pd.DataFrame) -> pd.DataFrame:
    """Per run: steps recorded and training wall time (sum of ``time_step`` over its steps, in seconds).

    curves: the long training record (run_id, method, seed, step, metric, value), as aggregated."""
    cols = ["run_id", "method", "seed", "steps", "train_seconds"]
    if curves.empty or "metric" not in curves:
        return pd.DataFrame(columns=cols)
    t = curves[curves.metric == "time_step"]
    if t.empty:
        return pd.DataFrame(columns=cols)
    g = t.groupby(["run_id", "method", "seed"]).agg(steps=("step", "nunique"), train_seconds=("value", "sum"))
    return g.reset_index()[cols].sort_values(["method", "seed"]).reset_index(drop=True)


def duration(seconds: float) -> str:
    """12.3 s, 4.5 min or 1.2 h."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def durations(seconds: Sequence[float]) -> list[str]:
    """Durations of one column in ONE unit (s, min or h), the one :func:`duration` picks for the longest."""
    vals = [float(v) for v in seconds]
    if not vals:
        return []
    top = max(vals)
    unit, scale = ("s", 1.0) if top < 120 else ("min", 60.0) if top < 2 * 3600 else ("h", 3600.0)
    return [f"{v / scale:.1f} {unit}" for v in vals]


def as_rows(p: Provenance, extra: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """(field, value) rows of the provenance table, in reading order."""
    rows: list[tuple[str, str]] = []
    if p.git_commit:
        state = " (uncommitted changes)" if p.git_dirty else ""
        rows.append(("git commit", f"{p.git_commit}{state}" + (f" on {p.git_branch}" if p.git_branch else "")))
    else:
        rows.append(("git commit", "n/a (not a git checkout)"))
    if p.trained_at:
        mine = (p.git_commit or "") + (" (uncommitted changes)" if p.git_dirty else "")
        runs = "; ".join(f"{c} ({n} run{'s' if n != 1 else ''})" for c, n in sorted(p.trained_at.items()))
        differs = set(p.trained_at) != {mine}
        rows.append(("runs trained at", runs + (" (not the report's commit above: the code changed after training)"
                                                if differs and p.git_commit else "")))
    rows.append(("command", p.command or "n/a"))
    rows.append(("report built", p.created))
    rows += [(f"machine: {k}", v) for k, v in p.machine.items()]
    rows.append(("python", p.python))
    rows.append(("packages", ", ".join(f"{k} {v}" for k, v in p.packages.items())))
    rows += [(k, str(v)) for k, v in (extra or {}).items()]
    return rows
