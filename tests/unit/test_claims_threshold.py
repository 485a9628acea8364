"""Time to a pass@1 threshold in rollouts, and the testbed-headroom check, on synthetic data with known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fade_core import claims as cl
from fade_core.claims import threshold as th


def _curve(label: str, reach: int, plateau: float, *, steps: int = 200, seeds=(0, 1, 2), per_step: int = 512,
           jitter: float = 0.003) -> pd.DataFrame:
    """eval_pass1 = plateau x min(1, step / reach) every 10 steps (+ a small per-seed offset)."""
    rows = []
    for seed in seeds:
        for step in range(1, steps + 1):
            v = plateau * min(1.0, step / reach) + jitter * (seed - 1) if step % 10 == 0 else math.nan
            rows.append(dict(run_id=f"{label}-s{seed}-0000abcd", method=label, seed=seed, step=step, eval_pass1=v,
                             rollouts=per_step, optimizer_steps=2))
    return pd.DataFrame(rows)


def _claim(*frames: pd.DataFrame) -> cl.Claim:
    return th.claim_time_to_threshold(pd.concat(frames, ignore_index=True), cl.FADE_ARMS)


def test_fade_earlier_in_rollouts_agrees_and_picks_the_best_static():
    c = _claim(_curve("fade", 40, 0.50), _curve("grpo", 150, 0.49), _curve("rloo", 40, 0.30),
               _curve("base", 1, 0.9))  # an untrained row is never the baseline
    assert c.values["baseline"] == "grpo" and c.verdict == cl.AGREES, c.reason
    assert c.values["threshold"] == pytest.approx(0.9 * 0.50, abs=0.004)
    # fade reaches 0.45 at step 36 -> eval at 40 (20480 rollouts); grpo at 138 -> 140 (71680)
    assert np.mean(c.values["rollouts"]["fade"]) == pytest.approx(40 * 512, rel=0.15)
    assert np.mean(c.values["rollouts"]["grpo"]) == pytest.approx(140 * 512, rel=0.1)
    assert c.values["censored"] == {"fade": 0, "grpo": 0}


def test_identical_curves_are_inconclusive():
    c = _claim(_curve("fade", 80, 0.5), _curve("grpo", 80, 0.5))
    assert c.verdict == cl.INCONCLUSIVE and c.values["diff"] == pytest.approx(0.0)


def test_time_is_counted_in_rollouts_not_steps():
    """codapo reaches the threshold at the same step as fade but samples twice as much a step: later in rollouts."""
    c = _claim(_curve("fade", 60, 0.5), _curve("codapo", 60, 0.5, per_step=1024, jitter=0.002))
    assert c.values["baseline"] == "codapo" and c.verdict == cl.AGREES, c.reason
    assert np.mean(c.values["rollouts"]["codapo"]) == pytest.approx(2 * np.mean(c.values["rollouts"]["fade"]), rel=0.1)
    assert "codapo 204800 / 400" in c.measurement  # the budgets are stated: rollouts / optimizer steps per run


def test_a_run_that_never_reaches_is_censored_and_said():
    c = _claim(_curve("fade", 30, 0.5), _curve("grpo", 400, 0.49, steps=200))  # grpo tops at 0.245 + ...
    assert c.values["censored"]["grpo"] == 3 and c.values["censored"]["fade"] == 0
    assert "censored" in c.reason and "bound" in c.reason
    rollouts, step, censored = th.time_to(_curve("grpo", 400, 0.49, seeds=(0,)), 0.45)
    assert censored and rollouts == pytest.approx(200 * 512 + 10 * 512) and step == 210


def test_earlier_but_lower_is_vetoed():
    c = _claim(_curve("fade", 20, 0.30), _curve("grpo", 150, 0.50))
    # threshold 0.45: fade never gets there (censored at its budget) -> it is later anyway
    assert c.verdict != cl.AGREES
    low = _claim(_curve("fade", 10, 0.47), _curve("grpo", 150, 0.50, jitter=0.001))
    assert low.verdict == cl.INCONCLUSIVE and "lower level" in low.reason, low.reason


def test_without_curves_the_claim_says_what_is_missing():
    c = _claim(_curve("fade", 40, 0.5).drop(columns="eval_pass1"), _curve("grpo", 40, 0.5).drop(columns="eval_pass1"))
    assert c.verdict == cl.INCONCLUSIVE and "eval_pass1" in c.reason


# ------------------------------------------------------------------------------------------ headroom
def _headroom_tables(base: np.ndarray, uniform: np.ndarray, ks=(1, 10, 100), levels=("easy", "hard")
                     ) -> dict[str, pd.DataFrame]:
    """Per problem pass@1 of base and uniform; pass@k = 1 - (1 - p1)^k (independent draws), per bucket means."""
    pp, pk = [], []
    for method, p1 in (("base", base), ("uniform", uniform)):
        for k in ks:
            vals = 1 - (1 - p1) ** k
            pp += [dict(run_id=method, method=method, seed=0, step=0, benchmark="countdown", problem_id=f"p{i}", k=k,
                        pass_at_k=v) for i, v in enumerate(vals)]
            lv = np.array([levels[i % len(levels)] for i in range(len(vals))])
            for bucket in ("all", *levels):
                sel = vals if bucket == "all" else vals[lv == bucket]
                pk.append(dict(run_id=method, method=method, seed=0, step=0, benchmark="countdown", bucket=bucket, k=k,
                               pass_at_k=float(sel.mean())))
    return {"pass_at_k": pd.DataFrame(pk), "pass_at_k_problem": pd.DataFrame(pp)}


def test_headroom_passes_when_base_beats_uniform_and_nothing_saturates():
    rng = np.random.default_rng(0)
    uniform = rng.uniform(0.001, 0.02, 60)
    c = cl.claim_headroom(_headroom_tables(uniform * 2.5, uniform), "countdown")
    assert c.verdict == cl.PASSES, c.reason
    assert c.values["ci"][0] > 0 and c.values["above_max_at_k"] == []
    assert "easy: pass@1" in c.measurement and "k=100" in c.measurement


def test_headroom_fails_at_a_saturated_k_and_when_base_is_uniform():
    rng = np.random.default_rng(1)
    uniform = rng.uniform(0.02, 0.08, 60)  # pass@100 ~0.98
    c = cl.claim_headroom(_headroom_tables(uniform * 2, uniform), "countdown")
    assert c.verdict == cl.FAILS and c.values["above_max_at_k"] == [100] and "k = 100" in c.reason
    small = rng.uniform(0.001, 0.02, 60)
    same = cl.claim_headroom(_headroom_tables(small + rng.normal(0, 1e-4, 60).clip(-5e-4, 5e-4), small), "countdown")
    assert same.verdict == cl.FAILS and "not detectably better" in same.reason
    missing = cl.claim_headroom({"pass_at_k": _headroom_tables(small, small)["pass_at_k"].query("method == 'base'")},
                                "countdown")
    assert missing.verdict == cl.INCONCLUSIVE and "uniform" in missing.reason
