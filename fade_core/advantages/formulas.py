"""The advantage formulas: pure, vectorized functions ``rewards [num_groups, G] -> advantages [num_groups, G]``.

Each computes in the rewards' dtype (the registry passes float64), over every group at once, with no state;
the formulas are written out in docs/advantages.md (notation: c successes in a group of G, rbar = c / G).
:mod:`fade_core.advantages.methods` wraps them with validated parameters, masks and the training hooks.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

import torch

Tensor = torch.Tensor

SUCCESS_THRESHOLD = 0.5
"""A reward >= this counts as a success for the binary methods and the S/F decomposition."""


# ============================================================================ shared pure helpers
def successes(rewards: Tensor) -> Tensor:
    """bool [num_groups, G]: which rollouts count as successes (``r >= SUCCESS_THRESHOLD``)."""
    return rewards >= SUCCESS_THRESHOLD


def group_mean(rewards: Tensor) -> Tensor:
    """rbar [num_groups, 1]: each group's mean reward (its solve rate for binary rewards)."""
    return rewards.mean(dim=1, keepdim=True)


def group_std(rewards: Tensor, ddof: int = 1) -> Tensor:
    """[num_groups, 1]: the within-group standard deviation; 0 where G - ddof <= 0."""
    g = rewards.shape[1]
    if g - ddof <= 0:
        return torch.zeros_like(rewards[:, :1])
    centred = rewards - group_mean(rewards)
    return (centred.square().sum(dim=1, keepdim=True) / (g - ddof)).sqrt()


def _comb_ratio(a: int, b: int, c: int, d: int) -> float:
    """C(a, b) / C(c, d) as a correctly rounded float (exact integers; C(n, k) = 0 outside 0 <= k <= n)."""
    num = math.comb(a, b) if 0 <= b <= a else 0
    den = math.comb(c, d) if 0 <= d <= c else 0
    if den == 0:
        raise ZeroDivisionError(f"C({c}, {d}) = 0")
    return float(Fraction(num, den))


def _check_k(method: str, k: int, group_size: int, k_max: int) -> None:
    if k > k_max:
        raise ValueError(
            f"{method}: k={k} needs k <= {k_max} for group size G={group_size}; "
            f"lower k or sample more rollouts per prompt"
        )


# ============================================================================ the methods
def reinforce_advantage(rewards: Tensor) -> Tensor:
    """REINFORCE: A_i = r_i.  [num_groups, G] -> [num_groups, G]. Profile: m_S = p, m_F = 0."""
    return rewards.clone()


def grpo_advantage(rewards: Tensor, ddof: int = 1, eps: float = 1e-6) -> Tensor:
    """GRPO: A_i = (r_i - rbar) / (std + eps), std with ``ddof`` (1 = Bessel, as verl/TRL/OpenRLHF).

    [num_groups, G] -> [num_groups, G]. Groups with zero variance (all equal, or G = 1) get 0.
    Centred: sum_i A_i = 0.
    """
    scale = group_std(rewards, ddof) + eps
    centred = rewards - group_mean(rewards)
    return torch.where(scale > 0, centred / scale.clamp_min(torch.finfo(rewards.dtype).tiny), 0.0)


def dr_grpo_advantage(rewards: Tensor) -> Tensor:
    """Dr.GRPO: A_i = r_i - rbar (no std division).  Centred; profile m_S = m_F = p(1-p)(G-1)/G."""
    return rewards - group_mean(rewards)


def rloo_advantage(rewards: Tensor) -> Tensor:
    """RLOO: A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - rbar); 0 when G = 1.  Centred."""
    g = rewards.shape[1]
    if g == 1:
        return torch.zeros_like(rewards)
    return (rewards - group_mean(rewards)) * (g / (g - 1))


def power_asym_advantage(rewards: Tensor, alpha: float = 2.0, delta: float = 2.0) -> Tensor:
    """The focal-asymmetric family: A_i = (1 - rbar)^(alpha-1) * {r_i - rbar if r_i >= rbar, else (r_i - rbar)/delta}.

    [num_groups, G] -> [num_groups, G]. alpha >= 1 focuses weight on hard groups (mass peaks near
    p = 1/(1+alpha)); delta < 1 up-weights failures, delta > 1 down-weights them. alpha = delta = 1 is
    Dr.GRPO; delta = 1 is Power(alpha); alpha = 1 is AsymGRPO(delta); FADE schedules both.
    """
    rbar = group_mean(rewards)
    centred = rewards - rbar
    focus = (1.0 - rbar).clamp_min(0.0) ** (alpha - 1.0)
    return focus * torch.where(rewards >= rbar, centred, centred / delta)


