"""A batch of groups: G scored rollouts per prompt, gathered over ranks, selectable and concatenable.

Every rank samples a strided share of the step's prompts (:func:`local_share`); :func:`gather_groups`
turns its rollouts and verdicts into per-group tensors and all-gathers them, so each rank holds the whole
batch's rewards and statistics ([P, G] each, in global group order) next to its own share's rollouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fade_core.rollout import RolloutBatch
from fade_core.train.distributed import Dist
from fade_core.train.rewards import VERDICT_INDEX


def local_share(num_groups: int, dist: Dist) -> list[int]:
    """The global positions of the groups this rank samples: every world-th, from its rank."""
    return list(range(dist.rank, num_groups, dist.world))


@dataclass
class Groups:
    """A batch of P groups of G rollouts: the whole batch's statistics and this rank's share of the rollouts.

    ``problems`` and the [P, G] tensors hold the whole batch (every rank's groups), in global group order;
    ``local`` lists the global positions of this rank's groups, in the order of ``batch``'s prompts (its
    rollouts: token ids, log-probs, masks). Timings are seconds of the sampling rounds that made it.
    """

    problems: list[int]
    rewards: torch.Tensor  # [P, G] float64 (shaped rewards)
    passed: torch.Tensor  # [P, G] bool
    lengths: torch.Tensor  # [P, G] long
    mean_logprob: torch.Tensor  # [P, G] float64
    entropy_sum: torch.Tensor  # [P, G] float64 (sum over tokens)
    truncated: torch.Tensor  # [P, G] bool (finish reason "length")
    local: list[int]
    batch: RolloutBatch | None
    gen_seconds: float = 0.0
    score_seconds: float = 0.0
    verdicts: torch.Tensor | None = None  # [P, G] long: index into fade_core.train.rewards.VERDICTS
    examples: list[dict[str, Any]] = field(default_factory=list)  # a few of this rank's rollouts (rewards.pick_examples)

    def select(self, positions: Sequence[int]) -> Groups:
        """The sub-batch of these global positions (keeps each rank's local share consistent)."""
        pos = list(positions)
        local_set = {p: i for i, p in enumerate(self.local)}
        keep_local = [p for p in pos if p in local_set]
        batch = select_batch(self.batch, [local_set[p] for p in keep_local]) if self.batch is not None else None
        index = torch.tensor(pos, dtype=torch.long)
        return Groups(
            problems=[self.problems[p] for p in pos],
            rewards=self.rewards[index], passed=self.passed[index], lengths=self.lengths[index],
            mean_logprob=self.mean_logprob[index], entropy_sum=self.entropy_sum[index],
            truncated=self.truncated[index],
            local=[pos.index(p) for p in keep_local], batch=batch,
            gen_seconds=self.gen_seconds, score_seconds=self.score_seconds,
            verdicts=self.verdicts[index] if self.verdicts is not None else None, examples=list(self.examples),
        )


def select_batch(b: RolloutBatch, groups: Sequence[int]) -> RolloutBatch:
    rows = [g * b.n + j for g in groups for j in range(b.n)]
    idx = torch.tensor(rows, dtype=torch.long)
    return RolloutBatch(
        prompts=[b.prompts[g] for g in groups],
        prompt_token_ids=[b.prompt_token_ids[g] for g in groups],
        n=b.n,
        prompt_index=torch.arange(len(rows)) // b.n,
        completion_ids=b.completion_ids[idx],
        completion_mask=b.completion_mask[idx],
        logprobs=b.logprobs[idx],
        lengths=b.lengths[idx],
        finish_reasons=[b.finish_reasons[r] for r in rows],
        texts=[b.texts[r] for r in rows],
        entropies=b.entropies[idx] if b.entropies is not None else None,
        pad_token_id=b.pad_token_id,
    )


def concat_groups(parts: Sequence[Groups]) -> Groups:
    if len(parts) == 1:
        return parts[0]
    offsets = np.cumsum([0] + [len(p.problems) for p in parts[:-1]]).tolist()
    batches = [p.batch for p in parts if p.batch is not None and p.batch.num_samples > 0]
    return Groups(
        problems=[i for p in parts for i in p.problems],
        rewards=torch.cat([p.rewards for p in parts]), passed=torch.cat([p.passed for p in parts]),
        lengths=torch.cat([p.lengths for p in parts]), mean_logprob=torch.cat([p.mean_logprob for p in parts]),
        entropy_sum=torch.cat([p.entropy_sum for p in parts]), truncated=torch.cat([p.truncated for p in parts]),
        local=[o + i for p, o in zip(parts, offsets, strict=True) for i in p.local],
        batch=cat_batches(batches) if batches else parts[0].batch,
        gen_seconds=sum(p.gen_seconds for p in parts), score_seconds=sum(p.score_seconds for p in parts),
        verdicts=torch.cat([p.verdicts for p in parts]) if all(p.verdicts is not None for p in parts) else None,
        examples=[e for p in parts for e in p.examples],
    )


def cat_batches(bs: Sequence[RolloutBatch]) -> RolloutBatch:
    if len(bs) == 1:
        return bs[0]
    width = max(b.completion_ids.shape[1] for b in bs)

    def pad(t: torch.Tensor, fill: Any) -> torch.Tensor:
        return torch.nn.functional.pad(t, (0, width - t.shape[1]), value=fill)

    n = bs[0].n
    total = sum(len(b.prompts) for b in bs)
    return RolloutBatch(
        prompts=[p for b in bs for p in b.prompts],
        prompt_token_ids=[p for b in bs for p in b.prompt_token_ids],
        n=n,
        prompt_index=torch.arange(total * n) // n,
        completion_ids=torch.cat([pad(b.completion_ids, b.pad_token_id) for b in bs]),
        completion_mask=torch.cat([pad(b.completion_mask, False) for b in bs]),
        logprobs=torch.cat([pad(b.logprobs, 0.0) for b in bs]),
        lengths=torch.cat([b.lengths for b in bs]),
        finish_reasons=[f for b in bs for f in b.finish_reasons],
        texts=[t for b in bs for t in b.texts],
        entropies=torch.cat([pad(b.entropies, 0.0) for b in bs]) if all(b.entropies is not None for b in bs) else None,
        pad_token_id=bs[0].pad_token_id,
    )


def gather_groups(
    problems: Sequence[int], local: list[int], batch: RolloutBatch, scores: Sequence[Any], dist: Dist,
    *, gen_seconds: float, score_seconds: float,
) -> Groups:
    """The :class:`Groups` of ``problems`` from this rank's ``batch`` (its ``local`` groups, G rollouts each)
    and their verdicts ``scores`` (objects with ``reward``, ``passed`` and a ``verdict`` name of
    fade_core.train.rewards.VERDICTS; "other" when they have none), all-gathered over ranks. Timings are the
    slowest rank's."""
    g = batch.n
    n_local = len(local)
    rewards = torch.tensor([s.reward for s in scores], dtype=torch.float64).reshape(n_local, g)
    passed = torch.tensor([s.passed for s in scores], dtype=torch.bool).reshape(n_local, g)
    lengths = batch.lengths.reshape(n_local, g)
    lp_sum = (batch.logprobs * batch.completion_mask).sum(1).to(torch.float64)
    mean_lp = (lp_sum / batch.lengths.clamp(min=1)).reshape(n_local, g)
    if batch.entropies is not None:
        ent_sum = (batch.entropies * batch.completion_mask).sum(1).to(torch.float64).reshape(n_local, g)
    else:  # -log p of the sampled token is an unbiased per-token estimate of the entropy
        ent_sum = (-lp_sum).reshape(n_local, g)
    truncated = torch.tensor([f == "length" for f in batch.finish_reasons], dtype=torch.bool).reshape(n_local, g)
    other = VERDICT_INDEX["other"]
    verdicts = torch.tensor([VERDICT_INDEX.get(getattr(s, "verdict", "other"), other) for s in scores],
                            dtype=torch.long).reshape(n_local, g)
    payload = (local, rewards, passed, lengths, mean_lp, ent_sum, truncated, verdicts, gen_seconds, score_seconds)
    gathered = dist.gather(payload)
    p = len(problems)
    out = {k: torch.zeros((p, g), dtype=dt) for k, dt in (
        ("rewards", torch.float64), ("passed", torch.bool), ("lengths", torch.long),
        ("mean_logprob", torch.float64), ("entropy_sum", torch.float64), ("truncated", torch.bool),
        ("verdicts", torch.long))}
    for loc, *tensors, _, _ in gathered:
        index = torch.tensor(loc, dtype=torch.long)
        for key, t in zip(out, tensors, strict=True):
            out[key][index] = t
    return Groups(
        problems=list(problems), local=local, batch=batch,
        gen_seconds=max(x[-2] for x in gathered), score_seconds=max(x[-1] for x in gathered), **out,
    )
