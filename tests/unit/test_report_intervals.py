"""The report's confidence intervals: problems-only bootstrap (one seed), the seeds + problems design of
fade_core.stats (several seeds), untrained arms, and the peak-step bootstrap, against known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fade_core.report import intervals as iv


def test_problems_bootstrap_matches_the_normal_interval_of_a_mean() -> None:
    rng = np.random.default_rng(1)
    x = rng.binomial(1, 0.3, size=400).astype(float)
    boot = iv.bootstrap_problems(x)
    lo, hi = boot.ci(0.95)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)  # the CLT interval the bootstrap approximates at P = 400
    assert boot.diff == pytest.approx(x.mean())
    assert lo == pytest.approx(x.mean() - half, abs=0.15 * half) and hi == pytest.approx(x.mean() + half, abs=0.15 * half)
    assert iv.bootstrap_problems(x).replicates.tolist() == boot.replicates.tolist()  # seeded


def test_paired_problems_cancel_difficulty() -> None:
    rng = np.random.default_rng(2)
    difficulty = rng.random(200)
    a, b = difficulty + 0.05, difficulty  # the same problems, a uniformly 5 points better
    paired = iv.bootstrap_problems(a, b)
    assert paired.ci(0.95) == pytest.approx((0.05, 0.05))  # every problem's difference is 0.05: no spread at all
    assert paired.p_value() < 0.001
    same = iv.bootstrap_problems(a, a)
    assert same.diff == 0.0 and same.ci(0.95) == (0.0, 0.0)
    with pytest.raises(ValueError, match="one length"):
        iv.bootstrap_problems(a, b[:10])


def test_several_seeds_give_the_one_sample_t_interval() -> None:
    """With one problem (P = 1) the design is the seed level alone: mean +- t(S-1) sd / sqrt(S)."""
    seeds = np.array([[0.20], [0.25], [0.22], [0.30], [0.18]])
    out = iv.mean_interval(seeds)
    t_975_df4 = 2.7764  # Student's t quantile, 4 degrees of freedom
    half = t_975_df4 * seeds.std(ddof=1) / math.sqrt(5)
    assert out.over == iv.OVER_SEEDS_AND_PROBLEMS and out.estimate == pytest.approx(seeds.mean())
    assert out.low == pytest.approx(seeds.mean() - half, rel=0.05) and out.high == pytest.approx(seeds.mean() + half, rel=0.05)


def test_one_seed_is_problems_only_and_an_untrained_arm_has_no_seed_variance() -> None:
    rng = np.random.default_rng(3)
    one = rng.random((1, 50))
    out = iv.mean_interval(one)
    assert out.over == iv.OVER_PROBLEMS and out.low < one.mean() < out.high
    assert iv.mean_interval(one, constant=True).over == iv.OVER_PROBLEMS_UNTRAINED
    trained = rng.random((3, 50))
    d = iv.diff_interval(trained, one, constant_b=True)  # the base repeated over seeds: the seed level is a's alone
    assert d.over == iv.OVER_SEEDS_AND_PROBLEMS and d.p_value is not None
    assert d.estimate == pytest.approx(trained.mean() - one.mean())
    single = iv.diff_interval(one, rng.random((3, 50)))  # a trained arm with one seed: problems only
    assert single.over == iv.OVER_PROBLEMS


def test_clip_keeps_the_estimate_and_cuts_the_range() -> None:
    wide = iv.Interval(0.1, -0.3, 0.6, iv.OVER_SEEDS_AND_PROBLEMS, 0.5)
    cut = wide.clip(0.0, 1.0)
    assert (cut.estimate, cut.low, cut.high, cut.p_value) == (0.1, 0.0, 0.6, 0.5)
    above = iv.Interval(2.0, 1.5, 3.0, "x").clip(0.0, 1.0)
    assert (above.low, above.high) == (1.0, 1.0)


def test_peak_bootstrap_finds_the_peaks_again_on_resampled_problems() -> None:
    steps = np.array([10.0, 20.0, 30.0])
    # every problem peaks at step 10 for a and at step 30 for b: each replicate agrees, a peaks 20 steps earlier
    a = np.array([[0.6] * 20, [0.4] * 20, [0.3] * 20])
    b = np.array([[0.2] * 20, [0.3] * 20, [0.5] * 20])
    out = iv.bootstrap_peaks(steps, a, steps, b)
    assert (out.steps_earlier.estimate, out.steps_earlier.low, out.steps_earlier.high) == (20.0, 20.0, 20.0)
    assert out.peak_gain.estimate == pytest.approx(0.1) and out.peak_gain.over == iv.OVER_PROBLEMS
    # a noisy tie: the interval spans both answers and holds the point estimate
    rng = np.random.default_rng(4)
    noisy = np.clip(np.array([[0.5] * 30, [0.5] * 30, [0.5] * 30]) + rng.normal(0, 0.3, (3, 30)), 0, 1)
    tie = iv.bootstrap_peaks(steps, noisy, steps, b[:, :1].repeat(30, axis=1))
    assert tie.steps_earlier.low <= tie.steps_earlier.estimate <= tie.steps_earlier.high
    assert tie.steps_earlier.low < tie.steps_earlier.high
    with pytest.raises(ValueError, match="same problems"):
        iv.bootstrap_peaks(steps, a, steps, b[:, :5])


def test_per_run_values_need_two_seeds() -> None:
    assert iv.per_run_diff_interval([100.0], [200.0]) is None
    out = iv.per_run_diff_interval([200.0, 220.0, 210.0], [100.0, 120.0, 110.0])
    assert out is not None and out.over == iv.OVER_SEEDS and out.estimate == pytest.approx(100.0)
    assert out.low < 100.0 < out.high and out.p_value < 0.05