def power_advantage(rewards: Tensor, alpha: float = 2.0) -> Tensor:
    """Power(alpha): A_i = (1 - rbar)^(alpha-1) (r_i - rbar).  Centred; m_S = m_F ~ p(1-p)^alpha."""
    return power_asym_advantage(rewards, alpha=alpha, delta=1.0)


def asym_grpo_advantage(rewards: Tensor, delta: float = 0.5) -> Tensor:
    """AsymGRPO(delta): A_i = r_i - rbar on r_i >= rbar, (r_i - rbar)/delta below.  m_F = m_S / delta."""
    return power_asym_advantage(rewards, alpha=1.0, delta=delta)


def w_reinforce_advantage(rewards: Tensor, lam: float = 0.1) -> Tensor:
    """W-REINFORCE: A_i = lam on successes, -1 on failures.  m_S = lam p, m_F = 1 - p."""
    return torch.where(successes(rewards), torch.full_like(rewards, lam), torch.full_like(rewards, -1.0))


def psr_advantage(rewards: Tensor) -> Tensor:
    """PSR (positive sample reinforcement): A_i = r_i on successes; failures dropped (A = 0, mask False)."""
    return torch.where(successes(rewards), rewards, torch.zeros_like(rewards))


def nsr_advantage(rewards: Tensor) -> Tensor:
    """NSR (negative sample reinforcement): A_i = -1 on failures; successes dropped (A = 0, mask False)."""
    return torch.where(successes(rewards), torch.zeros_like(rewards), torch.full_like(rewards, -1.0))


