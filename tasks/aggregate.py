"""Prefect task of the `aggregate` stage: samples (+ training records) -> tables, metrics.json, plot CSVs.
Under a flow it also publishes the headline table as a Prefect table artifact."""

from __future__ import annotations

from typing import Any

from prefect import task

from fade_core import aggregate as agg


@task(name="aggregate-results")
def aggregate_results(results_dir: str, runs_dir: str | None, ks: list[int], flag_n_per_k: float,
                      pipeline: str = "fade", problems_dir: str | None = None) -> dict[str, str]:
    """Build results_dir/results.duckdb and its exports; return {name: path}. ``pipeline``: pipeline.name,
    the prefix of the headline table's artifact key (tasks.artifacts); ``problems_dir``: the prepared problem
    tables (the built-in task's give the uniform sampler's rows)."""
    written = agg.aggregate(results_dir, runs_dir=runs_dir, opts=agg.AggregateOptions(ks=ks, flag_n_per_k=flag_n_per_k),
                            problems_dir=problems_dir)
    _publish(written, pipeline)
    return {k: str(v) for k, v in written.items()}


def headline_rows(results: str) -> list[dict[str, Any]]:
    """Final-step pass@k per benchmark and method (mean over seeds) as plain rows."""
    with agg.open_results(results) as con:
        df = con.execute(
            """SELECT s.benchmark, s.method, s.step AS final_step, 'pass@' || s.k AS metric,
                      round(100 * s.mean, 2) AS mean_pct, round(100 * s.std, 2) AS std_pct, s.num_seeds,
                      s.too_few_samples
               FROM pass_at_k_seeds s JOIN (SELECT benchmark, method, max(step) AS step FROM pass_at_k_seeds
                    GROUP BY ALL) l USING (benchmark, method, step)
               WHERE s.bucket = 'all' ORDER BY benchmark, metric, mean_pct DESC"""
        ).df()
    return df.astype(object).where(df.notna(), None).to_dict("records")


def _publish(written: dict[str, Any], pipeline: str) -> None:
    from prefect.artifacts import create_table_artifact
    from prefect.context import TaskRunContext

    from tasks.naming import artifact_key

    if TaskRunContext.get() is None:  # called outside a flow: nothing to publish to
        return
    create_table_artifact(table=headline_rows(str(written["database"])), key=artifact_key(pipeline, "pass-at-k"),
                          description="Final-step pass@k (%) per benchmark and method, mean and std over seeds.")
