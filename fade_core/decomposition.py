"""The FADE paper's decomposition of a policy-gradient step into positive and negative mass.

For one group of G rollouts with advantages A_i, the gradient estimate (1/G) sum_i A_i grad log pi(y_i)
splits into  m_S * gbar_S - m_F * gbar_F  with

    m_S =  (1/G) sum_{i in S} A_i      positive gradient mass (weight pushed onto successes)
    m_F = -(1/G) sum_{i in F} A_i      negative gradient mass (weight pushed off failures)

(S / F: successes / failures, ``r >= advantages.SUCCESS_THRESHOLD``). Every advantage method is then read
along three axes: **sign** (m_S vs m_F: success-biased steps collapse entropy, failure-biased steps
funnel the weight update toward rank 1), **difficulty** (at which solve rate p the total mass
m_S + m_F peaks) and **scale** (how large it is).

:func:`profile` gives a method's *expected* masses at solve rate p exactly: the number of successes
c ~ Binomial(G, p), and for each c = 0..G one group with c ones is evaluated, so
E[m] = sum_c C(G, c) p^c (1-p)^(G-c) m(c). Known large-G profiles: REINFORCE m_S = p, m_F = 0;
Dr.GRPO m_S = m_F = p(1-p) (exactly (G-1)/G p(1-p) at finite G); Power(alpha) ~ p(1-p)^alpha, peak at
1/(1+alpha); AsymGRPO(delta) m_F = m_S / delta.

:func:`entropy_drift` is the first-order change of the policy's entropy under a step: -eta Cov(log pi, A).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from fade_core import advantages as adv_lib

Tensor = torch.Tensor


# ------------------------------------------------------------------------------------------ masses
def masses(rewards: Tensor, advantages: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Per-group (m_S, m_F), each float64 [num_groups].

    rewards, advantages: [num_groups, G]; mask: bool [num_groups, G] (True = the rollout contributes;
    dropped rollouts add nothing). The 1/G normalisation uses the full group size G.
    """
    if rewards.shape != advantages.shape or rewards.ndim != 2:
        raise ValueError(
            f"rewards and advantages must both be [num_groups, G]; got {tuple(rewards.shape)} and "
            f"{tuple(advantages.shape)}"
        )
    a = advantages.to(torch.float64)
    if mask is not None:
        if mask.shape != rewards.shape:
            raise ValueError(f"mask must have shape {tuple(rewards.shape)}, got {tuple(mask.shape)}")
        a = torch.where(mask.to(torch.bool), a, torch.zeros_like(a))
    win = adv_lib.successes(rewards.to(torch.float64))
    g = rewards.shape[1]
    zero = torch.zeros_like(a)
    m_s = torch.where(win, a, zero).sum(dim=1) / g
    m_f = -torch.where(win, zero, a).sum(dim=1) / g
    return m_s, m_f


