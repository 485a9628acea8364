"""Prefect tasks of the `prepare` stage: load one benchmark, decontaminate, write the data card.

Thin wrappers: each reads its inputs from paths (or small values), calls fade_core.data, writes its
outputs and returns their paths plus small summaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from fade_core import data
from fade_core.data import card, decontamination


@task(name="prepare-benchmark", task_run_name="prepare-{benchmark}")
def prepare_benchmark(
    benchmark: str, source: str | None, options: dict[str, Any], out_path: str
) -> dict[str, Any]:
    """Load one benchmark (validated; reference solutions run when ``options`` has ``gold``), write it
    to ``out_path`` (parquet); return the path, the row count, the bad rows dropped, the rows left out
    on purpose, the notes on reading the source and the gold validation summary."""
    res = data.load_result(benchmark, source, **options)
    path = data.write_table(res.table, out_path)
    return {
        "benchmark": benchmark,
        "source": data.describe_source(benchmark, source),
        "path": str(path),
        "rows": len(res.table),
        "dropped": [i.to_dict() for i in res.dropped],
        "filtered": dict(res.filtered),
        "notes": list(res.notes),
        "gold": res.gold,
    }


@task(name="decontaminate")
def decontaminate(paths: dict[str, str], *, drop: bool, n: int, threshold: float,
                  training: list[str] | None = None, evaluation: list[str] | None = None) -> dict[str, Any]:
    """Find training/evaluation duplicates among the written tables; with ``drop``, rewrite each
    training table without its flagged problems. Returns the overlaps and the dropped ids.
    ``training`` / ``evaluation``: the benchmarks on each side (default: decontamination's
    TRAINING_BENCHMARKS / EVALUATION_BENCHMARKS); those not prepared are left out."""
    tables = {b: data.read_table(p) for b, p in paths.items()}
    training = [b for b in (training or decontamination.TRAINING_BENCHMARKS) if b in tables]
    evaluation = [b for b in (evaluation or decontamination.EVALUATION_BENCHMARKS) if b in tables and b not in training]
    overlaps = decontamination.check_tables(tables, training=training, evaluation=evaluation, n=n, threshold=threshold)
    dropped: dict[str, list[str]] = {}
    if drop and overlaps:
        for b in training:
            if b in tables:
                kept, ids = decontamination.drop_overlaps(tables[b], overlaps)
                if ids:
                    data.write_table(kept, paths[b])
                    dropped[b] = ids
    return {
        "overlaps": [o.to_dict() for o in overlaps],
        "dropped": dropped,
        "settings": {
            "ngram": n,
            "threshold": threshold,
            "drop": drop,
            "training": training,
            "evaluation": evaluation,
        },
    }


@task(name="write-card")
def write_card(results: list[dict[str, Any]], decontaminated: dict[str, Any], out_dir: str) -> list[str]:
    """Summarize the final tables into card.md and card.json under ``out_dir``; return their paths."""
    summaries = {
        r["benchmark"]: card.benchmark_summary(
            data.read_table(r["path"]),
            source=r["source"],
            dropped=r["dropped"],
            filtered=r["filtered"],
            notes=r.get("notes", ()),
            gold=r.get("gold"),
        )
        for r in results
    }
    c = card.build(
        summaries,
        overlaps=decontaminated["overlaps"],
        decontaminated=decontaminated["dropped"],
        settings=decontaminated["settings"],
    )
    md, js = card.write(c, Path(out_dir))
    return [str(md), str(js)]
