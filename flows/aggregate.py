"""The `aggregate` stage: every stored sample (+ the runs' training records) -> pass@k and derived tables.

Reads config sections eval (results_dir, ks, flag_n_per_k) and train (runs_dir). Writes, under
``eval.results_dir``: results.duckdb (every table), tables/<table>.parquet, plots/<plot>.csv,
metrics.json and config.yaml (the resolved config).
"""

from __future__ import annotations

from pathlib import Path

import typer
from prefect import flow

from fade_core import config as fconfig
from flows.options import ParamsOpt, SetOpt, config_or_params, fail, load_config
from tasks import aggregate as tasks


@flow(name="aggregate")
def aggregate(config: fconfig.Config | None = None) -> dict[str, str]:
    """Aggregate eval.results_dir (with the training records of train.runs_dir); return {name: path}."""
    cfg = config_or_params(config)
    runs_dir = cfg.train.runs_dir if Path(cfg.train.runs_dir).is_dir() else None
    written = tasks.aggregate_results(cfg.eval.results_dir, runs_dir, list(cfg.eval.ks), cfg.eval.flag_n_per_k,
                                      pipeline=cfg.pipeline.name, problems_dir=str(Path(cfg.data.out_dir) / "problems"))
    written["config"] = str(fconfig.save(cfg, Path(cfg.eval.results_dir) / "config.yaml"))
    return written


def register(app: typer.Typer) -> None:
    """Add `fade aggregate` to the CLI."""

    @app.command("aggregate")
    def aggregate_command(params: ParamsOpt = Path("params.yaml"), overrides: SetOpt = None) -> None:
        """pass@k (SQL, unbiased), frontier, steps-to-peak, seed statistics -> results.duckdb + exports."""
        cfg = load_config(params, overrides)
        try:
            written = aggregate(cfg)
        except FileNotFoundError as e:
            raise fail("aggregate", e, code=1) from None
        typer.echo(f"database: {written['database']}")
        typer.echo(f"metrics: {written['metrics']}")
