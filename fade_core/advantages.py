"""The policy weights (advantages) fade compares, as one registry.

A policy-gradient step for one prompt samples a *group* of G rollouts, scores each with a reward r_i
(binary in the paper: 1 = verified correct), and weights each rollout's score-function gradient by an
advantage A_i. Methods differ only in how they map the group's rewards to advantages; the FADE paper
reads every such map along three axes (see ``fade_core.decomposition``): sign (how much weight goes
to successes vs failures), difficulty (at which solve rate p the weight peaks) and scale.

Every method here is a small pure function ``rewards [num_groups, G] -> advantages [num_groups, G]``
(float64 inside, vectorized over groups) plus a thin :class:`Advantage` object that holds validated
parameters and, for FADE, state::

    adv = build("power", alpha=2)
    A = adv(rewards)                      # [num_groups, G], rewards' float dtype (float32 for ints)
    keep = adv.mask(rewards)              # bool [num_groups, G]
    adv.observe(solve_rate=0.3, entropy=1.2)   # once per step; a no-op except for FADE
    state = adv.state_dict(); adv.load_state_dict(state)

Formulas: ``/work/shared/spec/advantages.md`` (notation: c successes in a group, rbar = c / G).

Conventions (one place for all methods)
---------------------------------------
* **Successes.** Methods defined on binary rewards (w_reinforce, psr, nsr, passk, bbg, and the S/F
  split of the decomposition) count a rollout as a success when ``r >= SUCCESS_THRESHOLD`` (0.5).
  With {0, 1} rewards this is exact; real-valued rewards are thresholded.
* **The mask.** ``adv.mask(rewards, **context)`` returns a bool tensor [num_groups, G]:
  **True = the rollout contributes to the loss**, False = it is dropped (it must not count in the
  loss's token or sequence denominators either). Dropped rollouts also get advantage 0, so a trainer
  that forgets the mask gets the right gradient direction but a diluted scale. Who drops what:

  - ``psr``: failures are dropped (only successes are reinforced).
  - ``nsr``: successes are dropped (only failures are pushed down).
  - ``dapo``: dynamic sampling drops whole groups with zero reward variance (rbar in {0, 1} for binary
    rewards). The trainer refills the batch by sampling more prompts, up to ``adv.max_gen_batches``
    sampling rounds per step, keeping groups where ``adv.keep_groups(rewards)`` is True.
  - ``bbg``: whole groups whose boundary utility u(m) < tau are dropped (gated).
  - every other method: all True.
* **Single-rollout groups (G = 1).** Methods with a within-group baseline (grpo, dr_grpo, rloo, dapo,
  power, asym_grpo, power_asym, maxpo, codapo, fade) return 0: one rollout has no baseline.
* **Context.** Extra inputs come by keyword: ``mean_logprob`` [num_groups, G] (each rollout's mean
  token log-prob under the sampling policy) is required by ``codapo`` and ignored by the others, so
  a trainer may pass the same context to every method; an unknown context key is an error.
* **Trainer hints.** Every Advantage has ``loss_agg`` (recommended loss aggregation or None = use the
  configured one), ``eps_low`` / ``eps_high`` (recommended PPO clip range or None) and
  ``dynamic_sampling``; ``recommended()`` returns them as a dict keyed like ``train`` config fields.
  DAPO recommends token-mean and clip-higher (0.2, 0.28); Dr.GRPO recommends seq-mean-token-sum-norm.

Adding a method: write the pure function, then one ``_register(Method(...))`` line below.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import torch

Tensor = torch.Tensor

SUCCESS_THRESHOLD = 0.5
"""A reward >= this counts as a success for the binary methods and the S/F decomposition."""

CONTEXT_KEYS = ("mean_logprob",)
"""Keyword context an Advantage accepts (each [num_groups, G])."""


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

    Groups with m >= 1 successes: A = (u(m)/u(1)) * grpo. Groups with m = 0 (no grpo signal): a signed
    REINFORCE term, A = -u(0)/u(1) on every (failed) rollout. Groups with u(m) < tau: 0 and masked out.
    k is the pass@k horizon of the utility (any k >= 1, independent of G).  [num_groups, G] -> same.
    """
    g = rewards.shape[1]
    m = successes(rewards).sum(dim=1)
    u = bbg_utility(m, g, k).to(rewards.dtype)
    u1 = bbg_utility(torch.ones(()), g, k).to(rewards.dtype)
    scale = (u / u1)[:, None]
    adv = torch.where((m == 0)[:, None], -scale.expand_as(rewards), scale * grpo_advantage(rewards, ddof, eps))
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


