"""Live trackers of a training run: :class:`~fade_core.train.record.StepLogger` sinks that rank 0 feeds with
every step's record as the run steps, so a run can be watched while it trains.

    TensorBoardLogger  event files under <tracking.tensorboard_dir>/<run_id>/ (tracking.tensorboard, the
                       default): every numeric field of the record as ``train/<field>``, the config as text,
                       the record's example completions (field ``examples``) as text; flushed every step
    WandbLogger        a W&B run with the full config (tracking.wandb; needs the wandb package)
    MlflowLogger       an MLflow run with the flattened config as params (tracking.mlflow; needs mlflow)

:func:`tracking_loggers` builds the ones the config asks for; asking for a tracker whose package is not
installed is an error naming the key, raised before the first step. A resumed run continues its logs:
TensorBoard drops the events after the checkpoint's step (``purge_step``), so the re-run steps are not
drawn twice. The report does not read these files: it reads the run's own metrics record (the same rows).
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fade_core.train.record import StepLogger

EXAMPLES_FIELD = "examples"
"""Step-record field of example completions: a list of objects with ``problem_id``, ``prompt``,
``completion``, ``reward``, ``passed`` (and optionally ``status``); the report shows them too."""


def scalar_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """The record's numeric fields as floats (bools, text, lists and NaN left out): what a tracker plots."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if key in ("step", "seed"):
            continue
        value = float(value)
        if math.isfinite(value):
            out[key] = value
    return out


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config mapping as {"train.params.alpha": 2, ...} (lists as JSON text): MLflow's params."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_config(value, name + "."))
        elif isinstance(value, list | tuple | Mapping):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def examples_markdown(examples: list[Mapping[str, Any]], max_chars: int = 600) -> str:
    """Example completions as Markdown (TensorBoard renders text summaries as Markdown)."""
    parts = []
    for ex in examples:
        # the trainer's examples carry the verifier's ``verdict`` (rewards.pick_examples), not a passed flag
        verdict = str(ex.get("verdict") or ("passed" if ex.get("passed") else ex.get("status") or "failed"))
        head = f"**{ex.get('problem_id', '?')}**: reward {float(ex.get('reward', math.nan)):.3g}, {verdict}"
        body = str(ex.get("completion", ""))[:max_chars]
        parts.append(head + "\n\n    " + body.replace("\n", "\n    "))
    return "\n\n".join(parts)


class TensorBoardLogger:
    """Writes the step record as TensorBoard scalars while the run trains (a :class:`StepLogger`).

    log_dir: this run's folder of event files; config: the resolved config (written once as text);
    resume_step: the step the run resumed from (later events of an earlier attempt are dropped).
    """

    def __init__(self, log_dir: str | Path, *, config: Mapping[str, Any] | None = None, resume_step: int = 0) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=resume_step + 1 if resume_step else None)
        if config is not None and not resume_step:
            import yaml

            text = yaml.safe_dump(dict(config), sort_keys=False)
            self.writer.add_text("config", "    " + text.replace("\n", "\n    "), 0)
        self.writer.flush()

    def log(self, step: int, record: dict[str, Any]) -> None:
        for key, value in scalar_metrics(record).items():
            self.writer.add_scalar(f"train/{key}", value, step)
        examples = record.get(EXAMPLES_FIELD)
        if isinstance(examples, list) and examples:
            self.writer.add_text("examples", examples_markdown(examples), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """A W&B run of the training run, with the full config (a :class:`StepLogger`)."""

    def __init__(self, *, project: str, run_id: str, config: Mapping[str, Any], directory: str | Path,
                 mode: str = "offline") -> None:
        import wandb

        Path(directory).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project, name=run_id, id=_wandb_id(run_id), resume="allow",
                              config=dict(config), dir=str(directory), mode=mode)

    def log(self, step: int, record: dict[str, Any]) -> None:
        self.run.log({f"train/{k}": v for k, v in scalar_metrics(record).items()}, step=step)

    def close(self) -> None:
        self.run.finish()


def _wandb_id(run_id: str) -> str:
    """A W&B run id from a fade run id (W&B ids take letters, digits, '-' and '_'): the same run resumes."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in run_id)[:128]


class MlflowLogger:
    """An MLflow run of the training run, the flattened config as its params (a :class:`StepLogger`)."""

    MAX_PARAM_CHARS = 500  # MLflow rejects longer parameter values

    def __init__(self, *, experiment: str, run_id: str, config: Mapping[str, Any], tracking_uri: str | None) -> None:
        import mlflow

        self.mlflow = mlflow
        if tracking_uri:
            mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_experiment(experiment)
        self.run = mlflow.start_run(run_name=run_id)
        params = {k: str(v)[: self.MAX_PARAM_CHARS] for k, v in flatten_config(config).items()}
        mlflow.log_params(params)

    def log(self, step: int, record: dict[str, Any]) -> None:
        self.mlflow.log_metrics(scalar_metrics(record), step=step)

    def close(self) -> None:
        self.mlflow.end_run()


def _require(package: str, key: str) -> None:
    if importlib.util.find_spec(package) is None:
        raise RuntimeError(f"{key} is true but the {package} package is not installed (pip install {package}, "
                           f"or set {key}=false)")


def tracking_loggers(cfg: Any, run_id: str, *, resume_step: int = 0) -> list[StepLogger]:
    """The live trackers ``cfg.tracking`` asks for, for run ``run_id`` (call on rank 0 only).

    Raises RuntimeError naming the key when an asked-for tracker's package is not installed."""
    from fade_core import plan

    t = cfg.tracking
    if t.wandb:
        _require("wandb", "tracking.wandb")
    if t.mlflow:
        _require("mlflow", "tracking.mlflow")
    config = cfg.to_dict()
    log_dir = plan.tracking_dir(cfg, run_id)
    loggers: list[StepLogger] = []
    if t.tensorboard:
        loggers.append(TensorBoardLogger(log_dir, config=config, resume_step=resume_step))
    if t.wandb:
        loggers.append(WandbLogger(project=t.wandb_project, run_id=run_id, config=config, directory=log_dir,
                                   mode=t.wandb_mode))
    if t.mlflow:
        loggers.append(MlflowLogger(experiment=t.mlflow_experiment, run_id=run_id, config=config,
                                    tracking_uri=t.mlflow_tracking_uri))
    return loggers