@lru_cache(maxsize=256)
def _passk_table(group_size: int, k: int, eps: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(A_pos[c], A_neg[c]) for c = 0..G successes of the Pass@k-Training advantage."""
    n = group_size
    a_pos, a_neg = [], []
    for c in range(n + 1):
        n_neg = n - c
        if c in (0, n):
            a_pos.append(0.0)
            a_neg.append(0.0)
            continue
        fail_all = _comb_ratio(n_neg, k, n, k)  # C(N_neg, k) / C(N, k)
        rho = 1.0 - fail_all
        sigma = math.sqrt(max(rho * (1.0 - rho), 0.0))
        fail_rest = _comb_ratio(n_neg - 1, k - 1, n - 1, k - 1)  # C(N_neg-1, k-1) / C(N-1, k-1)
        a_pos.append(fail_all / (sigma + eps))
        a_neg.append((fail_all - fail_rest) / (sigma + eps))
    return tuple(a_pos), tuple(a_neg)


def passk_advantage(rewards: Tensor, k: int = 4, eps: float = 1e-6) -> Tensor:
    """Pass@k Training (Chen et al. 2025), analytic form for binary rewards; needs 1 <= k <= G.

    With N = G, N_neg = G - c: rho = 1 - C(N_neg, k)/C(N, k), sigma = sqrt(rho (1 - rho)),
    A_pos = (1 - rho)/(sigma + eps), A_neg = (1 - rho - C(N_neg-1, k-1)/C(N-1, k-1))/(sigma + eps).
    All-correct and all-wrong groups get 0.  [num_groups, G] -> [num_groups, G].
    """
    g = rewards.shape[1]
    _check_k("passk", k, g, g)
    win = successes(rewards)
    c = win.sum(dim=1)
    a_pos, a_neg = _passk_table(g, k, eps)
    pos = torch.tensor(a_pos, dtype=rewards.dtype, device=rewards.device)[c]
    neg = torch.tensor(a_neg, dtype=rewards.dtype, device=rewards.device)[c]
    return torch.where(win, pos[:, None], neg[:, None])


@lru_cache(maxsize=256)
def _rank_weights(group_size: int, k: int, leave: int) -> tuple[Tensor, ...]:
    """Per-rank combinatorial weights (float64, [G]) for the sorted max-of-subset formulas.

    leave=1 (pkpo): a_t = C(t, k-1)/C(G, k), b_t = C(t, k-2)/C(G, k).
    leave=2 (maxpo): q-weights over C(G-1, k-1) and v-weights over C(G-1, k).
    Ranks t = 0..G-1 are 0-based positions in ascending order.
    """
    g = group_size
    t = range(g)

    def vec(xs: Any) -> Tensor:
        return torch.tensor(list(xs), dtype=torch.float64)

    if leave == 1:
        return (
            vec(_comb_ratio(i, k - 1, g, k) for i in t),
            vec(_comb_ratio(i, k - 2, g, k) for i in t),
        )
    return (
        vec(_comb_ratio(i, k - 1, g - 1, k - 1) for i in t),  # own rank, containing-i subsets
        vec(_comb_ratio(i - 1, k - 2, g - 1, k - 1) if i >= 1 else 0.0 for i in t),  # higher ranks s: C(s-1, k-2)
        vec(_comb_ratio(i, k - 1, g - 1, k) for i in t),  # lower ranks s, others only: C(s, k-1)
        vec(_comb_ratio(i - 1, k - 1, g - 1, k) if i >= 1 else 0.0 for i in t),  # higher ranks s: C(s-1, k-1)
    )


def _exclusive_cumsum(x: Tensor) -> Tensor:
    """sum_{s < t} x_s along dim 1."""
    return x.cumsum(dim=1) - x


def _exclusive_reverse_cumsum(x: Tensor) -> Tensor:
    """sum_{s > t} x_s along dim 1."""
    return x.flip(1).cumsum(dim=1).flip(1) - x


def _unsort(sorted_values: Tensor, order: Tensor) -> Tensor:
    out = torch.empty_like(sorted_values)
    return out.scatter_(1, order, sorted_values)


def pkpo_advantage(rewards: Tensor, k: int = 4) -> Tensor:
    """PKPO (Walder & Karkhanis 2025) with the leave-one-out baseline; any real rewards; 1 <= k <= G.

    Definition: A_i = (1/C(G,k)) sum_{k-subsets B containing i} [max_{j in B} r_j - max_{j in B \\ i} r_j]
    (max of the empty set = 0). Efficient form: sort ascending, x_0 <= ... <= x_{G-1}; for the rollout
    at rank t, A = [x_t C(t, k-1) - sum_{s<t} x_s C(s, k-2)] / C(G, k). O(G log G), tie-invariant.
    Binary closed form: successes get C(G-c, k-1)/C(G, k), failures 0.  [num_groups, G] -> same.
    """
    g = rewards.shape[1]
    _check_k("pkpo", k, g, g)
    a, b = (w.to(device=rewards.device, dtype=rewards.dtype) for w in _rank_weights(g, k, 1))
    x, order = rewards.sort(dim=1, stable=True)
    sorted_adv = x * a - _exclusive_cumsum(x * b)
    return _unsort(sorted_adv, order)


def maxpo_advantage(rewards: Tensor, k: int = 4) -> Tensor:
    """MaxPO with the leave-two-out baseline; any real rewards; needs 1 <= k <= G-1 (0 when G = 1).

    A_i = q_i - v_{-i}: q_i = mean over k-subsets containing i of max r, v_{-i} = mean over k-subsets of
    the other G-1 rollouts of max r. Unbiased and centred: sum_i A_i = 0 exactly. Sorted form (rank t):
    q = [x_t C(t,k-1) + sum_{s>t} x_s C(s-1,k-2)] / C(G-1,k-1),
    v = [sum_{s<t} x_s C(s,k-1) + sum_{s>t} x_s C(s-1,k-1)] / C(G-1,k).
    Binary closed form: X = C(G-c-1,k-1)/C(G-2,k-1), A_pos = (G-c)/(G-1) X, A_neg = -c/(G-1) X.
    """
    g = rewards.shape[1]
    if g == 1:
        return torch.zeros_like(rewards)
    _check_k("maxpo", k, g, g - 1)
    w_own, w_hi_q, w_lo_v, w_hi_v = (
        w.to(device=rewards.device, dtype=rewards.dtype) for w in _rank_weights(g, k, 2)
    )
    x, order = rewards.sort(dim=1, stable=True)
    q = x * w_own + _exclusive_reverse_cumsum(x * w_hi_q)
    v = _exclusive_cumsum(x * w_lo_v) + _exclusive_reverse_cumsum(x * w_hi_v)
    return _unsort(q - v, order)


def codapo_weight(rewards: Tensor, mean_logprob: Tensor) -> Tensor:
    """CoDaPO's per-question weight w_q [num_groups] = conf_q * 4 acc (1 - acc) + 0.1.

    acc = rbar; conf_q = exp(mean over the group's rollouts of each rollout's mean token log-prob under
    the sampling policy), ``mean_logprob`` [num_groups, G].
    """
    acc = rewards.mean(dim=1)
    conf = mean_logprob.mean(dim=1).exp()
    return conf * 4.0 * acc * (1.0 - acc) + 0.1


def codapo_advantage(rewards: Tensor, mean_logprob: Tensor, ddof: int = 1, eps: float = 1e-6) -> Tensor:
    """CoDaPO: A_i = w_q * grpo_i (see :func:`codapo_weight`).  [num_groups, G] -> same.  Centred."""
    return codapo_weight(rewards, mean_logprob)[:, None] * grpo_advantage(rewards, ddof=ddof, eps=eps)


def bbg_utility(m: Tensor, n: int, k: int) -> Tensor:
    """Boundary utility u(m; n, k) = E_{p ~ Beta(m+1, n-m+1)}[k (1-p)^(k-1)] = k prod_{j=1}^{k-1} (n-m+j)/(n+1+j).

    ``m`` successes out of ``n`` rollouts (any shape); the posterior-expected marginal pass@k gain.
    """
    m = m.to(torch.float64)
    u = torch.full_like(m, float(k))
    for j in range(1, k):
        u = u * (n - m + j) / (n + 1 + j)
    return u


def bbg_keep_groups(rewards: Tensor, k: int = 16, tau: float = 0.01) -> Tensor:
    """bool [num_groups]: groups that pass BBG's gate u(m) >= tau."""
    m = successes(rewards).sum(dim=1)
    return bbg_utility(m, rewards.shape[1], k) >= tau


def bbg_advantage(rewards: Tensor, k: int = 16, tau: float = 0.01, ddof: int = 1, eps: float = 1e-6) -> Tensor:
    """Bayesian Boundary Gating (PROVISIONAL: the method's text was not available; this follows the spec).

    A = (u(m)/u(1)) * grpo for a group with m successes; groups with u(m) < tau get 0 (and are masked out,
    :func:`bbg_keep_groups`). A group with m = 0 has no grpo signal and gets no update (A = 0): the BBG
    abstract has no rule for it, and the signed REINFORCE term an earlier spec gave such groups dominated
    the method's gradient mass and collapsed training. k is the pass@k horizon of the utility (any k >= 1,
    independent of G).  [num_groups, G] -> [num_groups, G].
    """
    g = rewards.shape[1]
    m = successes(rewards).sum(dim=1)
    u = bbg_utility(m, g, k).to(rewards.dtype)
    u1 = bbg_utility(torch.ones(()), g, k).to(rewards.dtype)
    adv = (u / u1)[:, None] * grpo_advantage(rewards, ddof, eps)
    adv = torch.where((m == 0)[:, None], torch.zeros_like(adv), adv)
    return torch.where((u >= tau)[:, None], adv, torch.zeros_like(adv))


def zero_variance_groups(rewards: Tensor) -> Tensor:
    """bool [num_groups]: groups whose rewards are all equal (rbar in {0, 1} for binary rewards)."""
    return (rewards == rewards[:, :1]).all(dim=1)


def dapo_overlong_penalty(lengths: Tensor, max_length: int, buffer: int, penalty: float = 1.0) -> Tensor:
    """DAPO's soft overlong punishment, added to the reward (any shape of response lengths in tokens).

    0 if L <= max_length - buffer; -penalty * (L - (max_length - buffer)) / buffer inside the buffer;
    -penalty beyond max_length.
    """
    if buffer <= 0 or buffer > max_length:
        raise ValueError(f"dapo overlong buffer must be in 1..max_length={max_length}, got {buffer}")
    over = (lengths.to(torch.float64) - (max_length - buffer)).clamp(min=0.0, max=float(buffer))
    return -penalty * over / buffer


# ---- FADE's schedule (pure) --------------------------------------------------------------------
def fade_alpha(p_hat: float, alpha_max: float = 3.0) -> float:
    """alpha = clip(3 (1 - p_hat) / (2 p_hat), 1, alpha_max); alpha_max when p_hat <= 0."""
    if p_hat <= 0.0:
        return float(alpha_max)
    return float(min(max(3.0 * (1.0 - p_hat) / (2.0 * p_hat), 1.0), alpha_max))


def fade_delta(h_hat: float | None, h_target: float | None, delta_min: float = 0.3) -> float:
    """delta = clip(1 + H_hat - H_target, delta_min, 1); 1 (balanced) before any entropy is observed."""
    if h_hat is None or h_target is None:
        return 1.0
    return float(min(max(1.0 + h_hat - h_target, delta_min), 1.0))


