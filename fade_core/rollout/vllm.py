"""The ``vllm`` rollout engine: GPU sampling with vLLM, weights pushed from the trainer every step.

UNTESTED HERE: this machine has no GPU and vllm must not be installed in the project's CPU venv. The
code follows vLLM's offline ``LLM`` API (0.6 - 0.11); the CPU test suite only checks that asking for
this engine without vllm fails with a clear message. Validate on a GPU node before relying on it.

How it is used:
    * The engine owns a ``vllm.LLM`` built from the policy's checkpoint folder (``model_path``, default
      the model's ``name_or_path``), with ``tensor_parallel_size`` GPUs and prefix caching on (the G
      rollouts of a prompt share its KV blocks).
    * ``generate`` submits every prompt once with ``SamplingParams(n=G, seed=<the prompt's seed>,
      logprobs=0)``; vLLM returns the sampled token ids, each sampled token's log-prob, the finish
      reason and the text. Output order is prompt-major, as :class:`~fade_core.rollout.base.RolloutBatch`
      requires. Entropies are not returned (None): the trainer then uses -log p of the sampled tokens,
      an unbiased per-token estimate of the entropy.
    * ``sync_weights(model)`` streams the trainer's current parameters into the vLLM model
      (``load_weights``) and clears the prefix cache, every step before sampling, so rollouts come from
      the policy being trained (on-policy). With ``logprobs_mode`` left at vLLM's default the returned
      log-probs may be those of the raw logits rather than the temperature/top-p distribution, and
      vLLM's kernels differ from the trainer's, so the trainer recomputes the "old" log-probs with one
      forward pass whenever this engine is used.
    * Colocated use (trainer and vLLM on the same GPUs) needs ``gpu_memory_utilization`` < 1 and, for
      direct weight access, ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (set here unless already set). On a
      cluster the samplers run on their own nodes (infra/cluster.md); weight sync then goes over NCCL.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from fade_core.rollout.base import RolloutBatch, empty_batch, encode_prompts, prompt_seeds


class VLLMEngine:
    """vLLM sampling over the policy's weights (see the module docstring; GPU only, untested on CPU)."""

    name = "vllm"

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.5,
        dtype: str = "bfloat16",
        max_model_len: int | None = None,
        model_path: str | None = None,
        enforce_eager: bool = False,
        **_: Any,
    ) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            import vllm
        except ImportError as e:
            raise ImportError(
                "rollout.engine=vllm needs the vllm package on a GPU machine (pip install 'fade[gpu]'); "
                "use rollout.engine=hf on the CPU"
            ) from e
        if not torch.cuda.is_available():
            raise RuntimeError("rollout.engine=vllm needs a CUDA GPU; use rollout.engine=hf on the CPU")
        target = getattr(model, "module", model)
        path = model_path or getattr(target, "name_or_path", None) or getattr(target.config, "_name_or_path", None)
        if not path or not Path(path).is_dir():
            raise ValueError(f"vllm engine: the policy's checkpoint folder is unknown or missing ({path!r}); pass model_path=")
        self.vllm = vllm
        self.tokenizer = tokenizer
        extra: dict[str, Any] = {}
        if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            # colocated with trainer ranks: vLLM joins the launcher's process group instead of spawning workers
            extra = {"distributed_executor_backend": "external_launcher", "seed": torch.distributed.get_rank()}
        self.llm = vllm.LLM(
            **extra,
            model=str(path),
            tokenizer=str(path),
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            max_model_len=max_model_len,
            enable_prefix_caching=True,
            enforce_eager=enforce_eager,
        )
        eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_ids, default=0)

    # ---------------------------------------------------------------------------------- weights
    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load the trainer's current parameters into the vLLM model and drop cached prefixes."""
        target = getattr(model, "module", model)
        params = list(target.parameters())
        if any(hasattr(p, "ds_id") for p in params):  # DeepSpeed ZeRO-3: gather the partitioned parameters
            import deepspeed

            with deepspeed.zero.GatheredParameters(params):
                weights = [(name, p.detach().clone()) for name, p in target.named_parameters()]
        else:
            weights = [(name, p.detach()) for name, p in target.state_dict().items()]
        if hasattr(self.llm, "apply_model"):  # vLLM >= 0.9 (V1 engine)
            self.llm.apply_model(lambda m: m.load_weights(weights))
        else:  # V0 engine: the driver worker's model directly
            self.llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(weights)
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()

    # ---------------------------------------------------------------------------------- sampling
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
        t0 = time.perf_counter()
        prompt_ids = encode_prompts(self.tokenizer, prompts)
        if not prompts or max_new_tokens <= 0:
            return empty_batch(prompts, prompt_ids, n, self.pad_id)
        seeds = prompt_seeds(seed, len(prompts))
        stops = [list(s) for s in stop] if stop is not None else [[] for _ in prompts]
        # vLLM cuts the text before a stop sequence and keeps the token that completed it, as apply_stops does
        params = [
            self.vllm.SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, logprobs=0,
                                     seed=s, skip_special_tokens=True, stop=st or None)
            for s, st in zip(seeds, stops, strict=True)
        ]
        requests = [{"prompt_token_ids": ids} for ids in prompt_ids]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        rows: list[list[int]] = []
        lps: list[list[float]] = []
        finish: list[str] = []
        texts: list[str] = []
        for out in outputs:
            if len(out.outputs) != n:
                raise RuntimeError(f"vllm returned {len(out.outputs)} completions for a prompt, expected {n}")
            for comp in out.outputs:
                ids = list(comp.token_ids)
                rows.append(ids)
                lps.append([_sampled_logprob(step, tok) for step, tok in zip(comp.logprobs or [], ids, strict=False)])
                finish.append("stop" if comp.finish_reason == "stop" else "length")
                texts.append(comp.text)
        width = max((len(r) for r in rows), default=0)
        num = len(rows)
        ids_t = torch.full((num, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((num, width), dtype=torch.bool)
        lp_t = torch.zeros((num, width))
        for i, (r, lp) in enumerate(zip(rows, lps, strict=True)):
            ids_t[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = True
            lp_t[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
        return RolloutBatch(
            prompts=list(prompts), prompt_token_ids=prompt_ids, n=n, prompt_index=torch.arange(num) // n,
            completion_ids=ids_t, completion_mask=mask, logprobs=lp_t, lengths=mask.sum(1), finish_reasons=finish,
            texts=texts, entropies=None, pad_token_id=self.pad_id, timings={"generate_s": time.perf_counter() - t0},
        )


def _sampled_logprob(step: Any, token: int) -> float:
    """The log-prob of the sampled ``token`` from one step of vLLM's ``logprobs`` output."""
    entry = step.get(token) if hasattr(step, "get") else None
    if entry is None:
        raise RuntimeError(f"vllm did not return the log-prob of the sampled token {token}")
    return float(getattr(entry, "logprob", entry))