# ============================================================================ parameters
@dataclass(frozen=True)
class Param:
    """One method parameter: default, a validity rule (``check`` returns the cleaned value or raises)."""

    name: str
    default: Any
    rule: str
    help: str
    check: Callable[[Any], Any]


def _number(name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Callable:
    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, got {v!r}")
        if hi is not None and v > hi:
            raise ValueError(f"{name} must be <= {hi}, got {v!r}")
        return float(v)

    return check


def _integer(name: str, lo: int, hi: int | None = None) -> Callable:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
            raise ValueError(f"{name} must be an integer, got {v!r}")
        if v < lo or (hi is not None and v > hi):
            raise ValueError(f"{name} must be in {lo}..{hi if hi is not None else 'inf'}, got {v!r}")
        return int(v)

    return check


def _optional(check: Callable) -> Callable:
    return lambda v: None if v is None else check(v)


def _target_entropy(v: Any) -> str | float:
    if v == "auto":
        return "auto"
    return _number("target_entropy", 0.0)(v)


P_DDOF = Param("ddof", 1, "0 or 1", "Std degrees-of-freedom correction (1 = Bessel).", _integer("ddof", 0, 1))
P_EPS = Param("eps", 1e-6, "a number >= 0", "Added to the std before dividing.", _number("eps", 0.0))
P_K = Param("k", 4, "an integer >= 1 (and <= G, checked per call)", "The k of pass@k.", _integer("k", 1))


def _alpha(default: float) -> Param:
    return Param("alpha", default, "a number >= 1", "Difficulty focus: weight (1 - rbar)^(alpha-1).",
                 _number("alpha", 1.0))


def _delta(default: float) -> Param:
    return Param("delta", default, "a number > 0", "Failures weighted 1/delta (delta < 1: failure-biased).",
                 _number("delta", 0.0, lo_open=True))


# ============================================================================ the Advantage object
@dataclass
class Method:
    """A registry entry: the pure function, its parameters and the class that wraps it."""

    name: str
    summary: str
    fn: Callable[..., Tensor]
    params: tuple[Param, ...] = ()
    needs: tuple[str, ...] = ()
    keep: Callable[..., Tensor] | None = None  # rollout-level keep mask [num_groups, G]
    cls: type[Advantage] | None = None
    fn_params: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        sig = inspect.signature(self.fn).parameters
        self.fn_params = tuple(p.name for p in self.params if p.name in sig)


class Advantage:
    """A configured advantage method: ``adv(rewards, **context) -> advantages``.

    rewards: float tensor [num_groups, G]; result: same shape, rewards' floating dtype (float32 for
    integer/bool rewards), computed in float64. See the module docstring for the mask convention.
    """

    loss_agg: str | None = None
    eps_low: float | None = None
    eps_high: float | None = None
    dynamic_sampling: bool = False

    def __init__(self, method: Method, params: dict[str, Any]):
        self.method = method
        self.name = method.name
        self.params = params

    # -- computing
    def __call__(self, rewards: Tensor, **context: Tensor) -> Tensor:
        r, ctx = self._prepare(rewards, context)
        adv = self._advantages(r, ctx)
        keep = self._keep(r, ctx)
        if keep is not None:
            adv = torch.where(keep, adv, torch.zeros_like(adv))
        return adv.to(_out_dtype(rewards))

    def mask(self, rewards: Tensor, **context: Tensor) -> Tensor:
        """bool [num_groups, G]: True = the rollout contributes to the loss (module docstring)."""
        r, ctx = self._prepare(rewards, context)
        keep = self._keep(r, ctx)
        return torch.ones_like(r, dtype=torch.bool) if keep is None else keep

    def _advantages(self, r: Tensor, ctx: dict[str, Tensor]) -> Tensor:
        kwargs = {p: self.params[p] for p in self.method.fn_params}
        return self.method.fn(r, **{n: ctx[n] for n in self.method.needs}, **kwargs)

    def _keep(self, r: Tensor, ctx: dict[str, Tensor]) -> Tensor | None:
        if self.method.keep is None:
            return None
        sig = inspect.signature(self.method.keep).parameters
        return self.method.keep(r, **{p: v for p, v in self.params.items() if p in sig})

    def _prepare(self, rewards: Tensor, context: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        if not isinstance(rewards, Tensor):
            raise ValueError(f"{self.name}: rewards must be a torch tensor [num_groups, G], got {type(rewards).__name__}")
        if rewards.ndim != 2 or rewards.shape[1] < 1:
            raise ValueError(f"{self.name}: rewards must have shape [num_groups, G], got {tuple(rewards.shape)}")
        unknown = sorted(set(context) - set(CONTEXT_KEYS))
        if unknown:
            raise ValueError(f"{self.name}: unknown context {unknown}; valid context keys: {list(CONTEXT_KEYS)}")
        r = rewards.to(torch.float64)
        if not torch.isfinite(r).all():
            raise ValueError(f"{self.name}: rewards contain NaN or inf")
        ctx: dict[str, Tensor] = {}
        for need in self.method.needs:
            if context.get(need) is None:
                raise ValueError(f"{self.name} needs context {need}=<tensor {list(rewards.shape)}> (by keyword)")
            value = torch.as_tensor(context[need], device=rewards.device).to(torch.float64)
            if value.shape != rewards.shape:
                raise ValueError(
                    f"{self.name}: {need} must have the rewards' shape {tuple(rewards.shape)}, got {tuple(value.shape)}"
                )
            ctx[need] = value
        return r, ctx

    # -- training dynamics and checkpoints
    def observe(self, **batch_stats: Any) -> None:
        """Update from one step's batch statistics; static methods ignore them."""

    def state_dict(self) -> dict[str, Any]:
        return {"method": self.name}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("method") != self.name:
            raise ValueError(f"state of method {state.get('method')!r} cannot be loaded into {self.name!r}")
        extra = sorted(set(state) - {"method"})
        if extra:
            raise ValueError(f"{self.name}: unexpected state keys {extra}")

    # -- description
    def recommended(self) -> dict[str, Any]:
        """Trainer hints keyed like ``train`` config fields (None entries omitted)."""
        hints = {"loss_agg": self.loss_agg, "eps_low": self.eps_low, "eps_high": self.eps_high}
        return {k: v for k, v in hints.items() if v is not None}

    @property
    def label(self) -> str:
        """Display name, e.g. ``power(alpha=2)`` (defaults omitted)."""
        shown = {p.name: self.params[p.name] for p in self.method.params if self.params[p.name] != p.default}
        if not shown:
            return self.name
        return self.name + "(" + ",".join(f"{k}={_fmt(v)}" for k, v in shown.items()) + ")"

    def __repr__(self) -> str:
        return f"<Advantage {self.name} {self.params}>"


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _out_dtype(rewards: Tensor) -> torch.dtype:
    return rewards.dtype if rewards.dtype.is_floating_point else torch.float32


class DrGrpoAdvantage(Advantage):
    loss_agg = "seq-mean-token-sum-norm"


class DapoAdvantage(Advantage):
    """DAPO: the grpo advantage + clip-higher, token-mean aggregation and dynamic sampling.

    The trainer reads ``eps_low`` / ``eps_high`` / ``loss_agg``, keeps only groups where
    ``keep_groups(rewards)`` is True and refills the batch with fresh prompts, for at most
    ``max_gen_batches`` sampling rounds per step. ``overlong_penalty(lengths, max_length)`` gives the
    optional soft overlong reward shaping (0 when ``overlong_buffer`` is None).
    """

    loss_agg = "token-mean"
    dynamic_sampling = True

    def __init__(self, method: Method, params: dict[str, Any]):
        super().__init__(method, params)
        self.eps_low = params["eps_low"]
        self.eps_high = params["eps_high"]
        self.max_gen_batches = params["max_gen_batches"]

    def keep_groups(self, rewards: Tensor) -> Tensor:
        """bool [num_groups]: False for zero-variance groups (rbar in {0, 1}), which dynamic sampling drops."""
        return ~zero_variance_groups(rewards.to(torch.float64))

    def overlong_penalty(self, lengths: Tensor, max_length: int) -> Tensor:
        buffer = self.params["overlong_buffer"]
        if buffer is None:
            return torch.zeros_like(lengths, dtype=torch.float64)
        return dapo_overlong_penalty(lengths, max_length, buffer, self.params["overlong_penalty"])


def _dapo_keep(rewards: Tensor) -> Tensor:
    return (~zero_variance_groups(rewards))[:, None].expand_as(rewards)


class CodapoAdvantage(Advantage):
    """CoDaPO. After the normal update, the trainer takes ``resample_indices(rewards, mean_logprob=...)``
    (the top ``resample_fraction`` = 25% of questions by w_q, at least one), repeats each question
    ``resample_repeats`` = 4 times with fresh rollouts, and runs a second update on them.
    """

    def weights(self, rewards: Tensor, mean_logprob: Tensor) -> Tensor:
        """w_q [num_groups] (float64)."""
        r, ctx = self._prepare(rewards, {"mean_logprob": mean_logprob})
        return codapo_weight(r, ctx["mean_logprob"])

    def resample_indices(self, rewards: Tensor, mean_logprob: Tensor) -> Tensor:
        """long [ceil(fraction * num_groups)]: group indices by descending w_q (ties: lower index first)."""
        w = self.weights(rewards, mean_logprob)
        n = max(1, math.ceil(self.params["resample_fraction"] * w.shape[0]))
        order = torch.sort(-w, stable=True).indices
        return order[:n]

    @property
    def resample_repeats(self) -> int:
        return self.params["resample_repeats"]


class FadeAdvantage(Advantage):
    """FADE: the focal-asymmetric advantage with alpha, delta read from training dynamics.

    Call ``observe(solve_rate=<batch mean reward>, entropy=<batch mean token entropy>)`` once per step
    (other keys are ignored so a trainer can pass one stats dict to every method); the advantage uses
    the ``alpha`` / ``delta`` current at call time. EMAs (beta = 0.02): p_hat starts at ``p_init`` = 0.5;
    H_hat starts at the first observed entropy, which also resolves ``target_entropy="auto"`` to
    ``target_fraction`` (0.5) x that entropy. Before any entropy is seen delta = 1.
    Ablations: ``fixed_alpha`` (no difficulty schedule), ``fixed_delta`` (no entropy schedule).
    """

    def __init__(self, method: Method, params: dict[str, Any]):
        super().__init__(method, params)
        self.p_hat: float = params["p_init"]
        self.h_hat: float | None = None
        target = params["target_entropy"]
        self.h_target: float | None = None if target == "auto" else float(target)
        self.steps = 0

    @property
    def alpha(self) -> float:
        if self.params["fixed_alpha"] is not None:
            return self.params["fixed_alpha"]
        return fade_alpha(self.p_hat, self.params["alpha_max"])

    @property
    def delta(self) -> float:
        if self.params["fixed_delta"] is not None:
            return self.params["fixed_delta"]
        return fade_delta(self.h_hat, self.h_target, self.params["delta_min"])

    def _advantages(self, r: Tensor, ctx: dict[str, Tensor]) -> Tensor:
        return power_asym_advantage(r, alpha=self.alpha, delta=self.delta)

    def observe(self, solve_rate: float | Tensor | None = None, entropy: float | Tensor | None = None,
                **_other: Any) -> None:
        beta = self.params["beta"]
        if solve_rate is not None:
            p = _scalar("solve_rate", solve_rate)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"fade.observe: solve_rate must be in [0, 1], got {p}")
            self.p_hat = (1.0 - beta) * self.p_hat + beta * p
        if entropy is not None:
            h = _scalar("entropy", entropy)
            if h < 0:
                raise ValueError(f"fade.observe: entropy must be >= 0, got {h}")
            if self.h_hat is None:
                self.h_hat = h
                if self.h_target is None:
                    self.h_target = self.params["target_fraction"] * h
            else:
                self.h_hat = (1.0 - beta) * self.h_hat + beta * h
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {"method": self.name, "p_hat": self.p_hat, "h_hat": self.h_hat, "h_target": self.h_target,
                "steps": self.steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        expected = {"method", "p_hat", "h_hat", "h_target", "steps"}
        if state.get("method") != self.name or set(state) != expected:
            raise ValueError(f"fade: state must have keys {sorted(expected)} with method='fade', got {dict(state)}")
        self.p_hat = float(state["p_hat"])
        self.h_hat = None if state["h_hat"] is None else float(state["h_hat"])
        self.h_target = None if state["h_target"] is None else float(state["h_target"])
        self.steps = int(state["steps"])


def _scalar(name: str, v: float | Tensor) -> float:
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError(f"fade.observe: {name} must be a scalar (the batch mean), got shape {tuple(v.shape)}")
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"fade.observe: {name} must be a finite number, got {v!r}")
    return float(v)


# ============================================================================ the registry
_REGISTRY: dict[str, Method] = {}


def _register(method: Method) -> None:
    _REGISTRY[method.name] = method


_register(Method("reinforce", "A = r", reinforce_advantage))
_register(Method("grpo", "A = (r - rbar)/(std + eps)", grpo_advantage, (P_DDOF, P_EPS)))
_register(Method("dr_grpo", "A = r - rbar", dr_grpo_advantage, cls=DrGrpoAdvantage))
_register(Method("rloo", "A = r - mean of the others", rloo_advantage))
_register(Method(
    "dapo", "grpo + clip-higher, token-mean, dynamic sampling", grpo_advantage,
    (P_DDOF, P_EPS,
     Param("eps_low", 0.2, "a number >= 0", "PPO clip below.", _number("eps_low", 0.0)),
     Param("eps_high", 0.28, "a number >= 0", "PPO clip above (clip-higher).", _number("eps_high", 0.0)),
     Param("max_gen_batches", 10, "an integer >= 1", "Sampling rounds per step to refill dropped groups.",
           _integer("max_gen_batches", 1)),
     Param("overlong_buffer", None, "null or an integer >= 1", "Soft overlong punishment buffer (tokens).",
           _optional(_integer("overlong_buffer", 1))),
     Param("overlong_penalty", 1.0, "a number >= 0", "Overlong punishment factor.", _number("overlong_penalty", 0.0))),
    keep=_dapo_keep, cls=DapoAdvantage,
))
_register(Method("power", "A = (1-rbar)^(alpha-1) (r - rbar)", power_advantage, (_alpha(2.0),)))
_register(Method("asym_grpo", "A = r - rbar, failures / delta", asym_grpo_advantage, (_delta(0.5),)))
_register(Method("power_asym", "power and asym combined", power_asym_advantage, (_alpha(2.0), _delta(2.0))))
_register(Method(
    "w_reinforce", "A = lam on successes, -1 on failures", w_reinforce_advantage,
    (Param("lam", 0.1, "a number >= 0", "Weight of successes.", _number("lam", 0.0)),),
))
_register(Method("psr", "A = r on successes, failures dropped", psr_advantage,
                 keep=lambda r: successes(r)))
_register(Method("nsr", "A = -1 on failures, successes dropped", nsr_advantage,
                 keep=lambda r: ~successes(r)))
_register(Method("passk", "Pass@k Training analytic advantage", passk_advantage, (P_K, P_EPS)))
_register(Method("pkpo", "PKPO, leave-one-out baseline", pkpo_advantage, (P_K,)))
_register(Method("maxpo", "MaxPO, leave-two-out baseline", maxpo_advantage, (P_K,)))
_register(Method(
    "codapo", "w_q x grpo, w_q = conf 4 acc(1-acc) + 0.1", codapo_advantage,
    (P_DDOF, P_EPS,
     Param("resample_fraction", 0.25, "a number in (0, 1]", "Share of questions resampled for the second update.",
           _number("resample_fraction", 0.0, 1.0, lo_open=True)),
     Param("resample_repeats", 4, "an integer >= 1", "Times each resampled question is repeated.",
           _integer("resample_repeats", 1))),
    needs=("mean_logprob",), cls=CodapoAdvantage,
))
_register(Method(
    "bbg", "Bayesian Boundary Gating (provisional)", bbg_advantage,
    (Param("k", 16, "an integer >= 1", "pass@k horizon of the utility.", _integer("k", 1)),
     Param("tau", 0.01, "a number >= 0", "Skip groups with utility u(m) < tau.", _number("tau", 0.0)),
     P_DDOF, P_EPS),
    keep=lambda r, k, tau: bbg_keep_groups(r, k, tau)[:, None].expand_as(r),
))
_register(Method(
    "fade", "focal-asymmetric with alpha, delta from training dynamics", power_asym_advantage,
    (Param("alpha_max", 3.0, "a number >= 1", "Upper clip of alpha.", _number("alpha_max", 1.0)),
     Param("delta_min", 0.3, "a number in (0, 1]", "Lower clip of delta.", _number("delta_min", 0.0, 1.0, lo_open=True)),
     Param("beta", 0.02, "a number in (0, 1]", "EMA rate of p_hat and H_hat.", _number("beta", 0.0, 1.0, lo_open=True)),
     Param("p_init", 0.5, "a number in [0, 1]", "Initial p_hat.", _number("p_init", 0.0, 1.0)),
     Param("target_entropy", "auto", "'auto' or a number >= 0", "H_target in nats; auto = target_fraction x H_0.",
           _target_entropy),
     Param("target_fraction", 0.5, "a number > 0", "auto target as a share of the first entropy.",
           _number("target_fraction", 0.0, lo_open=True)),
     Param("fixed_alpha", None, "null or a number >= 1", "Ablation: hold alpha fixed.", _optional(_number("fixed_alpha", 1.0))),
     Param("fixed_delta", None, "null or a number > 0", "Ablation: hold delta fixed.",
           _optional(_number("fixed_delta", 0.0, lo_open=True)))),
    cls=FadeAdvantage,
))


def names() -> list[str]:
    """Every registered method name, in registration order."""
    return list(_REGISTRY)


def method(name: str) -> Method:
    """The registry entry of ``name`` (ValueError listing valid names)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown advantage method {name!r}; valid methods: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def describe(name: str) -> str:
    """One line per parameter: name, default, rule, help."""
    m = method(name)
    lines = [f"{m.name}: {m.summary}"]
    lines += [f"  {p.name} = {p.default!r}  ({p.rule}) {p.help}" for p in m.params]
    return "\n".join(lines)


def build(name: str, **params: Any) -> Advantage:
    """Validate ``params`` against the method's parameters and return its Advantage (cheap).

    Unknown names, unknown parameters and out-of-range values raise ValueError naming what is valid.
    """
    m = method(name)
    valid = {p.name: p for p in m.params}
    unknown = sorted(set(params) - set(valid))
    if unknown:
        rules = ", ".join(f"{p.name} ({p.rule}, default {p.default!r})" for p in m.params) or "none"
        raise ValueError(f"{name}: unknown parameter(s) {unknown}; valid parameters: {rules}")
    resolved: dict[str, Any] = {}
    for p in m.params:
        value = params.get(p.name, p.default)
        try:
            resolved[p.name] = p.check(value)
        except ValueError as e:
            raise ValueError(f"{name}: {e} (valid: {p.rule})") from None
    cls = m.cls or Advantage
    return cls(m, resolved)
