"""The warm start on a micro config, its examples, and the `fade warmstart` / `fade train` commands."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from fade_core import config, countdown_task, models, warmstart
from flows.cli import guard_commands

MICRO = ["model.tiny.hidden_size=32", "model.tiny.num_layers=2", "model.tiny.num_heads=2", "model.tiny.intermediate_size=64",
         "model.tiny.max_position=48", "data.countdown.num_train=40", "data.countdown.num_test=10", "warmstart.batch_size=32",
         "warmstart.lr=1e-2", "compute.torch_threads=1"]


def _numbers(prompt: str) -> tuple[list[int], int]:
    left, right = prompt.split("->")
    return [int(x) for x in left.split()], int(right.strip().rstrip(":"))


def test_examples_follow_the_correct_fraction_knob() -> None:
    rng = random.Random(0)
    test = warmstart.heldout_problems(config.Config().data)
    exclude = frozenset((tuple(sorted(p.numbers)), p.target) for p in test)
    kinds = Counter()
    for i in range(600):
        correct = i % 3 == 0
        prompt, completion = warmstart.sample_example(rng, correct=correct, exclude=exclude)
        numbers, target = _numbers(prompt)
        ok, reason = countdown_task.check(completion, numbers, target)
        assert reason in ("ok", "wrong value")  # always a valid expression using every number once
        if correct:
            assert ok and (tuple(sorted(numbers)), target) not in exclude  # correct answers never leak the test split
        kinds[(correct, ok)] += 1
    # random valid expressions hit the target only at the candidate-space rate (a few percent)
    assert kinds[(False, True)] / (kinds[(False, True)] + kinds[(False, False)]) < 0.15


def test_micro_warmstart_writes_checkpoints_and_learns(tmp_path: Path) -> None:
    cfg = config.load(None, MICRO + ["warmstart.steps=300", "warmstart.checkpoint_every=125", "warmstart.correct_fraction=0.5"])
    torch.set_num_threads(1)
    res = warmstart.run_warmstart(cfg.model.tiny, cfg.warmstart, cfg.data, out_dir=tmp_path / "base", eval_problems=5,
                                  eval_samples=8, max_new_tokens=8)
    assert [p.name for p in res.checkpoints] == ["step-125", "step-250", "step-300"]
    for folder in [tmp_path / "base"] + res.checkpoints:
        assert (folder / "model.safetensors").exists() and (folder / "tokenizer.json").exists()
    losses = [json.loads(line)["loss"] for line in (tmp_path / "base" / "warmstart.jsonl").read_text().splitlines()]
    assert len(losses) == 300 and sum(losses[-10:]) / 10 < 0.6 * sum(losses[:10]) / 10
    assert set(res.eval) >= {"pass@1", "pass@8"} and 0 <= res.eval["pass@1"] <= res.eval["pass@8"] <= 1
    model, tok = models.load(tmp_path / "base")
    assert models.num_parameters(model) == res.num_parameters
    # it learned the format: completions parse as arithmetic expressions (using the numbers needs longer training)
    from fade_core.rollout import build_engine

    probs = warmstart.heldout_problems(cfg.data, 5)
    batch = build_engine("hf", model, tok).generate([p.prompt for p in probs], 8, max_new_tokens=8, seed=0)
    wellformed = [countdown_task.check(t, probs[i // 8].numbers, probs[i // 8].target)[1]
                  in ("ok", "wrong value", "numbers not used exactly once") for i, t in enumerate(batch.texts)]
    assert sum(wellformed) / len(wellformed) > 0.8


def _app(*modules) -> typer.Typer:
    app = typer.Typer()
    for m in modules:
        m.register(app)
    guard_commands(app)
    return app


@pytest.mark.slow
def test_warmstart_and_train_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows import train as train_flow
    from flows import warmstart as warmstart_flow

    monkeypatch.chdir(tmp_path)
    app = _app(warmstart_flow, train_flow)
    sets = [a for s in MICRO + ["warmstart.steps=60", "warmstart.checkpoint_every=30", "train.steps=2",
                                "train.prompts_per_step=4", "train.group_size=4", "rollout.max_new_tokens=8",
                                "train.checkpoint_every=1"] for a in ("--set", s)]
    runner = CliRunner()
    missing = runner.invoke(app, ["train", *sets])
    assert missing.exit_code == 2 and "fade warmstart" in missing.output
    out = runner.invoke(app, ["warmstart", "--no-progress", *sets])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "models/base/checkpoints/step-30/config.json").exists()
    out = runner.invoke(app, ["train", "--method", "power", "--set", "train.params.alpha=2", "--no-progress", *sets])
    assert out.exit_code == 0, out.output
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("power(alpha=2)-s0-")
    assert (runs[0] / "checkpoints/step-2/model.safetensors").exists()
    bad = runner.invoke(app, ["train", "--method", "nope", *sets])
    assert bad.exit_code == 2 and "nope" in bad.output
    # the DVC stage's form: one pipeline arm, every pipeline seed, under runs/<arm>/
    out = runner.invoke(app, ["train", "--arm", "power2", "--no-progress", *sets, "--set", "pipeline.seeds=[0, 1]"])
    assert out.exit_code == 0, out.output
    arm_runs = sorted(p.name for p in (tmp_path / "runs" / "power2").iterdir())
    assert len(arm_runs) == 2 and arm_runs[0].startswith("power2-s0-") and arm_runs[1].startswith("power2-s1-")
    assert runner.invoke(app, ["train", "--arm", "nope", *sets]).exit_code == 2
