"""fade_core.stats on synthetic data with a known answer: the false-positive rate under no difference,
the power under a real one, Holm against a brute-force reference, and the small-sample seed correction."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fade_core import stats


def _arm(rng: np.random.Generator, problem_effect: np.ndarray, seeds: int, shift: float = 0.0,
         seed_sd: float = 0.03, noise_sd: float = 0.05) -> np.ndarray:
    """[seeds, P] scores: a shared problem difficulty + a per-run offset + per-(run, problem) noise."""
    p = problem_effect.size
    return (problem_effect[None, :] + shift + rng.normal(0, seed_sd, size=(seeds, 1))
            + rng.normal(0, noise_sd, size=(seeds, p)))


@pytest.mark.parametrize("seeds", [3, 5])
def test_false_positive_rate_under_the_null_is_near_alpha(seeds):
    rng = np.random.default_rng(1)
    sims, hits = 300, 0
    for i in range(sims):
        problems = rng.uniform(0.0, 1.0, size=40)
        a, b = _arm(rng, problems, seeds), _arm(rng, problems, seeds)
        hits += stats.bootstrap_diff(a, b, n_boot=1000, seed=i).p_value() <= 0.05
    rate = hits / sims
    # nominal 0.05 (measured 0.03: problem noise is counted at both levels, a little conservative); binomial
    # sd at 300 sims is 0.013. The old sqrt(sd_a^2 + sd_b^2) rule gives 0.16 at 3 seeds.
    assert rate <= 0.09, rate


def test_power_under_a_real_difference():
    rng = np.random.default_rng(2)
    sims, hits = 100, 0
    for i in range(sims):
        problems = rng.uniform(0.0, 1.0, size=40)
        a, b = _arm(rng, problems, 5, shift=0.08), _arm(rng, problems, 5)
        res = stats.bootstrap_diff(a, b, n_boot=1000, seed=i)
        hits += res.p_value() <= 0.05 and res.diff > 0
    assert hits / sims >= 0.9


def test_pairing_by_problem_removes_problem_difficulty():
    """Problem difficulty is shared by both arms: a small consistent shift is found although problems vary
    20x more than the shift."""
    rng = np.random.default_rng(3)
    problems = rng.uniform(0.0, 1.0, size=200)
    a = problems[None, :] + 0.02 + rng.normal(0, 0.002, size=(5, 1)) + rng.normal(0, 0.01, size=(5, 200))
    b = problems[None, :] + rng.normal(0, 0.002, size=(5, 1)) + rng.normal(0, 0.01, size=(5, 200))
    res = stats.bootstrap_diff(a, b, n_boot=2000)
    lo, hi = res.ci(0.95)
    assert 0 < lo < 0.02 < hi and res.p_value() < 0.01


def test_seed_level_is_students_t():
    """Per-run values (P = 1) against a constant arm (Welch df = S - 1): the 97.5% quantile is the Student-t
    interval's, mean + t(0.975, S-1) * sd(ddof=1) / sqrt(S), not the normal one."""
    a = np.array([0.10, 0.30, 0.25, 0.05, 0.40])
    b = np.zeros(4)
    res = stats.bootstrap_diff(a, b, n_boot=100000, seed=7)
    se = a.std(ddof=1) / np.sqrt(a.size)
    t975 = 2.7764451051977987  # scipy.stats.t.ppf(0.975, 4)
    lo, hi = res.ci(0.95)
    assert hi == pytest.approx(a.mean() + t975 * se, rel=0.02)
    assert lo == pytest.approx(a.mean() - t975 * se, rel=0.05)
    assert res.diff == pytest.approx(a.mean())


def test_ci_and_p_value_agree():
    rng = np.random.default_rng(4)
    for i in range(30):
        problems = rng.uniform(size=30)
        res = stats.bootstrap_diff(_arm(rng, problems, 5, shift=rng.uniform(-0.05, 0.05)), _arm(rng, problems, 5),
                                   n_boot=2000, seed=i)
        lo, hi = res.ci(0.95)
        excludes_zero = lo > 0 or hi < 0
        p = res.p_value()
        if abs(p - 0.05) > 0.01:  # away from the boundary the two must agree
            assert excludes_zero == (p < 0.05), (lo, hi, p)


def _holm_brute(p):
    """Holm by definition: claim i is rejected at level alpha iff every hypothesis with a p-value at most
    p_i (in the sorted order up to i) passes its step; the adjusted p-value is the smallest such alpha."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    adj = [0.0] * m
    for rank, i in enumerate(order):
        adj[i] = min(1.0, max(p[order[j]] * (m - j) for j in range(rank + 1)))
    return adj


def test_holm_matches_definition():
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    rng = np.random.default_rng(5)
    for m in range(1, 7):
        for _ in range(20):
            p = rng.uniform(0, 0.2, size=m).round(3).tolist()
            assert stats.holm(p) == pytest.approx(_holm_brute(p))


def test_holm_controls_family_wise_error():
    """Under the global null with independent uniform p-values, P(any rejection) <= alpha."""
    rng = np.random.default_rng(6)
    fw = np.mean([min(stats.holm(rng.uniform(size=12).tolist())) <= 0.05 for _ in range(4000)])
    assert fw <= 0.06


def test_verdicts():
    assert stats.verdict(0.1, 0.01, +1) == stats.AGREES
    assert stats.verdict(-0.1, 0.01, +1) == stats.DISAGREES
    assert stats.verdict(0.1, 0.2, +1) == stats.INCONCLUSIVE
    assert stats.verdict(0.1, 0.2, 0) == stats.NO_DIFFERENCE
    assert stats.verdict(0.1, 0.01, 0) == stats.DIFFERENCE
    with pytest.raises(ValueError):
        stats.verdict(0.1, 0.01, 2)


@pytest.mark.parametrize("bad", [[1.0], [[np.nan, 1.0], [1.0, 1.0]], np.zeros((2, 2, 2))])
def test_bad_input_is_named(bad):
    with pytest.raises(ValueError, match="a:"):
        stats.bootstrap_diff(bad, [1.0, 2.0, 3.0])


def test_mismatched_problems():
    with pytest.raises(ValueError, match="same problems"):
        stats.bootstrap_diff(np.zeros((3, 4)), np.zeros((3, 5)))


def test_exhaustive_small_case_is_deterministic():
    a, b = [0.1, 0.2, 0.3], [0.0, 0.1, 0.05]
    r1 = stats.bootstrap_diff(a, b, n_boot=500, seed=3)
    r2 = stats.bootstrap_diff(a, b, n_boot=500, seed=3)
    assert np.array_equal(r1.replicates, r2.replicates)
    # every replicate is a possible value of the scaled resampled difference
    assert all(np.isfinite(list(itertools.islice(r1.replicates, 10))))
