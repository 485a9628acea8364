"""Prefect task of the `warmstart` stage: pre-train the built-in tiny model on countdown."""

from __future__ import annotations

from typing import Any

from prefect import task

from fade_core import config as fconfig
from fade_core import warmstart
from fade_core.data.prompts import load_template


@task(name="warmstart-tiny-model")
def warmstart_model(config: fconfig.Config, eval_problems: int = 0, eval_samples: int = 64,
                    progress: bool = True) -> dict[str, Any]:
    """Run the warm start of ``config`` (model.tiny, warmstart, data sections); return what it wrote."""
    cfg = config
    if cfg.compute.torch_threads > 0:
        import torch

        torch.set_num_threads(cfg.compute.torch_threads)
    bar = _bar(cfg.warmstart.steps) if progress else None
    try:
        res = warmstart.run_warmstart(
            cfg.model.tiny, cfg.warmstart, cfg.data, out_dir=cfg.warmstart.out_dir, eval_problems=eval_problems,
            eval_samples=eval_samples,
            max_new_tokens=cfg.rollout.max_new_tokens or load_template("countdown").max_new_tokens,
            progress=bar.update if bar else None,
        )
    finally:
        if bar:
            bar.close()
    fconfig.save(cfg, res.out_dir / "config.yaml")
    return {
        "out_dir": str(res.out_dir),
        "checkpoints": [str(p) for p in res.checkpoints],
        "final_loss": res.final_loss,
        "seconds": res.seconds,
        "num_parameters": res.num_parameters,
        "eval": res.eval,
    }


class _bar:
    def __init__(self, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.p = Progress(TextColumn("[bold]warmstart[/]"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn())
        self.p.start()
        self.t = self.p.add_task("ws", total=total, loss="-")

    def update(self, step: int, total: int, loss: float) -> None:
        self.p.update(self.t, completed=step, loss=f"{loss:.3f}")

    def close(self) -> None:
        self.p.stop()
