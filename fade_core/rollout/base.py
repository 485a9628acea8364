"""The rollout engine interface: sample G completions per prompt and report what the trainer needs.

An engine turns ``P`` prompt strings into ``N = P * n`` sampled completions, in prompt-major order
(sample ``j`` of prompt ``i`` is row ``i * n + j``). For every completion it returns the token ids,
the per-token log-probabilities *of the sampling policy* (temperature and top-p applied, so that
``exp(logprob)`` is the probability with which the token was actually drawn), the length, the finish
reason and the decoded text. The trainer uses those log-probs as the PPO "old" log-probs, so an
on-policy update needs no second forward pass over the batch.

Seeds: :func:`prompt_seeds` is the one rule by which an engine turns ``seed`` into one seed per prompt, so
sample ``j`` of a prompt depends on that prompt's seed only, not on the batch it was drawn in.

Engines (built by :func:`fade_core.rollout.build_engine`):
    ``hf``    fade_core.rollout.hf.HFEngine: a sampling loop over a Hugging Face causal LM with the KV
              cache (CPU default; shares the trainer's model object, so weights are always current).
    ``vllm``  fade_core.rollout.vllm.VLLMEngine: vLLM on GPUs; the trainer pushes weights every step
              with :meth:`RolloutEngine.sync_weights`. Imported lazily (optional extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import torch

from fade_core.config import ConfigError

FinishReason = Literal["stop", "length"]
SEED_STRIDE = 1_000_003
"""A seed ``s`` derives the seeds ``s * SEED_STRIDE + i`` of its parts i (prompts of a call, chunks of an evaluation)."""


class EngineError(ConfigError):
    """A rollout engine that cannot be built as configured (not installed, a model it cannot run, a KV cache
    too small): one line naming the setting, exit 2 in the CLI like any configuration error."""


def derive_seed(seed: int, index: int) -> int:
    """The seed of part ``index`` of something seeded with ``seed``: ``seed * SEED_STRIDE + index``."""
    return seed * SEED_STRIDE + index


def prompt_seeds(seed: int | Sequence[int] | None, num_prompts: int) -> list[int]:
    """One seed per prompt, the rule every engine follows: a list is used as is (one per prompt); an int
    ``s`` gives ``derive_seed(s, i)`` for prompt i; None draws one int from torch's global generator."""
    if seed is None:
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
    if isinstance(seed, int):
        return [derive_seed(seed, i) for i in range(num_prompts)]
    seeds = [int(s) for s in seed]
    if len(seeds) != num_prompts:
        raise ValueError(f"got {len(seeds)} prompt seeds for {num_prompts} prompts")
    return seeds


@dataclass
class RolloutBatch:
    """``N = num_prompts * n`` sampled completions, prompt-major.

    Shapes (``P`` prompts, ``n`` samples each, ``N = P * n``, ``T`` = longest completion in tokens):

    prompts           list[str], length P: the prompt strings as given.
    prompt_token_ids  list[list[int]], length P: each prompt's token ids (BOS included when the
                      tokenizer adds one), exactly what the policy was conditioned on.
    n                 int: samples per prompt.
    prompt_index      LongTensor [N]: row -> index into ``prompts`` (``arange(N) // n``).
    completion_ids    LongTensor [N, T]: sampled token ids, right-padded with ``pad_token_id``. A
                      completion that stopped includes its EOS token (the policy chose it: it gets
                      gradient and log-prob like any other token).
    completion_mask   BoolTensor [N, T]: True on real (sampled) tokens, False on padding.
    logprobs          FloatTensor [N, T]: log-prob of each sampled token under the sampling
                      distribution (after temperature / top-p); 0 on padding.
    lengths           LongTensor [N]: number of real tokens per completion (``completion_mask.sum(1)``).
    finish_reasons    list[str], length N: "stop" (EOS or a stop sequence) or "length" (budget exhausted).
    texts             list[str], length N: decoded completions without special tokens.
    entropies         FloatTensor [N, T] or None: entropy (nats) of the sampling distribution at each
                      step, 0 on padding; engines that cannot compute it cheaply return None.
    pad_token_id      int: the id used for padding ``completion_ids``.
    """

    prompts: list[str]
    prompt_token_ids: list[list[int]]
    n: int
    prompt_index: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    logprobs: torch.Tensor
    lengths: torch.Tensor
    finish_reasons: list[str]
    texts: list[str]
    entropies: torch.Tensor | None = None
    pad_token_id: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        num = len(self.prompts) * self.n
        if len(self.prompt_token_ids) != len(self.prompts):
            raise ValueError(f"RolloutBatch: {len(self.prompt_token_ids)} prompt_token_ids for {len(self.prompts)} prompts")
        for name in ("prompt_index", "lengths"):
            t = getattr(self, name)
            if tuple(t.shape) != (num,):
                raise ValueError(f"RolloutBatch.{name}: shape {tuple(t.shape)}, expected ({num},)")
        for name in ("completion_ids", "completion_mask", "logprobs") + (("entropies",) if self.entropies is not None else ()):
            t = getattr(self, name)
            if t.dim() != 2 or t.shape[0] != num or t.shape[1] != self.completion_ids.shape[1]:
                raise ValueError(f"RolloutBatch.{name}: shape {tuple(t.shape)}, expected ({num}, T)")
        if len(self.finish_reasons) != num or len(self.texts) != num:
            raise ValueError(f"RolloutBatch: finish_reasons/texts must have {num} entries")

    @property
    def num_samples(self) -> int:
        """N = P * n."""
        return len(self.prompts) * self.n

    def completion_token_lists(self) -> list[list[int]]:
        """Per sample, the real completion token ids (padding removed)."""
        return [row[:length].tolist() for row, length in zip(self.completion_ids, self.lengths.tolist(), strict=True)]

    def group(self, values: torch.Tensor) -> torch.Tensor:
        """Reshape a per-sample tensor [N, ...] to per-group [P, n, ...]."""
        return values.reshape(len(self.prompts), self.n, *values.shape[1:])


