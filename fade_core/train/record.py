"""The step record: one row of metrics per RL step, and the loggers that receive it.

:func:`step_record` builds the row from what the step produced (the first sampling round, the batch trained
on, its advantages and mask, the update's statistics, the advantage's state). Every statistic of an empty
tensor is NaN through one guard (:func:`_stat`), so a step whose batch came back empty (DAPO found no
informative group) still writes a full row. Keys, in order::

    run_id method seed step lr                          identity (method = the run's label)
    reward_mean solve_rate solve_hist                   the first round's rewards (solve_hist: groups per count
    zero_var_frac all_fail_frac all_pass_frac           of successes 0..G) and its signal-free groups
    m_s m_f mass_ratio cov_adv_logprob                  gradient masses and Cov(A, log pi) of the trained batch
    adv_mean adv_abs_mean kept_frac entropy             its advantages over kept rollouts; mean token entropy
    alpha delta                                         Advantage.state_record() (NaN for a method without them)
    len_mean len_max len_min truncated_frac             completion lengths of the first round; truncated_frac:
                                                        the share that hit the generation budget
    max_new_tokens                                      the generation budget (rollout.max_new_tokens or the
                                                        benchmark template's)
    verdict/<name>                                      rollouts of the first round per verdict, for every name
                                                        of fade_core.train.rewards.VERDICTS (passed,
                                                        wrong_answer, compile_error, runtime_error, timeout,
                                                        resource_limit, no_code, no_answer, other)
    groups_used sampling_rounds kl_coef eps_low eps_high
    <the rest of Advantage.state_record()>              (FADE: p_hat h_hat h_target)
    <losses.LossStats means> grad_norm grad_norm_max loss optimizer_steps
    [engine_lp_gap_mean engine_lp_gap_max engine_ratio_mean]   where the trainer recomputes the old log-probs
                                                        (an engine other than hf, or top_p < 1): per token,
                                                        mean and max |trainer - engine| log-prob of the
                                                        sampled tokens, mean exp(trainer - engine)
    [resample_groups resample_reward_mean resample_loss] a second update (Advantage.resample_groups)
    rank1_frac eff_rank rank1_frac_step eff_rank_step   the output head's update (NaN between rank1_every steps)
    examples                                            a few rollouts of the first round (rank 0's share):
                                                        [{problem_id, prompt, completion, reward, verdict}]
                                                        (rewards.pick_examples; JSON text in metrics.duckdb)
    rollouts rollouts_total                             rollouts sampled this step (refill rounds and resampled
                                                        groups included) and since step 1 (added by the trainer;
                                                        train.max_rollouts ends a run on the total)
    time_rollout time_scoring time_update time_step tokens_per_s time_log

Readers use these names as they are (fade_core.report, fade_core.study). A new per-step quantity is one
more part here; a new sink is one more :class:`StepLogger` (the live trackers: fade_core.train.loggers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import torch

from fade_core import decomposition
from fade_core.advantages import zero_variance_groups
from fade_core.train.groups import Groups
from fade_core.train.rewards import VERDICTS, verdict_counts

TIMING_KEYS = ("time_rollout", "time_scoring", "time_update", "time_step", "time_log", "tokens_per_s")
RANK1_KEYS = ("rank1_frac", "eff_rank", "rank1_frac_step", "eff_rank_step")


class StepLogger(Protocol):
    """Receives every step's record on rank 0 (after the run's metrics log has written it)."""

    def log(self, step: int, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def _stat(t: torch.Tensor, reduce: Callable[[torch.Tensor], torch.Tensor] = torch.mean) -> float:
    """``reduce`` of ``t`` in float64 as a float; NaN for an empty tensor (the record's one NaN guard)."""
    return float(reduce(t.to(torch.float64))) if t.numel() else math.nan


def step_record(
    *, run_id: str, method: str, seed: int, step: int, lr: float, group_size: int,
    first: Groups, groups: Groups, rounds: int, advantages: torch.Tensor, keep: torch.Tensor,
    update: dict[str, Any], resample: dict[str, Any], state: dict[str, float],
    kl_coef: float, eps_low: float, eps_high: float, max_new_tokens: int | None = None,
) -> dict[str, Any]:
    """The record of one step (see the module docstring), timings and rank-1 values not yet filled in.

    first: the step's first sampling round (what the policy produced); groups: the batch trained on;
    advantages [P, G] float64 and keep [P, G] bool of ``groups``; update: the update's statistics;
    resample: the second update's (empty without one); state: ``Advantage.state_record()``.
    """
    per_group = first.passed.sum(1).long() if first.passed.numel() else torch.zeros(0, dtype=torch.long)
    hist = torch.bincount(per_group, minlength=group_size + 1).tolist() if per_group.numel() else [0] * (group_size + 1)
    zero_var = zero_variance_groups(first.rewards) if first.rewards.numel() else torch.zeros(0, dtype=torch.bool)
    if groups.rewards.numel():
        totals = decomposition.batch_totals(groups.rewards, advantages, keep)
        m_s, m_f, ratio = totals.m_s, totals.m_f, float(totals.ratio)
        cov = float(decomposition.adv_logprob_covariance(advantages, groups.mean_logprob, keep))
    else:
        m_s = m_f = ratio = cov = math.nan
    adv_kept = advantages[keep] if keep.any() else torch.zeros(0, dtype=torch.float64)
    tokens = float(first.lengths.sum())
    rec: dict[str, Any] = {
        "run_id": run_id, "method": method, "seed": seed, "step": step, "lr": lr,
        "reward_mean": _stat(first.rewards),
        "solve_rate": _stat(first.passed),
        "solve_hist": hist,
        "zero_var_frac": _stat(zero_var),
        "all_fail_frac": _stat(per_group == 0),
        "all_pass_frac": _stat(per_group == group_size),
        "m_s": m_s, "m_f": m_f, "mass_ratio": ratio,
        # Cov(A, log pi) of the entropy-drift formula: over the kept rollouts, the advantage against the
        # rollout's per-token mean log-prob (per token, like `entropy`; E[log pi] = -H then holds)
        "cov_adv_logprob": cov,
        "adv_mean": _stat(adv_kept),
        "adv_abs_mean": _stat(adv_kept, lambda t: t.abs().mean()),
        "kept_frac": _stat(keep),
        "entropy": float(first.entropy_sum.sum() / max(tokens, 1.0)),
        "alpha": state.get("alpha", math.nan),
        "delta": state.get("delta", math.nan),
        "len_mean": _stat(first.lengths),
        "len_max": _stat(first.lengths, torch.max),
        "len_min": _stat(first.lengths, torch.min),
        "truncated_frac": _stat(first.truncated),
        "max_new_tokens": max_new_tokens if max_new_tokens is not None else math.nan,
        **verdict_counts(VERDICTS[int(i)] for i in (first.verdicts.flatten() if first.verdicts is not None else [])),
        "groups_used": len(groups.problems),
        "sampling_rounds": rounds,
        "kl_coef": kl_coef,
        "eps_low": eps_low,
        "eps_high": eps_high,
    }
    rec.update({k: v for k, v in state.items() if k not in rec})
    rec.update(update)
    rec.update({k: v for k, v in resample.items() if not k.endswith("_seconds")})
    for key in RANK1_KEYS:
        rec.setdefault(key, math.nan)
    rec["examples"] = list(first.examples)
    return rec


class ProgressBar:
    """A live rich bar (a :class:`StepLogger`): step, reward, entropy, alpha/delta, ETA."""

    def __init__(self, total: int, start: int, label: str) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        )
        self.progress.start()
        self.task = self.progress.add_task("train", total=total, completed=start, info="")

    def log(self, step: int, record: dict[str, Any]) -> None:
        info = f"reward {record['reward_mean']:.3f} H {record['entropy']:.2f}"
        if not math.isnan(record.get("alpha", math.nan)) or not math.isnan(record.get("delta", math.nan)):
            info += f" a {record['alpha']:.2f} d {record['delta']:.2f}"
        self.progress.update(self.task, completed=step, info=info)

    def close(self) -> None:
        self.progress.stop()
