"""The study's learning-rate sweep: labels, the fixed choice rule, its config, its STUDY.md table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fade_core import config, lr_sweep, plan
from fade_core.config import Arm


def _records(curves: dict[str, list[float]], every: int = 10) -> pd.DataFrame:
    """Training records: one run per label, eval_pass1 every ``every`` steps (nan in between)."""
    rows = []
    for label, evals in curves.items():
        for i, v in enumerate(evals):
            for j in range(every):
                step = i * every + j + 1
                rows.append({"run_id": f"{label}-s1000-abcdef01", "method": label, "step": step,
                             "eval_pass1": v if j == every - 1 else math.nan})
    return pd.DataFrame(rows)


def test_sweep_arms_cross_every_arm_with_every_rate() -> None:
    arms = {"a": Arm(method="rloo"), "b": Arm(method="power", params={"alpha": 2.0})}
    out = lr_sweep.sweep_arms(arms, (3e-4, 1e-3))
    assert list(out) == ["a__lr0p0003", "a__lr0p001", "b__lr0p0003", "b__lr0p001"]
    assert out["b__lr0p001"] == Arm(method="power", params={"alpha": 2.0}, lr=1e-3)
    with pytest.raises(ValueError, match="> 0"):
        lr_sweep.sweep_arms(arms, (1e-3, 0.0))


def test_criterion_is_the_mean_of_the_last_evaluations() -> None:
    run = _records({"x": [0.1, 0.2, 0.3, 0.4, 0.9]})
    assert lr_sweep.criterion(run) == pytest.approx((0.3 + 0.4 + 0.9) / 3)
    assert lr_sweep.criterion(run, tail=1) == pytest.approx(0.9)
    assert math.isnan(lr_sweep.criterion(run.drop(columns="eval_pass1")))


def test_choose_takes_the_best_rate_ties_to_the_smaller_and_skips_unmeasured() -> None:
    lrs = (3e-4, 1e-3, 3e-3)
    train = _records({
        "a__lr0p0003": [0.1, 0.1, 0.1], "a__lr0p001": [0.2, 0.3, 0.4], "a__lr0p003": [0.5, 0.0, 0.0],  # a: 1e-3
        "b__lr0p0003": [0.2, 0.2, 0.2], "b__lr0p001": [0.2, 0.2, 0.2], "b__lr0p003": [0.1, 0.1, 0.1],  # tie: 3e-4
    })
    # c: its 1e-3 run never evaluated; its other rates did -> the best measured one
    c = _records({"c__lr0p0003": [0.05] * 3, "c__lr0p003": [0.07] * 3})
    c_unmeasured = _records({"c__lr0p001": [0.9] * 3}).assign(eval_pass1=np.nan)
    got = lr_sweep.choose(pd.concat([train, c, c_unmeasured]), ["a", "b", "c", "d"], lrs)
    assert got["a"].lr == 1e-3 and got["a"].scores[1e-3] == pytest.approx(0.3)
    assert got["b"].lr == 3e-4 and "tied with 0.001" in got["b"].reason
    assert got["c"].lr == 3e-3 and math.isnan(got["c"].scores[1e-3])
    assert got["d"].lr is None and "no sweep run" in got["d"].reason
    with pytest.raises(ValueError, match="arm\\(s\\) d"):
        lr_sweep.with_chosen_lrs({"a": Arm(method="rloo"), "d": Arm(method="grpo")}, got)
    chosen = lr_sweep.with_chosen_lrs({"a": Arm(method="rloo")}, got)
    assert chosen["a"].lr == 1e-3 and chosen["a"].method == "rloo"


def test_chosen_lr_reaches_the_run_config() -> None:
    cfg = config.load(None, ["pipeline.seeds=[0]", "train.lr=0.001",
                             "pipeline.arms={x: {method: rloo, lr: 0.0003}, y: {method: grpo}}"])
    runs = {p.arm: p.config.train.lr for p in plan.run_plans(cfg)}
    assert runs == {"x": 3e-4, "y": 1e-3}


def test_sweep_config_needs_the_validation_curve(tmp_path) -> None:
    placed = plan.place_outputs(config.load(None, ["train.eval_every=10", "pipeline.seeds=[0, 1]"]), tmp_path)
    sweep = lr_sweep.sweep_config(placed, (1e-3, 3e-3))
    assert sweep.pipeline.seeds == [lr_sweep.SWEEP_SEED] and len(sweep.pipeline.arms) == 2 * len(placed.pipeline.arms)
    assert sweep.train.runs_dir == str(tmp_path / "sweep" / "runs")
    placed.train.eval_every = 0
    with pytest.raises(ValueError, match="train.eval_every"):
        lr_sweep.sweep_config(placed)
    placed.train.eval_every, placed.train.eval_split = 10, "test"
    with pytest.raises(ValueError, match="train.eval_split"):
        lr_sweep.sweep_config(placed)


def test_markdown_table_bolds_the_chosen_rate() -> None:
    choices = {"a": lr_sweep.LrChoice("a", 1e-3, {3e-4: 0.1, 1e-3: 0.25}), "b": lr_sweep.LrChoice("b", None, {3e-4: math.nan})}
    text = lr_sweep.markdown_table(choices)
    assert "| a | 0.100 | **0.250** | 0.001 |" in text and "| b | – | – | – |" in text


def test_edge_note_names_arms_that_chose_the_grids_smallest_or_largest_rate() -> None:
    grid = {3e-4: 0.1, 1e-3: 0.2, 3e-3: 0.05}
    choices = {"lo": lr_sweep.LrChoice("lo", 3e-4, {**grid, 3e-4: 0.3}), "mid": lr_sweep.LrChoice("mid", 1e-3, grid),
               "hi": lr_sweep.LrChoice("hi", 3e-3, {**grid, 3e-3: 0.4}), "tied": lr_sweep.LrChoice("tied", 3e-4, {}),
               "none": lr_sweep.LrChoice("none", None, {3e-4: math.nan})}
    note = lr_sweep.edge_note(choices)
    assert note.startswith("1 of 3 swept arms chose the grid's smallest rate (lo); 1 of 3 its largest (hi)")
    assert "outside the grid (not tested)" in note
    assert lr_sweep.edge_note({"mid": choices["mid"]}) == "" and lr_sweep.edge_note({}) == ""


def test_a_tied_arm_is_not_swept_and_takes_its_partners_rate(tmp_path) -> None:
    train = _records({"a__lr0p001": [0.3] * 3, "a__lr0p003": [0.1] * 3})
    got = lr_sweep.choose(train, ["rloo", "a"], (1e-3, 3e-3), tied={"rloo": "a"})
    assert list(got) == ["rloo", "a"] and got["rloo"].lr == got["a"].lr == 1e-3 and "a's rate" in got["rloo"].reason
    fig = lr_sweep.fig_sensitivity(got)  # the tied arm has no curve of its own: drawn without it
    assert [ln.get_label() for ln in fig.axes[0].lines if not ln.get_label().startswith("_")] == ["a"]
    assert "| rloo | – | – | 0.001 (not swept: runs at a's rate (the same update)) |" in lr_sweep.markdown_table(got)
    with pytest.raises(ValueError, match="rloo -> b"):
        lr_sweep.choose(train, ["rloo", "a"], (1e-3,), tied={"rloo": "b"})
    placed = plan.place_outputs(config.load(None, ["train.eval_every=10",
                                                   "pipeline.arms={rloo: {method: rloo}, a: {method: grpo}}"]), tmp_path)
    assert list(lr_sweep.sweep_config(placed, (1e-3, 3e-3), tied={"rloo": "a"}).pipeline.arms) == [
        "a__lr0p001", "a__lr0p003"]


# ------------------------------------------------------------------------------ the edge rule
def test_next_rate_steps_one_grid_step_past_either_edge() -> None:
    assert lr_sweep.next_rate((1e-4, 3e-4, 1e-3), lower=True) == 3.33e-5
    assert lr_sweep.next_rate((1e-4, 3e-4, 1e-3), lower=False) == 3.33e-3
    assert lr_sweep.next_rate((3.33e-5, 1e-4, 3e-4, 1e-3), lower=True) == pytest.approx(1.11e-5)
    assert lr_sweep.next_rate((1e-3, 3e-3), lower=False) == 9e-3  # the step of the two outermost rates
    assert lr_sweep.next_rate((1e-3,), lower=True) == pytest.approx(1e-3 / math.sqrt(10), rel=1e-2)
    with pytest.raises(ValueError, match="positive"):
        lr_sweep.next_rate((), lower=True)


def test_extensions_go_past_the_edge_the_choice_sits_on_and_nowhere_else() -> None:
    grid = {1e-4: 0.1, 3e-4: 0.2, 1e-3: 0.05}
    choices = {
        "lo": lr_sweep.LrChoice("lo", 1e-4, {**grid, 1e-4: 0.3}),
        "mid": lr_sweep.LrChoice("mid", 3e-4, grid),
        "hi": lr_sweep.LrChoice("hi", 1e-3, {**grid, 1e-3: 0.4}),
        "tied": lr_sweep.LrChoice("tied", 1e-4, {}),  # runs at a partner's rate: never extended
        "none": lr_sweep.LrChoice("none", None, {1e-4: math.nan, 3e-4: math.nan}),
        "one": lr_sweep.LrChoice("one", 1e-4, {1e-4: 0.2, 3e-4: math.nan}),  # one measured rate: no choice made
    }
    assert lr_sweep.extensions(choices) == {"lo": 3.33e-5, "hi": 3.33e-3}


def test_per_arm_rates_sweep_and_choose_each_arm_on_its_own_grid(tmp_path) -> None:
    arms = {"a": Arm(method="rloo"), "b": Arm(method="grpo")}
    rates = {"a": [1e-4, 3e-4, 3.33e-5], "b": [1e-4, 3e-4]}
    assert list(lr_sweep.sweep_arms(arms, rates)) == [
        "a__lr0p0001", "a__lr0p0003", "a__lr3p33em05", "b__lr0p0001", "b__lr0p0003"]
    assert list(lr_sweep.sweep_arms(arms, {"b": [1e-3]})) == ["b__lr0p001"]  # an arm not named is not swept
    with pytest.raises(ValueError, match="at least one rate"):
        lr_sweep.sweep_arms(arms, {"c": [1e-3]})
    train = _records({"a__lr0p0001": [0.3] * 3, "a__lr0p0003": [0.2] * 3, "a__lr3p33em05": [0.35] * 3,
                      "b__lr0p0001": [0.1] * 3, "b__lr0p0003": [0.2] * 3, "b__lr3p33em05": [0.9] * 3})
    got = lr_sweep.choose(train, ["a", "b"], rates)
    assert got["a"].lr == 3.33e-5 and set(got["a"].scores) == {1e-4, 3e-4, 3.33e-5}
    assert got["b"].lr == 3e-4 and set(got["b"].scores) == {1e-4, 3e-4}  # b's extra run is not on b's grid
    assert lr_sweep.extensions(got) == {"a": pytest.approx(1.11e-5), "b": 9e-4}
    placed = plan.place_outputs(config.load(None, ["train.eval_every=10",
                                                   "pipeline.arms={a: {method: rloo}, b: {method: grpo}}"]), tmp_path)
    assert list(lr_sweep.sweep_config(placed, {"a": [3.33e-5]}).pipeline.arms) == ["a__lr3p33em05"]
    assert "one grid step below (above)" in lr_sweep.RULE and lr_sweep.MAX_EXTENSIONS == 2
