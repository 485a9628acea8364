"""Log-probs of the policy: the shared-prefix forward pass of the update, and its no-grad uses.

Shared-prefix forward: the G rollouts of a prompt share it, so :func:`completion_logprobs` runs the prompt
once, with gradient, repeats its KV cache over the group's rows and runs only the completion tokens. The
result is the same log-probs as a full forward over prompt+completion (up to float round-off) for ~1/G of
the prompt's cost; gradients flow back through the repeated cache into the prompt's activations. Under
gradient checkpointing (``model.gradient_checkpointing``), which switches the layers' cache off, each row
runs prompt + completion in one forward instead (same log-probs, the prompt computed once per row).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fade_core.models import cache_kwarg, checkpoints_activations, output_cache, select_cache_rows
from fade_core.rollout import RolloutBatch


def completion_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    row_prompt: torch.Tensor,
    completion_ids: torch.Tensor,
    *,
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of ``completion_ids`` under ``model``, with gradient.

    prompt_ids: the distinct prompts (token ids); row_prompt [B] long: each row's prompt index;
    completion_ids [B, T]. Returns logprobs [B, T] (float32) and entropy [B, T] or None; values at
    padding positions are meaningless (mask them). Each distinct prompt runs once (shared prefix).
    """
    device = next(model.parameters()).device
    bsz, width = completion_ids.shape
    used, row_local = torch.unique(row_prompt, return_inverse=True)
    rows = [list(prompt_ids[int(i)]) for i in used]
    plen = max(len(r) for r in rows)
    ids = torch.full((len(rows), plen), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), plen), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, plen - len(r) :] = torch.tensor(r, dtype=torch.long)
        attn[i, plen - len(r) :] = 1
    ids, attn, row_local = ids.to(device), attn.to(device), row_local.to(device)
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    if width > 1 and recomputes_activations(model):
        logits = _full_forward_logits(model, ids[row_local], attn[row_local], positions[row_local], completion_ids)
        logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
        logprobs = logp_all.gather(-1, completion_ids.to(device).unsqueeze(-1)).squeeze(-1)
        return logprobs, (-(logp_all.exp() * logp_all).sum(-1) if with_entropy else None)
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=width > 1)
    first = out.logits[:, -1][row_local]  # [B, V]: predicts completion token 0
    if width > 1:
        cache = output_cache(out)
        select_cache_rows(cache, row_local)
        comp = completion_ids[:, :-1].to(device)
        full_attn = torch.cat([attn[row_local], torch.ones_like(comp)], dim=1)
        pos = positions[row_local, -1:] + 1 + torch.arange(width - 1, device=device)
        out2 = model(
            input_ids=comp, attention_mask=full_attn, position_ids=pos, use_cache=True, **{cache_kwarg(model): cache}
        )
        logits = torch.cat([first.unsqueeze(1), out2.logits], dim=1)
    else:
        logits = first.unsqueeze(1)
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    logprobs = logp_all.gather(-1, completion_ids.to(device).unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logprobs, entropy


def recomputes_activations(model: torch.nn.Module) -> bool:
    """Whether this forward runs under gradient checkpointing (model.gradient_checkpointing), which turns the
    KV cache off inside the layers, so the shared-prefix forward cannot be used."""
    return bool(model.training and torch.is_grad_enabled() and checkpoints_activations(model))


def _full_forward_logits(model: torch.nn.Module, prompt_ids: torch.Tensor, prompt_attn: torch.Tensor,
                         prompt_pos: torch.Tensor, completion_ids: torch.Tensor) -> torch.Tensor:
    """Logits [B, T, V] predicting each completion token, from one forward over every row's prompt
    (left-padded, [B, L]) followed by its completion: the shared-prefix result without a KV cache."""
    device = prompt_ids.device
    width = completion_ids.shape[1]
    comp = completion_ids[:, :-1].to(device)
    pos = prompt_pos[:, -1:] + 1 + torch.arange(width - 1, device=device)
    out = model(input_ids=torch.cat([prompt_ids, comp], dim=1),
                attention_mask=torch.cat([prompt_attn, torch.ones_like(comp)], dim=1),
                position_ids=torch.cat([prompt_pos, pos], dim=1), use_cache=False)
    return out.logits[:, prompt_ids.shape[1] - 1 :]


@torch.no_grad()
def batch_logprobs(model: torch.nn.Module, batch: RolloutBatch, *, pad_id: int, temperature: float) -> torch.Tensor:
    """Per-token log-probs [N, T] (float32, CPU, 0 on padding) of every completion of ``batch`` under
    ``model``, without gradient, in chunks of whole groups (the PPO "old" or the reference log-probs)."""
    out = torch.zeros_like(batch.logprobs)
    if batch.completion_ids.shape[1] == 0:
        return out
    chunk = max(1, 4096 // max(batch.n, 1)) * batch.n
    for s in range(0, batch.num_samples, chunk):
        idx = torch.arange(s, min(s + chunk, batch.num_samples))
        lp, _ = completion_logprobs(
            model, batch.prompt_token_ids, batch.prompt_index[idx], batch.completion_ids[idx],
            pad_id=pad_id, temperature=temperature,
        )
        out[idx] = lp.float().cpu() * batch.completion_mask[idx]
    return out


def zero_loss(model: torch.nn.Module, *, start_id: int, pad_id: int, temperature: float) -> torch.Tensor:
    """A zero loss through a real (dummy) forward of the same structure as a contributing one.

    A rank with nothing to contribute to a minibatch must still call backward (collectives), and under
    ZeRO-2 its gradients must become ready in the same order as on the other ranks (they are reduced in
    buckets filled in hook order), so it runs the same prompt + completion forward on one dummy row
    (prompt ``[start_id]``, two pad tokens) and multiplies by 0.
    """
    lp, _ = completion_logprobs(
        model, [[start_id]], torch.zeros(1, dtype=torch.long), torch.full((1, 2), pad_id, dtype=torch.long),
        pad_id=pad_id, temperature=temperature,
    )
    return lp.sum() * 0.0


def logprob_gap_sums(engine_lp: torch.Tensor, trainer_lp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """How far the rollout engine's log-probs of the sampled tokens are from the trainer's own, as sums that
    add up over ranks (:func:`logprob_gap_record` turns them into the step record's means).

    engine_lp, trainer_lp [N, T] float: log-prob of each sampled token under the engine's sampling
    distribution and under the trainer's forward (same temperature); mask [N, T] bool: real tokens.
    Returns tokens (count), abs_sum (sum of |trainer - engine|), abs_max, and ratio_sum (sum of the
    importance ratio pi_trainer / pi_engine = exp(trainer - engine), 1 when they agree).
    """
    m = mask.to(trainer_lp.device).bool()
    d = (trainer_lp.float() - engine_lp.to(trainer_lp.device).float())[m]
    if d.numel() == 0:
        return {"tokens": 0.0, "abs_sum": 0.0, "abs_max": 0.0, "ratio_sum": 0.0}
    return {"tokens": float(d.numel()), "abs_sum": float(d.abs().sum()), "abs_max": float(d.abs().max()),
            "ratio_sum": float(d.exp().sum())}


def logprob_gap_record(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    """The step record's engine_lp_gap_mean, engine_lp_gap_max and engine_ratio_mean (per token) from the
    ranks' :func:`logprob_gap_sums`; NaN when no token was compared."""
    tokens = sum(p["tokens"] for p in parts)
    if tokens == 0:
        return {"engine_lp_gap_mean": float("nan"), "engine_lp_gap_max": float("nan"), "engine_ratio_mean": float("nan")}
    return {"engine_lp_gap_mean": sum(p["abs_sum"] for p in parts) / tokens,
            "engine_lp_gap_max": max(p["abs_max"] for p in parts if p["tokens"] > 0),
            "engine_ratio_mean": sum(p["ratio_sum"] for p in parts) / tokens}
