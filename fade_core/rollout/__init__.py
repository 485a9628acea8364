"""Rollout engines: the interface and batch (:mod:`fade_core.rollout.base`) and the factory that builds one.

The engines themselves (:mod:`~fade_core.rollout.hf`, :mod:`~fade_core.rollout.vllm`) import the interface,
never this package's factory, so the package has no import circle; vllm is imported only when asked for.
"""

from __future__ import annotations

from typing import Any

from fade_core.rollout.base import RolloutBatch, RolloutEngine, prompt_seeds

ENGINE_NAMES = ("hf", "vllm")


def build_engine(name: str, model: Any, tokenizer: Any, **opts: Any) -> RolloutEngine:
    """The engine called ``name`` ("hf" or "vllm") over ``model`` and ``tokenizer``.

    ``opts`` go to the engine's constructor: for "hf" ``batch_size`` (max sequences per forward, 0 =
    all); for "vllm" ``tensor_parallel_size``, ``gpu_memory_utilization``, ``dtype``, ``max_model_len``.
    The vllm engine is imported only when asked for, so fade runs without vllm installed.
    """
    if name == "hf":
        from fade_core.rollout.hf import HFEngine

        return HFEngine(model, tokenizer, **opts)
    if name == "vllm":
        from fade_core.rollout.vllm import VLLMEngine

        return VLLMEngine(model, tokenizer, **opts)
    raise ValueError(f"unknown rollout engine {name!r}; expected one of {ENGINE_NAMES}")


__all__ = ["ENGINE_NAMES", "RolloutBatch", "RolloutEngine", "build_engine", "prompt_seeds"]
