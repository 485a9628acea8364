"""The positive/negative mass decomposition and exact profiles against the spec's closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fade_core import advantages as A
from fade_core import decomposition as D

PS = np.linspace(0.0, 1.0, 41)


def test_masses_by_hand():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    a = torch.tensor([[2.0, -1.0, -3.0, 0.5], [1.0, 1.0, 1.0, -6.0]])
    m_s, m_f = D.masses(r, a)
    assert m_s.tolist() == pytest.approx([2.5 / 4, 3 / 4])
    assert m_f.tolist() == pytest.approx([4 / 4, 6 / 4])
    mask = torch.tensor([[True, False, True, True], [True, True, True, False]])
    m_s, m_f = D.masses(r, a, mask)
    assert m_s.tolist() == pytest.approx([2.5 / 4, 3 / 4])
    assert m_f.tolist() == pytest.approx([3 / 4, 0.0])
    tot = D.batch_totals(r, a)
    assert tot.m_s == pytest.approx((2.5 + 3) / 8) and tot.m_f == pytest.approx((4 + 6) / 8)
    assert tot.as_dict()["mass_ratio"] == pytest.approx(5.5 / 10)
    with pytest.raises(ValueError, match="num_groups, G"):
        D.masses(r, a[:, :3])


def test_constant_weights_give_p_times_w():
    """Spec: if A = w_S on S and -w_F on F, m_S = p w_S and m_F = (1 - p) w_F."""
    r = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]])
    a = torch.where(r > 0, 0.7, -0.2)
    m_s, m_f = D.masses(r, a)
    assert m_s.item() == pytest.approx(0.6 * 0.7) and m_f.item() == pytest.approx(0.4 * 0.2)


def test_sign_ratio_and_balance_edge_cases():
    assert D.sign_ratio(1.0, 0.0) == math.inf
    assert math.isnan(D.sign_ratio(0.0, 0.0))
    assert D.sign_ratio(1.0, 2.0) == 0.5
    assert D.sign_balance(1.0, 0.0) == 1.0 and D.sign_balance(0.0, 2.0) == -1.0
    assert math.isnan(D.sign_balance(0.0, 0.0))


def test_binomial_pmf_sums_to_one_and_is_exact_at_the_ends():
    w = D.binomial_pmf(16, PS)
    assert np.allclose(w.sum(axis=1), 1.0, atol=1e-12)
    assert w[0, 0] == 1.0 and w[-1, -1] == 1.0
    assert w[20, 8] == pytest.approx(math.comb(16, 8) * 0.5**16)


@pytest.mark.parametrize("g", [1, 4, 16, 64])
def test_reinforce_profile_is_exact(g):
    prof = D.profile("reinforce", g, PS)
    assert np.allclose(prof.m_s, PS, atol=1e-12) and np.allclose(prof.m_f, 0.0)
    assert prof.peak_p == 1.0
    assert np.all(np.isinf(prof.ratio[1:]))


@pytest.mark.parametrize("g", [2, 5, 16, 200])
def test_dr_grpo_rloo_asym_profiles_are_exact(g):
    pq = PS * (1 - PS)
    dr = D.profile("dr_grpo", g, PS)
    assert np.allclose(dr.m_s, pq * (g - 1) / g, atol=1e-12) and np.allclose(dr.m_f, dr.m_s, atol=1e-12)
    rloo = D.profile("rloo", g, PS)
    assert np.allclose(rloo.m_s, pq, atol=1e-12) and np.allclose(rloo.m_f, pq, atol=1e-12)
    for delta in (0.5, 2.0):
        asym = D.profile("asym_grpo", g, PS, delta=delta)
        assert np.allclose(asym.m_s, pq * (g - 1) / g, atol=1e-12)
        assert np.allclose(asym.m_f, asym.m_s / delta, atol=1e-12)
    assert dr.peak_p == 0.5


@pytest.mark.parametrize("alpha", [1.0, 2.0, 3.0])
def test_power_profile_exact_sum_and_large_g_limit(alpha):
    g = 16
    prof = D.profile("power", g, PS, alpha=alpha)
    exact = [sum(math.comb(g, c) * p**c * (1 - p) ** (g - c) * (c / g) * (1 - c / g) ** alpha for c in range(g + 1))
             for p in PS]
    assert np.allclose(prof.m_s, exact, atol=1e-12) and np.allclose(prof.m_f, prof.m_s, atol=1e-12)
    big = D.profile("power", 2000, np.linspace(0, 1, 1001), alpha=alpha)
    assert np.allclose(big.m_s, big.p * (1 - big.p) ** alpha, atol=2e-3)
    assert big.peak_p == pytest.approx(1 / (1 + alpha), abs=2e-3)


def test_grpo_profile_large_g_is_sqrt_pq():
    prof = D.profile("grpo", 2000, PS)
    assert np.allclose(prof.m_s, np.sqrt(PS * (1 - PS)), atol=1e-2)
    assert np.allclose(prof.m_s, prof.m_f, atol=1e-12)


def test_profiles_of_masked_and_gated_methods():
    psr = D.profile("psr", 8, PS)
    assert np.allclose(psr.m_s, PS) and np.allclose(psr.m_f, 0)
    nsr = D.profile("nsr", 8, PS)
    assert np.allclose(nsr.m_f, 1 - PS) and np.allclose(nsr.m_s, 0)
    w = D.profile("w_reinforce", 8, PS, lam=0.1)
    assert np.allclose(w.m_s, 0.1 * PS) and np.allclose(w.m_f, 1 - PS)
    dapo, grpo = D.profile("dapo", 8, PS), D.profile("grpo", 8, PS)
    assert np.allclose(dapo.m_s, grpo.m_s)  # dropped groups carried no grpo mass


def test_profile_matches_brute_force_expectation_for_every_method():
    g = 6
    for name in A.names():
        params = {"k": 2} if name in ("passk", "pkpo", "maxpo") else {}
        prof = D.profile(name, g, [0.3], **params)
        # Monte-Carlo-free check: enumerate all 2^G outcomes (permutation-invariance of the methods)
        adv = A.build(name, **params)
        outcomes = torch.tensor([[(b >> i) & 1 for i in range(g)] for b in range(2**g)], dtype=torch.float64)
        ctx = {"mean_logprob": torch.zeros_like(outcomes)} if name == "codapo" else {}
        m_s, m_f = D.masses(outcomes, adv(outcomes, **ctx), adv.mask(outcomes, **ctx))
        c = outcomes.sum(dim=1).numpy()
        prob = 0.3**c * 0.7 ** (g - c)
        assert prof.m_s[0] == pytest.approx(float(prob @ m_s.numpy()), abs=1e-12), name
        assert prof.m_f[0] == pytest.approx(float(prob @ m_f.numpy()), abs=1e-12), name


def test_profile_codapo_context_and_fade_states():
    base = D.profile("codapo", 8, PS)  # confidence 1 by default
    half = D.profile("codapo", 8, PS, context={"mean_logprob": math.log(0.5)})
    grpo = D.profile("grpo", 8, PS)
    assert np.all(half.m_s <= base.m_s + 1e-12) and np.all(base.m_s <= 1.1 * grpo.m_s + 1e-12)
    explore = D.profile("fade", 16, PS, fixed_alpha=3.0, fixed_delta=1.0)
    power3 = D.profile("power", 16, PS, alpha=3.0)
    assert np.allclose(explore.m_s, power3.m_s)
    exploit = D.profile("fade", 16, PS, fixed_alpha=1.0, fixed_delta=0.5)
    assert np.allclose(exploit.balance[1:-1], -1 / 3)


def test_profile_frame_and_errors():
    frame = D.profile("power", 8, PS, alpha=2).to_frame()
    assert list(frame.columns) == ["label", "method", "params", "group_size", "p", "m_s", "m_f", "total",
                                   "ratio", "balance", "peak_p", "peak_mass"]
    assert len(frame) == len(PS) and frame["params"].iloc[0] == "alpha=2"
    assert math.isnan(frame["balance"].iloc[0]) and math.isnan(frame["ratio"].iloc[-1])  # no mass at p=0, 1
    with pytest.raises(ValueError, match="solve rates"):
        D.profile("grpo", 8, [1.2])
    with pytest.raises(ValueError, match="group_size"):
        D.profile("grpo", 0, PS)
    with pytest.raises(ValueError, match="valid methods"):
        D.profile("nope", 8, PS)


def test_entropy_drift_and_covariance():
    a = torch.tensor([[1.0, -1.0, 0.5, -0.5]])
    lp = torch.tensor([[-1.0, -3.0, -2.0, -2.5]])
    cov = D.adv_logprob_covariance(a, lp)
    assert cov.item() == pytest.approx(np.cov(a.numpy().ravel(), lp.numpy().ravel(), ddof=0)[0, 1])
    assert D.entropy_drift(0.1, 0.05) == pytest.approx(-0.1 * 0.05)
    arr = D.entropy_drift(np.array([1.0, 2.0]), np.array([0.1, -0.2]))  # no (m_S - m_F) H term
    assert arr.tolist() == pytest.approx([-0.1, 0.4])
    masked = D.adv_logprob_covariance(a, lp, torch.tensor([[True, True, False, False]]))
    assert masked.item() == pytest.approx(np.cov([1.0, -1.0], [-1.0, -3.0], ddof=0)[0, 1])
