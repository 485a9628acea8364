"""fade_core.losses against brute-force per-token loops."""

from __future__ import annotations

import math

import pytest
import torch

from fade_core import losses


def _brute_token(lp: float, old: float, a: float, eps_low: float, eps_high: float, dual: float | None) -> float:
    ratio = math.exp(lp - old)
    clipped = min(max(ratio, 1 - eps_low), 1 + eps_high)
    value = max(-a * ratio, -a * clipped)
    if dual is not None and a < 0:
        value = min(value, -a * dual)
    return value


def _brute_kl(lp: float, ref: float, est: str) -> float:
    d = ref - lp
    return {"k1": -d, "k2": 0.5 * d * d, "k3": math.exp(d) - d - 1}[est]


def _brute_loss(lp, old, adv, mask, *, eps_low, eps_high, dual, agg, norm_len, ref=None, kl_coef=0.0, est="k3",
                ent=None, ent_coef=0.0):
    rows = []
    for i in range(len(lp)):
        row = []
        for t in range(len(lp[i])):
            if not mask[i][t]:
                continue
            v = _brute_token(lp[i][t], old[i][t], adv[i], eps_low, eps_high, dual)
            if kl_coef:
                v += kl_coef * _brute_kl(lp[i][t], ref[i][t], est)
            if ent_coef:
                v -= ent_coef * ent[i][t]
            row.append(v)
        rows.append(row)
    if agg == "token-mean":
        flat = [v for r in rows for v in r]
        return sum(flat) / len(flat)
    nonempty = [r for r in rows if r]
    if agg == "seq-mean-token-mean":
        return sum(sum(r) / len(r) for r in nonempty) / len(nonempty)
    return sum(sum(r) / norm_len for r in nonempty) / len(nonempty)


def _batch(seed: int, b: int = 6, t: int = 5):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3
    lp = old + torch.randn(b, t, generator=g, dtype=torch.float64) * 0.4  # ratios well outside the clip range too
    ref = old + torch.randn(b, t, generator=g, dtype=torch.float64) * 0.3
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    mask = torch.rand(b, t, generator=g) < 0.8
    mask[0] = False  # an empty row
    mask[1, 0] = True
    ent = torch.rand(b, t, generator=g, dtype=torch.float64)
    return lp, old, ref, adv, mask, ent


@pytest.mark.parametrize("agg", losses.AGG_MODES)
@pytest.mark.parametrize("dual", [None, 3.0])
@pytest.mark.parametrize("eps", [(0.2, 0.2), (0.2, 0.28), (0.1, 0.5)])
def test_policy_loss_matches_brute_force(agg, dual, eps):
    for seed in range(3):
        lp, old, ref, adv, mask, ent = _batch(seed)
        loss, _ = losses.policy_loss(lp, old, adv, mask, eps_low=eps[0], eps_high=eps[1], dual_clip=dual, agg=agg, norm_len=7)
        want = _brute_loss(lp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), eps_low=eps[0], eps_high=eps[1],
                           dual=dual, agg=agg, norm_len=7)
        assert float(loss) == pytest.approx(want, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("est", losses.KL_ESTIMATORS)
def test_kl_and_entropy_terms_match_brute_force(est):
    lp, old, ref, adv, mask, ent = _batch(11)
    loss, stats = losses.policy_loss(lp, old, adv, mask, ref_logprobs=ref, kl_coef=0.3, kl_estimator=est, entropy=ent,
                                     entropy_coef=0.05, agg="seq-mean-token-mean")
    want = _brute_loss(lp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), eps_low=0.2, eps_high=0.2, dual=None,
                       agg="seq-mean-token-mean", norm_len=None, ref=ref.tolist(), kl_coef=0.3, est=est,
                       ent=ent.tolist(), ent_coef=0.05)
    assert float(loss) == pytest.approx(want, rel=1e-10)
    kl_sum = sum(_brute_kl(a, b, est) for ra, rb, rm in zip(lp.tolist(), ref.tolist(), mask.tolist(), strict=True)
                 for a, b, m in zip(ra, rb, rm, strict=True) if m)
    assert stats.kl_ref == pytest.approx(kl_sum, rel=1e-10)


def test_k3_is_nonnegative_and_k1_k3_unbiased_in_expectation():
    # samples from pi: E_pi[k1] = E_pi[k3] = KL(pi || ref) exactly for a discrete distribution
    logits_pi, logits_ref = torch.randn(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    lp_pi, lp_ref = logits_pi.log_softmax(0), logits_ref.log_softmax(0)
    kl = float((lp_pi.exp() * (lp_pi - lp_ref)).sum())
    for est in ("k1", "k3"):
        vals = losses.kl_penalty(lp_pi, lp_ref, est)
        assert float((lp_pi.exp() * vals).sum()) == pytest.approx(kl, rel=1e-10)
    assert bool((losses.kl_penalty(lp_pi, lp_ref, "k3") >= 0).all())


def test_gradient_zero_on_clipped_tokens_and_on_policy_gradient_is_reinforce():
    lp = torch.tensor([[-1.0, -1.0, -1.0, -1.0]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[-1.5, -0.5, -1.0, -1.0]], dtype=torch.float64)  # ratios e^0.5 (high), e^-0.5 (low), 1, 1
    for a, clipped_col in ((1.0, 0), (-1.0, 1)):
        lp.grad = None
        loss, stats = losses.policy_loss(lp, old, torch.tensor([a], dtype=torch.float64), torch.ones(1, 4, dtype=torch.bool))
        loss.backward()
        assert lp.grad[0, clipped_col] == 0
        assert lp.grad[0, 2] == pytest.approx(-a / 4)  # on-policy token: d/dlp (-A ratio)/4 = -A/4
        assert (stats.clipped_high if a > 0 else stats.clipped_low) == 1


def test_global_denominators_make_pieces_add_up():
    lp, old, ref, adv, mask, ent = _batch(5, b=8)
    for agg in losses.AGG_MODES:
        whole, _ = losses.policy_loss(lp, old, adv, mask, agg=agg, norm_len=5)
        ntok, nseq = float(mask.sum()), float((mask.sum(1) > 0).sum())
        parts = sum(
            losses.policy_loss(lp[s], old[s], adv[s], mask[s], agg=agg, norm_len=5, num_tokens=ntok, num_seqs=nseq)[0]
            for s in (slice(0, 3), slice(3, 8))
        )
        assert float(parts) == pytest.approx(float(whole), rel=1e-12)


def test_bad_inputs_raise():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="same"):
        losses.policy_loss(x, torch.zeros(2, 4), torch.zeros(2), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="norm_len"):
        losses.aggregate(x, torch.ones(2, 3, dtype=torch.bool), "seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="unknown"):
        losses.aggregate(x, torch.ones(2, 3, dtype=torch.bool), "sum")
    with pytest.raises(ValueError, match="ref_logprobs"):
        losses.policy_loss(x, x, torch.zeros(2), torch.ones(2, 3, dtype=torch.bool), kl_coef=0.1)
    with pytest.raises(ValueError, match="dual_clip"):
        losses.policy_loss(x, x, torch.zeros(2), torch.ones(2, 3, dtype=torch.bool), dual_clip=0.5)