def empty_batch(prompts: list[str], prompt_token_ids: list[list[int]], n: int, pad_token_id: int) -> RolloutBatch:
    """A batch with zero-length completions (for ``max_new_tokens == 0`` or no prompts)."""
    num = len(prompts) * n
    return RolloutBatch(
        prompts=list(prompts),
        prompt_token_ids=[list(p) for p in prompt_token_ids],
        n=n,
        prompt_index=torch.arange(num) // max(n, 1),
        completion_ids=torch.full((num, 0), pad_token_id, dtype=torch.long),
        completion_mask=torch.zeros((num, 0), dtype=torch.bool),
        logprobs=torch.zeros((num, 0)),
        lengths=torch.zeros(num, dtype=torch.long),
        finish_reasons=["length"] * num,
        texts=[""] * num,
        entropies=torch.zeros((num, 0)),
        pad_token_id=pad_token_id,
    )


# ---------------------------------------------------------------------------------- prompts and stops
def encode_prompts(tokenizer: Any, prompts: Sequence[str]) -> list[list[int]]:
    """Token ids of each prompt as the policy sees them: the tokenizer's special tokens (its BOS) are added
    unless the text already starts with the BOS token, as a chat template's output may (no double BOS)."""
    bos = getattr(tokenizer, "bos_token", None)
    has_bos = [bool(bos) and text.startswith(bos) for text in prompts]
    out: list[list[int]] = [[] for _ in prompts]
    for flag in (False, True):
        idx = [i for i, h in enumerate(has_bos) if h == flag]
        if idx:
            ids = tokenizer([prompts[i] for i in idx], add_special_tokens=not flag)["input_ids"]
            for i, row in zip(idx, ids, strict=True):
                out[i] = list(row)
    return out


def first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index in ``text`` where the earliest of ``stops`` begins (None: none occurs)."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None


def apply_stops(batch: RolloutBatch, tokenizer: Any, stops: Sequence[Sequence[str]] | None) -> RolloutBatch:
    """Cut each completion at the first stop sequence of its prompt (``stops[i]`` for prompt i).

    A completion whose text contains a stop keeps its tokens up to and including the one that completes
    the stop (the policy chose them: they keep their log-probs) and is finished ("stop"); its text ends
    just before the stop, as the judge should read it. The rest of the row becomes padding. Tokens drawn
    after the stop are dropped, so the kept ones have exactly the distribution of sampling with early
    stopping. The batch is changed in place and returned."""
    if not stops or not any(stops):
        return batch
    if len(stops) != len(batch.prompts):
        raise ValueError(f"got {len(stops)} stop lists for {len(batch.prompts)} prompts")
    for row in range(batch.num_samples):
        row_stops = stops[row // batch.n]
        cut = first_stop(batch.texts[row], row_stops) if row_stops else None
        if cut is None:
            continue
        ids = batch.completion_ids[row, : int(batch.lengths[row])].tolist()
        lo, hi = 1, len(ids)  # the fewest tokens whose text already contains a stop
        while lo < hi:
            mid = (lo + hi) // 2
            if first_stop(tokenizer.decode(ids[:mid], skip_special_tokens=True), row_stops) is not None:
                hi = mid
            else:
                lo = mid + 1
        batch.completion_mask[row, lo:] = False
        batch.completion_ids[row, lo:] = batch.pad_token_id
        batch.logprobs[row, lo:] = 0.0
        if batch.entropies is not None:
            batch.entropies[row, lo:] = 0.0
        batch.lengths[row] = lo
        batch.finish_reasons[row] = "stop"
        batch.texts[row] = batch.texts[row][:cut]
    return batch


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples completions. ``generate`` is deterministic given ``seed`` (same engine, same weights)."""

    name: str

    def generate(
        self,
        prompts: list[str],
        n: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 16,
        seed: int | None = None,
        stop: Sequence[Sequence[str]] | None = None,
    ) -> RolloutBatch:
        """Sample ``n`` completions for each prompt; see :class:`RolloutBatch` for the fields. ``stop``: per
        prompt, strings that end a completion besides EOS (:func:`apply_stops` says how)."""
        ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Make the engine sample from ``model``'s current weights (no-op when it shares the object)."""
        ...
