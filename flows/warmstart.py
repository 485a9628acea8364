"""The `warmstart` stage: the built-in tiny model, pre-trained on countdown -> models/base/ (HF format).

Reads config sections model (tiny), warmstart (steps, batch_size, lr, correct_fraction,
checkpoint_every, seed, out_dir), data (countdown: the problem distribution and the held-out split that
is excluded) and compute (torch_threads). Writes ``<warmstart.out_dir>/`` (config.json,
model.safetensors, tokenizer files, warmstart.jsonl, config.yaml) and
``<warmstart.out_dir>/checkpoints/step-N/``.

`fade warmstart [--eval-problems 100]` runs this flow; with --eval-problems it also writes the held-out
pass@k of the result to warmstart_eval.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow

from fade_core import config as fconfig
from fade_core import plan
from flows.options import ParamsOpt, SetOpt, config_or_params, fail, load_config
from tasks import warmstart as tasks


@flow(name="warmstart")
def warmstart(config: fconfig.Config | None = None, eval_problems: int = 0, eval_samples: int = 64,
              progress: bool = True) -> dict[str, Any]:
    """Warm-start the built-in tiny model; return the written paths and measurements."""
    cfg = config_or_params(config)
    if not plan.needs_warmstart(cfg):
        raise fconfig.ConfigError(
            f"model.name_or_path={cfg.model.name_or_path!r}: the warm start pre-trains the built-in tiny model only "
            "(a local checkpoint is already a base model: train from it directly)"
        )
    return tasks.warmstart_model(cfg, eval_problems, eval_samples, progress)


def register(app: typer.Typer) -> None:
    """Add `fade warmstart` to the CLI."""

    @app.command("warmstart")
    def warmstart_command(
        eval_problems: Annotated[int, typer.Option("--eval-problems", min=0, help="Measure held-out pass@k on this many test problems (0: skip).")] = 0,
        eval_samples: Annotated[int, typer.Option("--eval-samples", min=1, help="Samples per problem for that check.")] = 64,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Live progress bar.")] = True,
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """Pre-train the built-in tiny model on countdown (correct_fraction knob) -> warmstart.out_dir."""
        cfg = load_config(params, overrides)
        try:
            out = warmstart(cfg, eval_problems=eval_problems, eval_samples=eval_samples, progress=progress)
        except fconfig.ConfigError as e:
            raise fail("warmstart", e) from None
        typer.echo(f"base model: {out['out_dir']} ({out['num_parameters']} parameters, loss {out['final_loss']:.3f}, "
                   f"{out['seconds']:.0f} s)")
        for ck in out["checkpoints"]:
            typer.echo(f"checkpoint: {ck}")
        if out["eval"]:
            typer.echo("held-out: " + ", ".join(f"{k} {v:.3f}" for k, v in out["eval"].items() if k.startswith("pass@")))
