"""The `train` stage: base model + training problems + advantage method -> runs/<run_id>/.

Reads config sections train (method, params, steps, batch, loss, optimiser, checkpoints), rollout
(engine, temperature, top_p, max_new_tokens), model (name_or_path, dtype), warmstart (out_dir: the
built-in base model), data (out_dir: problems/<train.benchmark>.parquet) and compute (device, ranks,
deepspeed_config, workers, torch_threads). Writes ``runs/<run_id>/{config.yaml, metrics.jsonl,
metrics.duckdb, checkpoints/step-N/}``; a rerun of the same config resumes from the last checkpoint.

`fade train --set train.method=power --set train.params.alpha=2` runs this flow; `fade train --arm power2`
trains one pipeline arm for every pipeline seed into runs/power2/ (the DVC stage's command).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow

from fade_core import config as fconfig
from fade_core import plan
from flows.options import ParamsOpt, SetOpt, load_config
from tasks import train as tasks


@flow(name="train")
def train(config: dict[str, Any] | None = None, problems_path: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Train one RL run; return its id, folder, checkpoints and last metrics."""
    cfg = fconfig.from_dict(config or {})
    plan.base_model_path(cfg)  # fail early, naming what is missing
    return tasks.train_run(cfg.to_dict(), problems_path, progress)


def arm_configs(cfg: fconfig.Config, arm: str) -> list[dict[str, Any]]:
    """The training configs of one pipeline arm, one per pipeline seed (runs go to <train.runs_dir>/<arm>/),
    exactly as `fade run` builds them (flows.pipeline.run_configs)."""
    from flows.pipeline import run_configs

    if arm not in cfg.pipeline.arms:
        raise fconfig.ConfigError(f"--arm {arm!r}: not in pipeline.arms ({', '.join(cfg.pipeline.arms)})")
    return [rc for name, _seed, rc in run_configs(cfg) if name == arm]


def register(app: typer.Typer) -> None:
    """Add `fade train` to the CLI."""

    @app.command("train")
    def train_command(
        method: Annotated[str | None, typer.Option("--method", "-m", help="Shortcut for --set train.method=NAME.")] = None,
        arm: Annotated[str | None, typer.Option("--arm", help="Train this pipeline arm for every pipeline seed (runs/<arm>/), as `fade run` and `dvc repro` do.")] = None,
        problems: Annotated[str | None, typer.Option("--problems", help="Problem table (default: data/problems/<train.benchmark>.parquet).")] = None,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Live progress bar.")] = True,
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """RL-train the base model with an advantage method; records metrics and checkpoints under runs/<run_id>/."""
        sets = ([f"train.method={method}"] if method else []) + list(overrides or [])
        cfg = load_config(params, sets)
        try:
            configs = arm_configs(cfg, arm) if arm else [cfg.to_dict()]
            plan.base_model_path(cfg)
            outs = [train(c, problems_path=problems, progress=progress) for c in configs]
        except (fconfig.ConfigError, FileNotFoundError) as e:
            typer.secho(f"fade train: {e}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        for out in outs:
            typer.echo(f"run: {out['run_dir']}")
            for ck in out["checkpoints"]:
                typer.echo(f"checkpoint: {ck}")
            last = out["last_metrics"]
            if last:
                typer.echo(f"last step {last.get('step')}: reward {last.get('reward_mean', float('nan')):.3f}, "
                           f"entropy {last.get('entropy', float('nan')):.3f}")
