"""The policy loss: PPO's clipped surrogate on token log-ratios, KL to a reference, entropy bonus.

For a sampled completion y with tokens y_t, advantage A (one number per rollout, broadcast over its
tokens) and the sampling policy's log-probs ``old`` (from the rollout engine), the per-token loss is

    ratio_t = exp(logp_t - old_t)
    pg_t    = max( -A * ratio_t,  -A * clip(ratio_t, 1 - eps_low, 1 + eps_high) )     (PPO)
    pg_t    = min( pg_t, -A * c )        when A < 0 and dual clip c > 1 is on       (dual clip)

The max picks the pessimistic term, so a token whose ratio already moved past the clip range in the
direction the advantage pushes gets no gradient: ratio > 1 + eps_high with A > 0 ("clipped high") or
ratio < 1 - eps_low with A < 0 ("clipped low"). DAPO's clip-higher is eps_high > eps_low. Dual clip
bounds the loss of a negative-advantage token whose ratio exploded (Ye et al. 2020).

KL to a reference policy, per token, with d_t = ref_t - logp_t (samples drawn from the policy):

    k1 = -d_t                   (unbiased, high variance, can be negative)
    k2 = d_t^2 / 2              (biased, low variance; its gradient is that of the reverse KL)
    k3 = exp(d_t) - d_t - 1     (unbiased, non-negative; Schulman's estimator, the GRPO default)

As *loss terms* (differentiated through log pi on samples of pi) they are not interchangeable: k2's
expected gradient, E_pi[(log pi - log ref) grad log pi], is the gradient of the reverse KL(pi || ref);
k3's, E_pi[(1 - ref/pi) grad log pi] = -sum_y ref(y) grad log pi(y), is the gradient of the *forward*
KL(ref || pi); k1's, E_pi[grad log pi], is 0. So only k2 makes the penalised objective
E[r] - beta KL(pi || ref), whose optimum the KL target mode (``train.kl_target_validity``,
fade_core.train.schedules) solves for; that mode therefore uses k2 (:func:`kl_estimator_for`). Per token,
k2's gradient is the reverse KL's own-token part: exact for one-token completions, and it leaves out
the later tokens' KL for longer ones.

The total token loss is pg_t + kl_coef * kl_t - entropy_coef * H_t; it is reduced to a scalar by one of
the aggregation modes (``mask`` marks real tokens of rollouts that contribute):

    token-mean               sum_{i,t} l_it / sum_{i,t} m_it                (DAPO; every token weighs the same)
    seq-mean-token-mean      mean_i [ sum_t l_it / sum_t m_it ]              (GRPO paper; every sequence weighs the same)
    seq-mean-token-sum-norm  mean_i [ sum_t l_it / L ], L a constant         (Dr.GRPO; L = the generation budget)

Global denominators: a mini-batch or a rank sees only part of the batch; pass ``num_tokens`` /
``num_seqs`` (the counts over the whole batch) to make the pieces' losses add up to the whole batch's
loss, so that gradient accumulation and data parallelism give the full-batch gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Tensor = torch.Tensor
AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3")
LOG_RATIO_CLAMP = 20.0


def kl_estimator_for(configured: str | None, target_mode: bool) -> str:
    """The KL estimator a run uses: the configured one, else k2 in the target mode (its gradient is the
    reverse KL's, see the module docstring) and k3 otherwise. The target mode with k1 or k3 is an error."""
    if configured is None:
        return "k2" if target_mode else "k3"
    if configured not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {configured!r}; expected one of {KL_ESTIMATORS}")
    if target_mode and configured != "k2":
        raise ValueError(f"the KL target mode needs the k2 estimator (the only one whose gradient is the reverse "
                         f"KL's), got {configured}")
    return configured


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token KL(pi || ref) estimate from samples of pi; logprobs, ref_logprobs [B, T] -> [B, T]."""
    d = (ref_logprobs - logprobs).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d.square()
    if estimator == "k3":
        return torch.expm1(d) - d
    raise ValueError(f"unknown KL estimator {estimator!r}; expected one of {KL_ESTIMATORS}")


def aggregate(
    token_loss: Tensor,
    mask: Tensor,
    mode: str = "token-mean",
    *,
    norm_len: float | None = None,
    num_tokens: float | None = None,
    num_seqs: float | None = None,
) -> Tensor:
    """Reduce a per-token loss [B, T] over ``mask`` [B, T] (bool) to a scalar (see the module docstring).

    norm_len: the constant L of seq-mean-token-sum-norm (required for that mode). num_tokens /
    num_seqs: global denominators (default: this batch's masked tokens / sequences with a token).
    A batch with nothing to average returns 0 (with a gradient path, so backward still works).
    """
    m = mask.to(token_loss.dtype)
    masked = token_loss * m
    if mode == "token-mean":
        denom = float(m.sum()) if num_tokens is None else float(num_tokens)
        return masked.sum() / denom if denom > 0 else masked.sum() * 0.0
    seq_tokens = m.sum(-1)
    seqs = float((seq_tokens > 0).sum()) if num_seqs is None else float(num_seqs)
    if mode == "seq-mean-token-mean":
        per_seq = masked.sum(-1) / seq_tokens.clamp(min=1)
    elif mode == "seq-mean-token-sum-norm":
        if norm_len is None or norm_len <= 0:
            raise ValueError("loss aggregation 'seq-mean-token-sum-norm' needs norm_len > 0 (the generation budget)")
        per_seq = masked.sum(-1) / float(norm_len)
    else:
        raise ValueError(f"unknown loss aggregation {mode!r}; expected one of {AGG_MODES}")
    return per_seq.sum() / seqs if seqs > 0 else per_seq.sum() * 0.0


@dataclass
class LossStats:
    """Token-level sums of a loss evaluation (divide by ``tokens`` for means; they add across pieces)."""

    tokens: float = 0.0
    clipped_low: float = 0.0
    clipped_high: float = 0.0
    dual_clipped: float = 0.0
    ratio: float = 0.0
    approx_kl_old: float = 0.0
    kl_ref: float = 0.0
    entropy: float = 0.0
    pg_loss: float = 0.0

    def add(self, other: LossStats) -> None:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def means(self) -> dict[str, float]:
        n = max(self.tokens, 1.0)
        return {
            "clip_frac_low": self.clipped_low / n,
            "clip_frac_high": self.clipped_high / n,
            "dual_clip_frac": self.dual_clipped / n,
            "ratio_mean": self.ratio / n if self.tokens else 1.0,
            "approx_kl_old": self.approx_kl_old / n,
            "kl_ref": self.kl_ref / n,
            "entropy_update": self.entropy / n,
            "pg_loss_token_mean": self.pg_loss / n,
        }


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    norm_len: float | None = None,
    num_tokens: float | None = None,
    num_seqs: float | None = None,
    ref_logprobs: Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
    entropy: Tensor | None = None,
    entropy_coef: float = 0.0,
) -> tuple[Tensor, LossStats]:
    """The scalar loss of a (mini-)batch and its token statistics.

    logprobs [B, T]: current policy (with gradient); old_logprobs [B, T]: sampling policy (no grad);
    advantages [B] (per rollout) or [B, T]; mask [B, T] bool (real tokens of contributing rollouts);
    ref_logprobs [B, T] when kl_coef > 0; entropy [B, T] (current policy, with gradient) when
    entropy_coef > 0 (else it may be given, detached, for the statistics only).
    """
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(
            f"policy_loss: logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)} and mask "
            f"{tuple(mask.shape)} must have the same [B, T] shape"
        )
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip}")
    adv = advantages.to(logprobs.dtype)
    if adv.dim() == 1:
        adv = adv.unsqueeze(-1).expand_as(logprobs)
    mask = mask.to(torch.bool)
    log_ratio = (logprobs - old_logprobs.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    loss_plain = -adv * ratio
    loss_clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    pg = torch.maximum(loss_plain, loss_clipped)
    dual_active = torch.zeros_like(mask)
    if dual_clip is not None:
        bound = -adv * dual_clip
        dual_active = (adv < 0) & (pg > bound)
        pg = torch.where(adv < 0, torch.minimum(pg, bound), pg)
    token_loss = pg
    kl = None
    if kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError("policy_loss: kl_coef > 0 needs ref_logprobs")
        kl = kl_penalty(logprobs, ref_logprobs.detach(), kl_estimator)
        token_loss = token_loss + kl_coef * kl
    elif ref_logprobs is not None:
        kl = kl_penalty(logprobs.detach(), ref_logprobs.detach(), kl_estimator)
    if entropy_coef > 0:
        if entropy is None:
            raise ValueError("policy_loss: entropy_coef > 0 needs the per-token entropy")
        token_loss = token_loss - entropy_coef * entropy
    loss = aggregate(token_loss, mask, agg, norm_len=norm_len, num_tokens=num_tokens, num_seqs=num_seqs)

    with torch.no_grad():
        m = mask.to(torch.float64)
        r = ratio.detach().to(torch.float64)
        a = adv.detach()
        stats = LossStats(
            tokens=float(m.sum()),
            clipped_low=float((((r < 1.0 - eps_low) & (a < 0)) * m).sum()),
            clipped_high=float((((r > 1.0 + eps_high) & (a > 0)) * m).sum()),
            dual_clipped=float((dual_active * m).sum()),
            ratio=float((r * m).sum()),
            # k3 estimate of KL(old || new) from samples of old: the usual "approx_kl" of PPO
            approx_kl_old=float(((torch.expm1(log_ratio.detach()) - log_ratio.detach()).to(torch.float64) * m).sum()),
            kl_ref=float((kl.detach().to(torch.float64) * m).sum()) if kl is not None else 0.0,
            entropy=float((entropy.detach().to(torch.float64) * m).sum()) if entropy is not None else 0.0,
            pg_loss=float((pg.detach().to(torch.float64) * m).sum()),
        )
    return loss, stats
