"""The `report` stage: aggregated results -> reports/<name>/ (index.html, figures, tables).

Reads config sections report (name, title, formats, out_dir, study), eval (results_dir, benchmarks), train
(runs_dir: the runs' configs say what each arm is), tracking (where the live TensorBoard logs are: linked from the page) and
data (out_dir: the data card and the problems' prompts). The page embeds the exact resolved params, the data
card and the provenance of the process that builds it. TensorBoard events are not written here: the
trainer writes them live (tracking.tensorboard).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from prefect import flow

from fade_core import config as fconfig
from fade_core import plan
from flows.options import ParamsOpt, SetOpt, config_or_params, fail, load_config
from tasks import report as tasks


@flow(name="report")
def report(config: fconfig.Config | None = None) -> dict[str, Any]:
    """Build the report of eval.results_dir into report.out_dir/report.name; return the paths."""
    cfg = config_or_params(config)
    out_dir = Path(cfg.report.out_dir) / cfg.report.name
    out = tasks.build_report(
        cfg.eval.results_dir, str(out_dir), title=cfg.report.title, params_yaml=cfg.to_yaml(),
        data_card_path=str(Path(cfg.data.out_dir) / "card.md"), formats=list(cfg.report.formats),
        runs_dir=cfg.train.runs_dir,
        tensorboard_dir=str(plan.tensorboard_root(cfg)) if cfg.tracking.tensorboard else None,
        problem_paths=plan.problem_paths(cfg),
        study={"runs_dir": cfg.train.runs_dir, "benchmark": cfg.train.benchmark,
               "arms": {k: a.model_dump(mode="json") for k, a in cfg.pipeline.arms.items()}}
        if cfg.report.study else None,
        pipeline=cfg.pipeline.name,
        benchmarks={"prepared": list(cfg.data.benchmarks), "trained": [cfg.train.benchmark],
                    "evaluated": list(cfg.eval.benchmarks)},
    )
    out["config"] = str(fconfig.save(cfg, out_dir / "config.yaml"))
    return out


def register(app: typer.Typer) -> None:
    """Add `fade report` to the CLI."""

    @app.command("report")
    def report_command(params: ParamsOpt = Path("params.yaml"), overrides: SetOpt = None) -> None:
        """Figures (PNG/SVG) and a self-contained index.html of the aggregated results and the runs' records."""
        cfg = load_config(params, overrides)
        try:
            out = report(cfg)
        except FileNotFoundError as e:
            raise fail("report", e, code=1) from None
        typer.echo(f"report: {out['html']}")
        for name, why in out["missing"].items():
            typer.echo(f"figure {name} not drawn: {why}")
        if cfg.tracking.tensorboard and plan.tensorboard_root(cfg).is_dir():
            typer.echo(f"training logs: tensorboard --logdir {plan.tensorboard_root(cfg)}")