def sign_ratio(m_s: Any, m_f: Any) -> Any:
    """m_S / m_F elementwise (numpy): inf where m_F = 0 < m_S, nan where both are 0."""
    m_s = np.asarray(m_s, dtype=np.float64)
    m_f = np.asarray(m_f, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(m_f != 0, m_s / np.where(m_f != 0, m_f, 1.0), np.where(m_s > 0, np.inf, np.nan))
        out = np.where((m_f == 0) & (m_s < 0), -np.inf, out)
    return out if out.ndim else float(out)


def sign_balance(m_s: Any, m_f: Any, rel_tol: float = 0.0) -> Any:
    """(m_S - m_F) / (m_S + m_F) in [-1, 1] for non-negative masses: +1 all weight on successes,
    -1 all on failures, 0 balanced; nan where the total is 0 (or <= rel_tol x the largest total)."""
    m_s = np.asarray(m_s, dtype=np.float64)
    m_f = np.asarray(m_f, dtype=np.float64)
    total = m_s + m_f
    floor = rel_tol * float(np.max(np.abs(total))) if total.size else 0.0
    defined = np.abs(total) > floor
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(defined, (m_s - m_f) / np.where(defined, total, 1.0), np.nan)
    return out if out.ndim else float(out)


@dataclass(frozen=True)
class MassTotals:
    """A batch's masses, averaged over its groups (per-group scale, independent of batch size)."""

    m_s: float
    m_f: float

    @property
    def total(self) -> float:
        return self.m_s + self.m_f

    @property
    def ratio(self) -> float:
        return sign_ratio(self.m_s, self.m_f)

    def as_dict(self) -> dict[str, float]:
        return {"m_s": self.m_s, "m_f": self.m_f, "mass_total": self.total, "mass_ratio": self.ratio}


def batch_totals(rewards: Tensor, advantages: Tensor, mask: Tensor | None = None) -> MassTotals:
    """Mean over groups of (m_S, m_F) for a training batch (the step's logged mass totals)."""
    m_s, m_f = masses(rewards, advantages, mask)
    if m_s.numel() == 0:
        return MassTotals(math.nan, math.nan)
    return MassTotals(float(m_s.mean()), float(m_f.mean()))


# ------------------------------------------------------------------------------------------ profiles
def binomial_pmf(group_size: int, ps: Any) -> np.ndarray:
    """P(c successes) for c = 0..G at each p: float64 [len(ps), G+1] (exact at p = 0 and p = 1)."""
    p = np.asarray(ps, dtype=np.float64).reshape(-1)
    c = np.arange(group_size + 1)
    log_comb = np.array([math.lgamma(group_size + 1) - math.lgamma(k + 1) - math.lgamma(group_size - k + 1)
                         for k in c])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = np.where(c[None, :] > 0, c[None, :] * np.log(p[:, None]), 0.0)
        log_q = np.where(c[None, :] < group_size, (group_size - c[None, :]) * np.log1p(-p[:, None]), 0.0)
    return np.exp(log_comb[None, :] + log_p + log_q)


def ladder(group_size: int) -> Tensor:
    """The G+1 canonical groups: row c has c ones then G-c zeros, float64 [G+1, G]."""
    c = torch.arange(group_size + 1)[:, None]
    return (torch.arange(group_size)[None, :] < c).to(torch.float64)


NEGLIGIBLE = 1e-9
"""A profile's sign (ratio, balance) is reported as nan where its total mass is below this share of the
peak: there (p -> 0 or 1 for centred methods) both masses are rounding noise and the sign is undefined."""


@dataclass
class Profile:
    """A method's exact expected masses over a grid of solve rates p (group size G).

    ``m_s``, ``m_f``: float64 [len(p)]; ``m_s_c``, ``m_f_c``: the masses of a group with c = 0..G successes.
    """

    method: str
    params: dict[str, Any]
    group_size: int
    p: np.ndarray
    m_s: np.ndarray
    m_f: np.ndarray
    m_s_c: np.ndarray = field(repr=False)
    m_f_c: np.ndarray = field(repr=False)
    label: str = ""

    @property
    def total(self) -> np.ndarray:
        """m_S + m_F: the total gradient weight at p."""
        return self.m_s + self.m_f

    @property
    def ratio(self) -> np.ndarray:
        """m_S / m_F (inf: only positive mass; nan: no mass, i.e. total <= NEGLIGIBLE x the peak)."""
        out = sign_ratio(self.m_s, self.m_f)
        return np.where(self._negligible(), np.nan, out)

    @property
    def balance(self) -> np.ndarray:
        """(m_S - m_F) / (m_S + m_F) in [-1, 1]; nan where the total mass is negligible."""
        return sign_balance(self.m_s, self.m_f, rel_tol=NEGLIGIBLE)

    def _negligible(self) -> np.ndarray:
        total = np.abs(self.total)
        return total <= NEGLIGIBLE * (float(total.max()) if total.size else 0.0)

    @property
    def peak_p(self) -> float:
        """The grid p where the total mass is largest (first one on ties; nan for an all-zero profile)."""
        total = self.total
        if not np.any(np.abs(total) > 0):
            return math.nan
        return float(self.p[int(np.nanargmax(total))])

    @property
    def peak_mass(self) -> float:
        return float(np.nanmax(self.total)) if len(self.total) else math.nan

    def to_frame(self) -> pd.DataFrame:
        """One row per p: label, method, params (JSON-ish text), group_size, p, m_s, m_f, total,
        ratio, balance, peak_p, peak_mass."""
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return pd.DataFrame({
            "label": self.label or self.method,
            "method": self.method,
            "params": params,
            "group_size": self.group_size,
            "p": self.p,
            "m_s": self.m_s,
            "m_f": self.m_f,
            "total": self.total,
            "ratio": self.ratio,
            "balance": self.balance,
            "peak_p": self.peak_p,
            "peak_mass": self.peak_mass,
        })


def default_context(name: str, group_size: int) -> dict[str, Tensor]:
    """Context a profile needs: codapo gets mean_logprob = 0 (confidence 1) unless given."""
    if "mean_logprob" in adv_lib.method(name).needs:
        return {"mean_logprob": torch.zeros(group_size + 1, group_size, dtype=torch.float64)}
    return {}


def profile(name: str, group_size: int, ps: Any, *, context: dict[str, Any] | None = None,
            label: str = "", **params: Any) -> Profile:
    """Exact expected (m_S(p), m_F(p)) of method ``name`` at group size G, over solve rates ``ps``.

    Sums the masses of the G+1 canonical groups (c ones, c = 0..G) against Binomial(G, p). ``params``
    go to ``advantages.build``; ``context`` (e.g. ``mean_logprob``, a float or a [G+1, G] tensor) to
    the call, defaulting as in :func:`default_context`. FADE is profiled at its current alpha, delta
    (pass ``fixed_alpha`` / ``fixed_delta`` to pin a state).
    """
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
    p = np.asarray(ps, dtype=np.float64).reshape(-1)
    if p.size == 0 or np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError("ps must be a non-empty grid of solve rates in [0, 1]")
    adv = adv_lib.build(name, **params)
    groups = ladder(group_size)
    ctx = default_context(name, group_size)
    for key, value in (context or {}).items():
        ctx[key] = torch.as_tensor(value, dtype=torch.float64).expand_as(groups)
    a = adv(groups, **ctx)
    m_s_c, m_f_c = masses(groups, a, adv.mask(groups, **ctx))
    weights = binomial_pmf(group_size, p)
    return Profile(
        method=name,
        params=dict(params),
        group_size=group_size,
        p=p,
        m_s=weights @ m_s_c.numpy(),
        m_f=weights @ m_f_c.numpy(),
        m_s_c=m_s_c.numpy(),
        m_f_c=m_f_c.numpy(),
        label=label or adv.label,
    )


# ------------------------------------------------------------------------------------------ entropy
def adv_logprob_covariance(advantages: Tensor, logprobs: Tensor, mask: Tensor | None = None) -> Tensor:
    """Cov(A, log pi) over the contributing rollouts, float64 scalar tensor.

    advantages, logprobs: same shape (e.g. [num_groups, G] with sequence log-probs); mask optional.
    """
    a = advantages.to(torch.float64).reshape(-1)
    lp = logprobs.to(torch.float64).reshape(-1)
    if mask is not None:
        keep = mask.reshape(-1).to(torch.bool)
        a, lp = a[keep], lp[keep]
    if a.numel() == 0:
        return torch.tensor(math.nan, dtype=torch.float64)
    return ((a - a.mean()) * (lp - lp.mean())).mean()


def entropy_drift(lr: Any, cov_adv_logprob: Any) -> Any:
    """First-order entropy change of one step: dH ~ -lr * Cov_{y~pi}(log pi(y), A(y)) (Cui et al. 2025,
    softmax policy, natural policy gradient), elementwise on floats, numpy arrays or tensors; ``lr`` is the
    step size eta. There is no (m_S - m_F) H term: for a softmax a constant shift of A cancels in
    expectation, so the sign axis acts on the entropy only through the shared representation and sampling
    noise, which this first-order formula does not describe.
    """
    return -lr * cov_adv_logprob


def drift_pairs(run: pd.DataFrame, cols: dict[str, str | None]) -> pd.DataFrame:
    """Per step t of one run's training records with step t+1 logged: the measured H[t+1] - H[t] and the
    first-order prediction :func:`entropy_drift` of step t (NaN where the covariance is not logged).
    ``cols``: the record's column for "entropy", "lr" and "cov" (None: not logged)."""
    r = run.sort_values("step")
    num = {k: pd.to_numeric(r[c], errors="coerce").to_numpy(float) for k, c in cols.items() if c is not None}
    step = pd.to_numeric(r["step"], errors="coerce").to_numpy(float)
    if len(step) < 2:
        return pd.DataFrame(columns=["step", "measured", "predicted"])
    nxt = step[1:] == step[:-1] + 1
    h, lr = num["entropy"], num["lr"]
    cov = num.get("cov")
    predicted = entropy_drift(lr, cov)[:-1] if cov is not None else np.full(len(step) - 1, np.nan)
    df = pd.DataFrame({"step": step[:-1], "measured": h[1:] - h[:-1], "predicted": predicted})
    return df[nxt].reset_index(drop=True)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r of the finite pairs (NaN with fewer than 3 or without variation)."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])
