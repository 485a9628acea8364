"""The trainer's live trackers: TensorBoard events as the run steps (and after a resume), W&B and MLflow
through fake modules (their code paths, the config they get), and the config's tracking section."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from fade_core import config
from fade_core.report import examples as report_examples
from fade_core.train import loggers

RECORD = {"run_id": "grpo-s0-0123abcd", "method": "grpo", "seed": 0, "step": 1, "lr": 1e-3, "reward_mean": 0.25,
          "solve_hist": [1, 2, 1], "alpha": math.nan, "kl_ref": 0.0, "loss": -0.5, "optimizer_steps": 2,
          "flag": True, "examples": [{"problem_id": "countdown/train/3", "prompt": "p", "completion": "1+2",
                                      "reward": 1.0, "passed": True}]}


def _scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir)).Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_scalar_metrics_keep_finite_numbers_only() -> None:
    assert loggers.scalar_metrics(RECORD) == {"lr": 1e-3, "reward_mean": 0.25, "kl_ref": 0.0, "loss": -0.5,
                                              "optimizer_steps": 2.0}


def test_tensorboard_events_are_written_as_the_run_steps_and_a_resume_replaces_later_steps(tmp_path: Path) -> None:
    log_dir = tmp_path / "tb" / "grpo-s0-0123abcd"
    tb = loggers.TensorBoardLogger(log_dir, config={"train": {"method": "grpo"}})
    sizes = []
    for step in (1, 2, 3):
        tb.log(step, {**RECORD, "step": step, "reward_mean": 0.1 * step})
        sizes.append(sum(f.stat().st_size for f in log_dir.glob("events.out.tfevents.*")))
        assert [s for s, _ in _scalars(log_dir)["train/reward_mean"]] == list(range(1, step + 1))  # readable now
    assert sizes[0] < sizes[1] < sizes[2]  # flushed every step, not at close
    tb.close()
    # resumed from the checkpoint of step 2: step 3 is logged again and drawn once
    again = loggers.TensorBoardLogger(log_dir, config={"train": {"method": "grpo"}}, resume_step=2)
    again.log(3, {**RECORD, "step": 3, "reward_mean": 0.9})
    again.close()
    values = _scalars(log_dir)["train/reward_mean"]
    assert [s for s, _ in values] == [1, 2, 3] and values[-1][1] == pytest.approx(0.9)


def test_wandb_gets_the_config_and_every_step(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: dict[str, Any] = {"log": []}

    class Run:
        def log(self, data: dict, step: int) -> None:
            calls["log"].append((step, data))

        def finish(self) -> None:
            calls["finished"] = True

    fake = ModuleType("wandb")
    fake.init = lambda **kw: calls.update(init=kw) or Run()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    cfg = {"train": {"method": "fade", "params": {}}}
    w = loggers.WandbLogger(project="p", run_id="fade(alpha=2)-s0-0123abcd", config=cfg, directory=tmp_path / "w")
    w.log(4, RECORD)
    w.close()
    init = calls["init"]
    assert init["config"] == cfg and init["mode"] == "offline" and init["name"] == "fade(alpha=2)-s0-0123abcd"
    assert init["id"] == "fade_alpha_2_-s0-0123abcd" and init["dir"] == str(tmp_path / "w")
    assert calls["log"] == [(4, {"train/lr": 1e-3, "train/reward_mean": 0.25, "train/kl_ref": 0.0, "train/loss": -0.5,
                                 "train/optimizer_steps": 2.0})]
    assert calls["finished"]


def test_mlflow_gets_the_flat_config_and_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, Any] = {"metrics": []}
    fake = ModuleType("mlflow")
    fake.set_tracking_uri = lambda uri: calls.update(uri=uri)
    fake.set_experiment = lambda name: calls.update(experiment=name)
    fake.start_run = lambda run_name: calls.update(run=run_name) or SimpleNamespace()
    fake.log_params = lambda params: calls.update(params=params)
    fake.log_metrics = lambda metrics, step: calls["metrics"].append((step, metrics))
    fake.end_run = lambda: calls.update(ended=True)
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    cfg = {"train": {"method": "power", "params": {"alpha": 2}}, "eval": {"ks": [1, 4]}, "x": "a" * 600}
    m = loggers.MlflowLogger(experiment="e", run_id="r", config=cfg, tracking_uri="file:///tmp/mlruns")
    m.log(2, RECORD)
    m.close()
    assert (calls["uri"], calls["experiment"], calls["run"], calls["ended"]) == ("file:///tmp/mlruns", "e", "r", True)
    assert calls["params"] == {"train.method": "power", "train.params.alpha": "2", "eval.ks": "[1, 4]", "x": "a" * 500}
    assert calls["metrics"] == [(2, loggers.scalar_metrics(RECORD))]


def test_tracking_loggers_follow_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = config.load(None, [f"train.runs_dir={tmp_path / 'runs'}"])
    built = loggers.tracking_loggers(cfg, "grpo-s0-0123abcd")
    assert [type(x).__name__ for x in built] == ["TensorBoardLogger"]
    assert built[0].log_dir == tmp_path / "tensorboard" / "grpo-s0-0123abcd"  # beside runs_dir by default
    built[0].close()
    off = config.load(None, ["tracking.tensorboard=false"])
    assert loggers.tracking_loggers(off, "r") == []
    monkeypatch.setattr(loggers.importlib.util, "find_spec", lambda name: None)
    for key in ("tracking.wandb", "tracking.mlflow"):
        with pytest.raises(RuntimeError, match=f"{key} is true but the .* package is not installed"):
            loggers.tracking_loggers(config.load(None, ["tracking.tensorboard=false", f"{key}=true"]), "r")


def test_examples_field_is_the_one_the_report_reads() -> None:
    assert loggers.EXAMPLES_FIELD == report_examples.EXAMPLES_FIELD
    md = loggers.examples_markdown(RECORD["examples"])
    assert md.startswith("**countdown/train/3**: reward 1, passed") and "    1+2" in md


def test_examples_markdown_labels_each_example_by_the_trainers_verdict() -> None:
    """The trainer's examples (rewards.pick_examples) carry a verdict and no passed flag: a passing one is
    'passed', a failing one names its verdict (it read 'failed' for every example before)."""
    md = loggers.examples_markdown([
        {"problem_id": "a", "completion": "x", "reward": 1.0, "verdict": "passed"},
        {"problem_id": "b", "completion": "y", "reward": 0.0, "verdict": "wrong_answer"},
    ])
    assert "**a**: reward 1, passed" in md and "**b**: reward 0, wrong_answer" in md
