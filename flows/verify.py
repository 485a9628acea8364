"""`fade verify SAMPLES PROBLEMS [--out FILE]`: score a samples file against a problems file.
`fade verify --self-test`: run the sandbox's self-test on every backend and print the guarantees in
force (exit 2 when no backend isolates the file system, the network and per-sample state).

SAMPLES is JSON lines or parquet with at least ``problem_id`` and ``completion`` (other columns, e.g.
``sample_index``, are kept); PROBLEMS is a problems parquet (the problem table). Every sample is scored
with :func:`fade_core.verifiers.score_batch` (countdown in-process, math in worker processes, code in
the sandbox) and written with ``reward``, ``passed``, ``status`` and ``detail`` columns to ``--out``
(JSON lines, or parquet when the name ends in .parquet; default: beside SAMPLES, see
:func:`default_verdicts_path`, so two samples files never share a default output).
A summary table (per benchmark and kind: samples, passed, pass rate, statuses) is printed.

An analysis tool rather than a pipeline stage: the command calls :func:`verify_samples` directly.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer


def read_samples(path: Path) -> pd.DataFrame:
    """JSON lines or parquet with problem_id and completion; errors name the file and row."""
    if not path.is_file():
        raise ValueError(f"{path}: samples file not found")
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
    else:
        rows = []
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    raise ValueError(f"{path}, line {n}: not JSON: {e}") from None
                if not isinstance(rec, dict):
                    raise ValueError(f"{path}, line {n}: expected a JSON object")
                rows.append(rec)
        df = pd.DataFrame(rows)
    for col in ("problem_id", "completion"):
        if col not in df.columns:
            raise ValueError(f"{path}: missing column {col!r} (have {list(df.columns)})")
    bad = df["completion"].map(lambda x: not isinstance(x, str))
    if bad.any():
        raise ValueError(f"{path}, row {int(bad.idxmax())}: completion must be a string")
    return df.reset_index(drop=True)


SAMPLE_SUFFIXES = {".jsonl": ".jsonl", ".parquet": ".parquet"}
"""A samples file's format suffix -> the default verdicts file's (the format is kept)."""


def default_verdicts_path(samples: Path) -> Path:
    """Where the verdicts of ``samples`` go without --out: the name with only a format suffix (.jsonl,
    .parquet) replaced by ``.verdicts.<same>``, any other name kept whole plus ``.verdicts.jsonl``:
    ``exp.a`` -> ``exp.a.verdicts.jsonl``, ``exp.b`` -> ``exp.b.verdicts.jsonl``, ``run.1.parquet`` ->
    ``run.1.verdicts.parquet`` (never the whole name up to its first dot, which files differing only
    after it would share)."""
    suffix = SAMPLE_SUFFIXES.get(samples.suffix)
    if suffix is None:
        return samples.with_name(samples.name + ".verdicts.jsonl")
    return samples.with_name(samples.name[: -len(samples.suffix)] + ".verdicts" + suffix)


def verify_samples(samples: Path, problems: Path, out: Path | None = None, *, workers: int | None = None,
                   progress: bool = True) -> tuple[Path, pd.DataFrame]:  # fmt: skip
    """Score ``samples`` against ``problems``; write the verdicts; return (path, verdicts frame)."""
    from fade_core import verifiers

    sdf = read_samples(samples)
    if not problems.is_file():
        raise ValueError(f"{problems}: problems file not found")
    pdf = pd.read_parquet(problems)
    for col in ("problem_id", "kind"):
        if col not in pdf.columns:
            raise ValueError(f"{problems}: missing column {col!r}")
    by_id: dict[str, dict[str, Any]] = {str(r["problem_id"]): r for r in pdf.to_dict("records")}
    missing = sorted(set(map(str, sdf["problem_id"])) - set(by_id))
    if missing:
        raise ValueError(f"{samples}: {len(missing)} problem_id(s) not in {problems}, e.g. {missing[:3]}")
    probs = [by_id[str(pid)] for pid in sdf["problem_id"]]
    scores = verifiers.score_batch(probs, list(sdf["completion"]), workers=workers, progress=progress)
    res = sdf.copy()
    res["benchmark"] = [p.get("benchmark", "") for p in probs]
    res["kind"] = [p["kind"] for p in probs]
    res["reward"] = [s.reward for s in scores]
    res["passed"] = [s.passed for s in scores]
    res["status"] = [s.status for s in scores]
    res["detail"] = [s.detail for s in scores]
    out = out or default_verdicts_path(samples)
    if out.resolve() in (samples.resolve(), problems.resolve()):
        raise ValueError(f"{out}: the verdicts would overwrite an input; give another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        res.to_parquet(out, index=False)
    else:
        res.to_json(out, orient="records", lines=True, force_ascii=False)
    return out, res


def summary_rows(res: pd.DataFrame) -> list[tuple[str, str, int, int, float, str]]:
    """(benchmark, kind, samples, passed, pass rate, status counts) per benchmark and kind, plus a total."""
    rows = []
    for (bench, kind), g in res.groupby(["benchmark", "kind"], sort=True):
        counts = Counter(g["status"])
        rows.append((str(bench), str(kind), len(g), int(g["passed"].sum()), float(g["passed"].mean()),
                     ", ".join(f"{k}={v}" for k, v in counts.most_common())))  # fmt: skip
    counts = Counter(res["status"])
    rows.append(("all", "", len(res), int(res["passed"].sum()), float(res["passed"].mean()) if len(res) else 0.0,
                 ", ".join(f"{k}={v}" for k, v in counts.most_common())))  # fmt: skip
    return rows


def self_test_report(backend: str = "auto") -> tuple[list[str], bool]:
    """Lines describing each backend's self-test and the one ``backend`` resolves to, and whether a
    backend with every required guarantee was found."""
    from fade_core.sandbox import SandboxUnavailable, isolation, pool, selftest

    parent = os.environ.get("FADE_SANDBOX_CGROUP") or None
    lines = [f"fade sandbox self-test: uid {os.geteuid()}, Python {os.path.realpath(sys.executable)}, "
             f"prefix {sys.prefix}", f"per-sample cgroups: {selftest.describe()}"]  # fmt: skip
    for b in isolation.PREFERENCE:
        g = pool.tested(b, parent)
        verdict = "passes" if not g.missing() else "REFUSED (no " + ", ".join(g.missing()) + ")"
        lines += ["", f"[{b}] {verdict}", *("  " + ln for ln in g.lines()[1:])]
    try:
        iso = pool.resolve(backend, cgroup_parent=parent)
    except SandboxUnavailable as e:
        return [*lines, "", f"in force: NONE: {e}"], False
    g = iso.guarantees
    lines += ["", f"in force ({backend}): {iso.backend}"]
    if iso.backend not in isolation.PREFERENCE and g is not None:
        lines += ["  " + ln for ln in g.lines()[1:]]
    return lines, g is not None and not g.missing()


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to the fade CLI."""

    @app.command("verify")
    def verify_command(
        samples: Annotated[Path | None, typer.Argument(help="Samples: JSON lines or parquet with problem_id, completion.")] = None,
        problems: Annotated[Path | None, typer.Argument(help="Problems parquet (the problem table).")] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Verdicts file (.jsonl or .parquet).")] = None,
        workers: Annotated[int | None, typer.Option("--workers", "-w", min=1, help="Sandbox/math workers (default: one per CPU).")] = None,
        unsafe: Annotated[
            bool, typer.Option("--unsafe", help="Run code WITHOUT namespace isolation when no sandbox backend works.")
        ] = False,
        self_test: Annotated[
            bool, typer.Option("--self-test", help="Test the sandbox backends here and print the guarantees in force.")
        ] = False,
        backend: Annotated[str, typer.Option("--backend", help="Sandbox backend: auto, bwrap, unshare or none.")] = "auto",
    ) -> None:
        """Score a samples file against a problems file and print a summary (or, with --self-test,
        print what the sandbox guarantees here)."""
        for given, what in ((samples, "samples"), (problems, "problems")):
            if given is not None and not self_test and not given.is_file():  # before the verifiers' imports
                typer.secho(f"fade verify: {given}: {what} file not found", fg=typer.colors.RED, err=True)
                raise typer.Exit(2)
        from rich.console import Console
        from rich.table import Table

        from fade_core import verifiers
        from fade_core.sandbox import SandboxUnavailable, use_settings

        use_settings(backend=backend, unsafe=True if unsafe else None)
        if self_test:
            lines, ok = self_test_report(backend)
            typer.echo("\n".join(lines))
            raise typer.Exit(0 if ok else 2)
        if samples is None or problems is None:
            typer.secho("fade verify: give SAMPLES and PROBLEMS (or --self-test)", fg=typer.colors.RED, err=True)
            raise typer.Exit(2)
        console = Console()
        try:
            path, res = verify_samples(samples, problems, out, workers=workers)
        except (ValueError, SandboxUnavailable) as e:
            typer.secho(f"fade verify: {e}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        finally:
            verifiers.shutdown()
        table = Table(title=f"fade verify: {samples.name} against {problems.name}")
        for col, just in (("benchmark", "left"), ("kind", "left"), ("samples", "right"), ("passed", "right"),
                          ("pass rate", "right"), ("statuses", "left")):  # fmt: skip
            table.add_column(col, justify=just)
        for bench, kind, n, k, rate, statuses in summary_rows(res):
            table.add_row(bench, kind, str(n), str(k), f"{rate:.3f}", statuses)
        console.print(table)
        console.print(f"verdicts: {path}")
