"""The ``hf`` rollout engine: a batched sampling loop over any Hugging Face causal LM with the KV cache.

Why not ``model.generate``: we need, for every sampled token, its log-prob under the *sampling*
distribution (temperature and top-p applied) and the entropy of that distribution, and we want
sampling that does not depend on how prompts are batched or split across ranks. The loop is short:

1. Left-pad the ``P * n`` prompt copies, run one forward over them (prefill) to fill the KV cache.
2. For each new token: scale the last logits by ``1/temperature``, apply top-p (keep the smallest set of
   tokens whose probability reaches ``top_p``, renormalise), draw the token by inverse-CDF with a
   uniform number, record its log-prob and the entropy, then feed the token back with the cache.
3. A row that sampled EOS, or whose text ends with one of its prompt's stop sequences, is finished:
   later positions are padding (mask False). Stop when every row is finished or ``max_new_tokens`` is
   reached; completions are then cut exactly at their first stop sequence
   (:func:`fade_core.rollout.base.apply_stops`).

Determinism: the uniform numbers of prompt ``i`` come from a generator seeded with that prompt's seed
(``seed`` may be one int, from which per-prompt seeds are derived, or a list with one seed per
prompt: :func:`fade_core.rollout.base.prompt_seeds`). The draw of sample ``j`` of prompt ``i`` at step ``t`` therefore depends only on that seed and
the model's probabilities, not on the batch it was computed in -- so a run split over 2 ranks samples
the same completions as the same run on 1 rank (up to float round-off in the logits), and a resumed
run resamples exactly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from fade_core.models import cache_kwarg, output_cache, repeat_cache
from fade_core.rollout.base import RolloutBatch, apply_stops, empty_batch, encode_prompts, prompt_seeds


def sample_from_logits(
    logits: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw one token per row by inverse CDF.

    logits [B, V], uniforms [B] in [0, 1) -> (tokens [B] long, logprob [B], entropy [B]) of the
    sampling distribution (softmax(logits / temperature), restricted to the top-p nucleus).
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_logp, order = logp.sort(dim=-1, descending=True)
        sorted_p = sorted_logp.exp()
        before = sorted_p.cumsum(-1) - sorted_p  # mass strictly above each token
        keep_sorted = before < top_p  # always keeps the most likely token
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        logp = torch.log_softmax(logp.masked_fill(~keep, float("-inf")), dim=-1)
    probs = logp.exp()
    cdf = probs.cumsum(-1)
    u = uniforms.to(cdf.dtype).unsqueeze(-1) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=logits.shape[-1] - 1)
    # a zero-probability token can only be hit by round-off at the CDF's flat end; step back to a real one
    bad = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) <= 0
    if bad.any():
        tokens[bad] = probs[bad].argmax(-1)
    token_logp = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    entropy = -(probs * logp.clamp(min=-1e30)).nan_to_num(0.0).sum(-1)
    return tokens, token_logp, entropy


class HFEngine:
    """Sampling loop over ``model`` (shared with the trainer, so weights are always current).

    batch_size: most sequences per forward pass (0 = all ``P * n`` at once).
    """

    name = "hf"

    def __init__(self, model: torch.nn.Module, tokenizer: Any, *, batch_size: int = 0, **_: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = int(batch_size)
        eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if cfg_eos is not None:
            self.eos_ids |= set(cfg_eos if isinstance(cfg_eos, list) else [cfg_eos])
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_ids, default=0)

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model

    def describe(self) -> dict[str, Any]:
        """What a run records about this engine (``engine.json``)."""
        return {"engine": self.name, "device": str(next(self.model.parameters()).device), "seeding": "per-prompt"}

    def encode_prompts(self, prompts: list[str]) -> list[list[int]]:
        """Token ids of each prompt as the policy sees them (special tokens such as BOS included)."""
        return encode_prompts(self.tokenizer, prompts)

    @torch.no_grad()
    def generate(
        self,
        prompts: list[str],
        n: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 16,
        seed: int | Sequence[int] | None = None,
        stop: Sequence[Sequence[str]] | None = None,
    ) -> RolloutBatch:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        t0 = time.perf_counter()
        prompt_ids = self.encode_prompts(prompts)
        if not prompts or max_new_tokens <= 0:
            return empty_batch(prompts, prompt_ids, n, self.pad_id)
        seeds = prompt_seeds(seed, len(prompts))
        uniforms = torch.cat(
            [torch.rand(n, max_new_tokens, generator=torch.Generator().manual_seed(s)) for s in seeds]
        )  # [N, max_new]
        if stop is not None and len(stop) != len(prompts):
            raise ValueError(f"got {len(stop)} stop lists for {len(prompts)} prompts")
        stops = [tuple(s) for s in stop] if stop is not None else [()] * len(prompts)
        per_chunk = max(1, self.batch_size // n) if self.batch_size > 0 else len(prompt_ids)
        parts = [
            self._sample(prompt_ids[i : i + per_chunk], n, uniforms[i * n : (i + per_chunk) * n], temperature, top_p,
                         max_new_tokens, stops[i : i + per_chunk])
            for i in range(0, len(prompt_ids), per_chunk)
        ]
        width = max(p[0].shape[1] for p in parts)

        def cat(idx: int, fill: float | int | bool) -> torch.Tensor:
            return torch.cat([torch.nn.functional.pad(p[idx], (0, width - p[idx].shape[1]), value=fill) for p in parts])

        ids, mask, logprobs, entropies = cat(0, self.pad_id), cat(1, False), cat(2, 0.0), cat(3, 0.0)
        lengths = mask.sum(1)
        last = ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        finish = ["stop" if (ln > 0 and int(tok) in self.eos_ids) else "length" for ln, tok in zip(lengths.tolist(), last, strict=True)]
        texts = self.tokenizer.batch_decode(
            [r[:ln].tolist() for r, ln in zip(ids, lengths.tolist(), strict=True)], skip_special_tokens=True
        )
        batch = RolloutBatch(
            prompts=list(prompts),
            prompt_token_ids=prompt_ids,
            n=n,
            prompt_index=torch.arange(len(prompts) * n) // n,
            completion_ids=ids,
            completion_mask=mask,
            logprobs=logprobs,
            lengths=lengths,
            finish_reasons=finish,
            texts=texts,
            entropies=entropies,
            pad_token_id=self.pad_id,
        )
        apply_stops(batch, self.tokenizer, stops if any(stops) else None)
        batch.timings = {"generate_s": time.perf_counter() - t0}
        return batch

    def _sample(
        self, prompts: list[list[int]], n: int, uniforms: torch.Tensor, temperature: float, top_p: float, max_new: int,
        stops: Sequence[tuple[str, ...]] = (),
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample ``n`` continuations of each prompt; returns ids, mask, logprobs, entropies [len * n, T].

        The prompts are prefilled once each (left-padded) and the KV cache is repeated ``n`` times, so
        the prompt costs one forward row instead of ``n``. ``stops[i]``: stop sequences of prompt i; a
        row whose recent text contains one stops sampling (the exact cut is made afterwards).
        """
        model = self.model
        device = next(model.parameters()).device
        num, plen = len(prompts), max(len(r) for r in prompts)
        bsz = num * n
        input_ids = torch.full((num, plen), self.pad_id, dtype=torch.long)
        prompt_attn = torch.zeros((num, plen), dtype=torch.long)
        for i, r in enumerate(prompts):
            input_ids[i, plen - len(r) :] = torch.tensor(r, dtype=torch.long)
            prompt_attn[i, plen - len(r) :] = 1
        input_ids, prompt_attn = input_ids.to(device), prompt_attn.to(device)
        positions = (prompt_attn.cumsum(-1) - 1).clamp(min=0)
        attn = torch.cat([prompt_attn.repeat_interleave(n, 0), torch.zeros((bsz, max_new), dtype=torch.long, device=device)], 1)
        next_pos = positions[:, -1].repeat_interleave(n) + 1
        eos = torch.tensor(sorted(self.eos_ids), dtype=torch.long, device=device)
        cache_kw = cache_kwarg(model)
        was_training = model.training
        model.eval()
        try:
            out = model(input_ids=input_ids, attention_mask=prompt_attn, position_ids=positions, use_cache=True)
            cache, logits = output_cache(out), out.logits[:, -1]
            if n > 1:
                repeat_cache(cache, n)
                logits = logits.repeat_interleave(n, 0)
            ids = torch.full((bsz, max_new), self.pad_id, dtype=torch.long, device=device)
            mask = torch.zeros((bsz, max_new), dtype=torch.bool, device=device)
            logprobs = torch.zeros((bsz, max_new), device=device)
            entropies = torch.zeros((bsz, max_new), device=device)
            alive = torch.ones(bsz, dtype=torch.bool, device=device)
            steps = 0
            for t in range(max_new):
                tok, lp, ent = sample_from_logits(logits, uniforms[:, t].to(device), temperature, top_p)
                ids[:, t] = torch.where(alive, tok, self.pad_id)
                mask[:, t] = alive
                logprobs[:, t] = torch.where(alive, lp, 0.0)
                entropies[:, t] = torch.where(alive, ent, 0.0)
                alive = alive & ~torch.isin(tok, eos)
                if any(stops):
                    alive = alive & ~self._hit_stop(ids[:, : t + 1], alive, stops, n)
                steps = t + 1
                if not bool(alive.any()) or t == max_new - 1:
                    break
                attn[:, plen + t] = 1
                out = model(
                    input_ids=tok.unsqueeze(1),
                    attention_mask=attn[:, : plen + t + 1],
                    position_ids=(next_pos + t).unsqueeze(1),
                    use_cache=True,
                    **{cache_kw: cache},
                )
                cache, logits = output_cache(out), out.logits[:, -1]
        finally:
            model.train(was_training)
        return ids[:, :steps].cpu(), mask[:, :steps].cpu(), logprobs[:, :steps].cpu(), entropies[:, :steps].cpu()

    def _hit_stop(self, ids: torch.Tensor, alive: torch.Tensor, stops: Sequence[tuple[str, ...]], n: int) -> torch.Tensor:
        """[B] bool: alive rows whose last few tokens' text contains a stop sequence of their prompt."""
        hit = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        tail = max((len(s) for row in stops for s in row), default=0) + 4  # tokens: each >= 1 character, with slack
        for r in alive.nonzero().flatten().tolist():
            row_stops = stops[r // n]
            if row_stops:
                text = self.tokenizer.decode(ids[r, -tail:].tolist(), skip_special_tokens=True)
                hit[r] = any(s in text for s in row_stops)
        return hit
