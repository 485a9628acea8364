"""Ranks and the optimizer: the process group torchrun set up, and AdamW or DeepSpeed ZeRO over it.

Under torchrun each rank samples and scores a strided share of every step's groups; rewards, lengths and
statistics are all-gathered (:meth:`Dist.gather`), so advantages, FADE's observations and the metrics are
computed from the whole batch identically on every rank. Each rank back-propagates its share of every
minibatch with the *global* token / sequence denominators, scaled by the world size because DeepSpeed
(ZeRO 0-3) or the plain all-reduce of :class:`UpdateBackend` averages gradients over ranks: 2 ranks
compute the same update as 1 rank, up to float round-off.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass
class Dist:
    """Rank / world of this process (1 / 0 without torchrun) and the collectives the trainer uses."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def gather(self, obj: Any) -> list[Any]:
        if self.world == 1:
            return [obj]
        out: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()

    def broadcast_object(self, obj: Any) -> Any:
        if self.world == 1:
            return obj
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]


def init_distributed(device: torch.device) -> Dist:
    """Join the process group torchrun/deepspeed set up (env WORLD_SIZE > 1); gloo on CPU, nccl on CUDA."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return Dist(torch.distributed.get_rank(), torch.distributed.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


class UpdateBackend:
    """Optimizer wrapper: plain AdamW (one or several ranks, gradients all-reduced) or DeepSpeed ZeRO."""

    def __init__(self, model: torch.nn.Module, tcfg: Any, dist: Dist, deepspeed_config: str | None) -> None:
        self.dist, self.grad_clip, self.engine = dist, tcfg.grad_clip, None
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=tcfg.lr, weight_decay=tcfg.weight_decay, betas=(0.9, 0.999), eps=1e-8)
        if deepspeed_config:
            import deepspeed

            ds = json.loads(Path(deepspeed_config).read_text())
            ds["train_micro_batch_size_per_gpu"] = 1
            ds["gradient_accumulation_steps"] = 1
            ds["train_batch_size"] = dist.world
            ds["gradient_clipping"] = tcfg.grad_clip
            ds.setdefault("zero_allow_untested_optimizer", True)
            ds.pop("optimizer", None)
            ds.pop("scheduler", None)
            self.engine, self.optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds)
            self.model = self.engine.module
            self.zero_stage = int(ds.get("zero_optimization", {}).get("stage", 0))
        else:
            self.model, self.optimizer, self.zero_stage = model, optimizer, -1
        self.base_lr = tcfg.lr

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def backward(self, loss: torch.Tensor) -> None:
        if self.engine is not None:
            self.engine.backward(loss)
        else:
            loss.backward()

    def step(self) -> float:
        """All-reduce (plain multi-rank), clip, AdamW step, zero grads; returns the pre-clip grad norm."""
        if self.engine is not None:
            self.engine.step()
            norm = self.engine.get_global_grad_norm()
            return float(norm) if norm is not None else math.nan
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.dist.world > 1:
            for p in params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                torch.distributed.all_reduce(p.grad)
                p.grad.div_(self.dist.world)
        norm = torch.nn.utils.clip_grad_norm_(params, self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def full_weight(self, param: torch.nn.Parameter) -> torch.Tensor:
        """A detached full copy of ``param`` (gathered under ZeRO-3)."""
        if self.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters([param]):
                return param.detach().clone()
        return param.detach().clone()

    def save(self, folder: Path) -> dict[str, Any]:
        """Optimizer state: returned for trainer_state.pt (plain), or written by DeepSpeed to ``folder``."""
        if self.engine is not None:
            self.engine.save_checkpoint(str(folder / "deepspeed"), tag="state", save_latest=False)
            return {}
        return {"optimizer": self.optimizer.state_dict()}

    def load(self, folder: Path, state: dict[str, Any]) -> None:
        if self.engine is not None:
            self.engine.load_checkpoint(str(folder / "deepspeed"), tag="state", load_lr_scheduler_states=False)
        else:
            self.optimizer.load_state_dict(state["optimizer"])
