"""Prefect tasks of the `evaluate` stage: one task per checkpoint (all of its benchmarks), so a flow can fan
evaluations out; each commits its (run, benchmark, step) parts to the results store atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from fade_core import evaluate as ev
from fade_core import runs
from fade_core.store import ResultsStore
from tasks.naming import evaluate_run_name


def load_problem_tables(paths: dict[str, str], *, split: str, max_problems: int | None) -> dict[str, Any]:
    """{benchmark: problem table} read from data/problems/<benchmark>.parquet and narrowed to the eval split."""
    from fade_core.data.schema import read_table

    tables = {}
    for bench, path in paths.items():
        if not Path(path).exists():
            raise FileNotFoundError(f"{path}: benchmark {bench!r} is not prepared (run `fade prepare` with it in data.benchmarks)")
        tables[bench] = ev.select_problems(read_table(path), split=split, max_problems=max_problems, source=path)
    return tables


@task(name="evaluate-checkpoint", task_run_name=evaluate_run_name)
def evaluate_checkpoint(
    checkpoint: str,
    problem_paths: dict[str, str],
    results_dir: str,
    n_samples: int,
    sampling: ev.SamplingOptions,
    *,
    split: str = "test",
    max_problems: int | None = None,
    skip_existing: bool = False,
    metadata: dict[str, Any] | None = None,
    group: str | None = None,
    foreign: bool = False,
) -> list[dict[str, Any]]:
    """Evaluate one checkpoint on every benchmark; return [{run_id, benchmark, step, path, rows, pass_rate}].
    ``foreign``: a model fade did not train (an HF folder or hub id; ``fade evaluate --model``), named by
    :func:`fade_core.evaluate.model_ident` and loaded from the folder :func:`fade_core.models.resolve_model_path`
    finds."""
    import pyarrow.parquet as pq
    from rich.progress import Progress

    tables = load_problem_tables(problem_paths, split=split, max_problems=max_problems)
    if foreign:
        from fade_core.models import resolve_model_path

        ident = ev.model_ident(checkpoint)
        checkpoint = str(resolve_model_path(checkpoint))
    else:
        ident = runs.identify_checkpoint(checkpoint)
    store = ResultsStore(results_dir, group=group)
    with Progress(transient=True) as bar:
        job = bar.add_task(f"evaluate {ident.run_id} step {ident.step}", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(job, description=f"evaluate {label}", completed=done, total=total)

        paths = ev.evaluate_checkpoints([(ident, Path(checkpoint))], tables, n_samples, store,
                                        sampling, skip_existing=skip_existing,
                                        metadata=metadata, progress=progress)
    out = []
    for p in paths:
        t = pq.read_table(p, columns=["benchmark", "passed"])
        passed = t.column("passed").to_pylist()
        out.append({"run_id": ident.run_id, "benchmark": t.column("benchmark")[0].as_py(), "step": ident.step,
                    "path": str(p), "rows": t.num_rows, "pass_rate": sum(passed) / max(len(passed), 1)})
    return out
