"""Checkpoints of a training run: written whole or not at all, and resumed exactly.

``checkpoints/step-N/`` (fade_core.runs.checkpoint_dir) is written to ``step-N.tmp`` and renamed, so a crash
never leaves a half checkpoint: the policy in HF format (safetensors, loadable without fade) and
``trainer_state.pt`` with the optimizer (DeepSpeed: its own ``deepspeed/`` folder), the schedule position,
the RNG states, the prompt sampler's position, the advantage's state, the KL coefficient and the output
head's initial weights. Rollout seeds are a function of (run seed, step, round, prompt slot), so a run
killed and resumed reproduces the per-step records and final weights of an uninterrupted run.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fade_core import models
from fade_core.integrity import DamagedFile
from fade_core.runs import STATE_FILE, seal_checkpoint, verify_checkpoint
from fade_core.train.distributed import Dist, UpdateBackend


def rng_state() -> dict[str, Any]:
    """Every RNG a step may draw from: torch (CPU and CUDA), numpy's global, Python's."""
    return {
        "torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(rng: dict[str, Any]) -> None:
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def save_checkpoint(final: Path, state: dict[str, Any], *, model: torch.nn.Module, tokenizer: Any,
                    backend: UpdateBackend, dist: Dist) -> Path:
    """Write the policy, the optimizer and ``state`` (the trainer's, plus the RNG states) to ``final``
    through ``final.tmp`` and a rename; every rank calls it (ZeRO gathers and shards need them all)."""
    tmp = final.with_name(final.name + ".tmp")
    if dist.main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    if backend.zero_stage == 3:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(model.parameters())):
            if dist.main:
                models.save(model, tokenizer, tmp)
    elif dist.main:
        models.save(model, tokenizer, tmp)
    opt_state = backend.save(tmp)
    if dist.main:
        torch.save({**state, "rng": rng_state(), **opt_state}, tmp / STATE_FILE)
        seal_checkpoint(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    dist.barrier()
    return final


def tied_to_loaded(model: torch.nn.Module, loaded: dict[str, torch.Tensor]) -> set[str]:
    """Names of ``model``'s parameters that share their tensor with a parameter named in ``loaded``: tied
    weights (e.g. ``lm_head.weight`` of a ``tie_word_embeddings`` model), which ``save_pretrained`` writes
    once, under the name it keeps, so a checkpoint restores them through that one."""
    names_by_tensor: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names_by_tensor.setdefault(id(param), []).append(name)
    tied: set[str] = set()
    for names in names_by_tensor.values():
        if len(names) > 1 and any(n in loaded for n in names):
            tied.update(n for n in names if n not in loaded)
    return tied


def load_checkpoint(folder: Path, *, model: torch.nn.Module, backend: UpdateBackend, dist: Dist) -> dict[str, Any]:
    """Restore the weights, the optimizer and the RNG states from ``folder``; return the trainer state
    (step, sampler, advantage, kl_coef, base_validity, head_w0, ...) for the caller to restore. Every file is
    checked against the checkpoint's SHA256SUMS first; a damaged or unreadable file raises
    :class:`~fade_core.integrity.DamagedFile` naming it, before anything is restored."""
    from safetensors.torch import load_file

    verify_checkpoint(folder)
    state = _read(folder / STATE_FILE, lambda p: torch.load(p, weights_only=False))
    weights = _read(folder / "model.safetensors", lambda p: load_file(str(p)))
    if backend.zero_stage == 3:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=0):
            if dist.main:
                model.load_state_dict(weights, strict=False)
    else:
        missing, unexpected = model.load_state_dict(weights, strict=False)
        tied = tied_to_loaded(model, weights)
        really_missing = [m for m in missing if "rotary" not in m and m not in tied]
        if unexpected or really_missing:
            raise ValueError(f"{folder}: checkpoint weights do not match the model "
                             f"(missing {really_missing}, unexpected {unexpected})")
    backend.load(folder, state)
    set_rng_state(state["rng"])
    return state


def _read(path: Path, load: Any) -> Any:
    """``load(path)``; a library error (a truncated or garbled file) becomes DamagedFile naming the file."""
    if not path.is_file():
        raise DamagedFile(path, "missing")
    try:
        return load(path)
    except (OSError, RuntimeError, ValueError, EOFError, KeyError) as e:
        raise DamagedFile(path, f"cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from e
