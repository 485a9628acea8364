"""The RL trainer: group sampling, verifiable rewards, a pluggable advantage, PPO updates, a full record.

One step of training (``Trainer.step``)::

    prompts   P problems from the training split (a seeded, resumable sampler over epochs)
    rollouts  G completions per prompt from the rollout engine (hf on the CPU, vllm on GPUs), with the
              sampling policy's per-token log-probs and entropies
    rewards   fade_core.verifiers.score_batch (countdown in-process; code in the sandbox)
    stats     batch solve rate and mean token entropy -> adv.observe(...)   (FADE reads its alpha, delta
              from them *before* the advantages of this batch are computed; other methods ignore it)
    advantage A = adv(rewards [P, G], mean_logprob=...), keep = adv.mask(...)   (fade_core.advantages)
    update    ppo_epochs x minibatches AdamW steps on the PPO clipped surrogate (fade_core.losses),
              gradient clipping, learning rate from a warm-up + constant/cosine schedule
    record    one row of metrics (spec: reward, solve-rate histogram, zero-variance share, m_S, m_F,
              entropy, clip fractions, KL, grad norm, alpha/delta, lengths, time split, tokens/s) to
              runs/<run_id>/metrics.jsonl and metrics.duckdb (table train_steps); every
              ``rank1_every`` steps the rank-1 fraction and effective rank of the output head's update

Method-specific sampling:
    * DAPO dynamic sampling: groups with zero reward variance are dropped and more prompts are sampled
      (rounds of P) until P informative groups are collected or ``max_gen_batches`` rounds were used;
      the update then runs on what was collected (the shortfall is logged as ``groups_used``).
    * CoDaPO: after the normal update, the top 25% of questions by w_q are repeated 4 times, given
      fresh rollouts from the updated policy, and used for a second update (same minibatching).

Method hints: a method's recommended loss aggregation and clip range (``adv.recommended()``: DAPO
token-mean with eps 0.2/0.28, Dr.GRPO seq-mean-token-sum-norm) take precedence over ``train.loss_agg``
/ ``eps_low`` / ``eps_high``; the clip range used is logged every step (eps_low, eps_high).

The log-probs of the "old" policy in the PPO ratio are the engine's sampling log-probs, so an
on-policy update (ppo_epochs = minibatches = 1) needs no extra forward pass: the ratio is exactly 1
and the loss reduces to REINFORCE with the advantage. They are recomputed by one no-grad forward pass
when they would not match the trainer's policy (top_p < 1, or an engine other than hf whose kernels
differ from the trainer's).

Shared-prefix forward: the G rollouts of a prompt share it, so the update runs the prompt once, with
gradient, repeats its KV cache over the group's rows and runs only the completion tokens. The result
is the same log-probs as a full forward over prompt+completion (up to float round-off) for ~1/G of the
prompt's cost; gradients flow back through the repeated cache into the prompt's activations. Rows
whose loss is identically zero (advantage 0 or dropped by the mask, with no KL or entropy term) are
skipped, but they still count in the loss denominators, so the gradient is exactly the full batch's.

KL coefficient from a target validity (``train.kl_target_validity`` = mu). With a binary reward r
(1 = valid / verified) and the KL-regularised objective E_pi[r] - beta KL(pi || pi_ref), the optimum is
the tilted reference pi*(y) = pi_ref(y) exp(r(y) / beta) / Z. Its validity rate is

    mu = A e^{1/beta} / (A e^{1/beta} + 1 - A),        A = P_{pi_ref}(r = 1),

so logit(mu) = logit(A) + 1/beta, i.e. beta = 1 / (logit(mu) - logit(A)). A is the base model's
validity measured before training (mean reward of G samples on P training prompts); mu must exceed
A (a KL penalty can only hold the policy *below* full optimisation, at a chosen validity).

Distributed: under torchrun each rank samples and scores a strided share of every step's groups;
rewards, lengths and statistics are all-gathered, so advantages, FADE's observations and the metrics
are computed from the whole batch identically on every rank. Each rank back-propagates its share of
every minibatch with the *global* token / sequence denominators, scaled by the world size because
DeepSpeed (ZeRO 0-3) or the plain all-reduce averages gradients over ranks: 2 ranks compute the same
update as 1 rank, up to float round-off.

Checkpoints (``checkpoints/step-N/``, written to a temporary folder and renamed, so a crash never
leaves a half checkpoint): the policy in HF format (safetensors) + ``trainer_state.pt`` with the
optimizer, the schedule position, RNG states, the prompt sampler position, the advantage's state, the
KL coefficient and the head's initial weights. Resume continues exactly: the rollout seeds are a
function of (run seed, step, round, prompt slot), so a run killed and resumed reproduces the same
per-step metrics and final weights as an uninterrupted run.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fade_core import advantages as adv_lib
from fade_core import decomposition, losses, models
from fade_core.data.prompts import prompt_text
from fade_core.metrics import effective_rank, rank1_fraction
from fade_core.models import cache_kwarg, output_cache
from fade_core.rollout import RolloutBatch, build_engine
from fade_core.runs import STATE_FILE, MetricsLog, checkpoint_dir, list_checkpoints, run_id, run_label

SEED_MOD = 2**31 - 1
TIMING_KEYS = ("time_rollout", "time_scoring", "time_update", "time_step", "time_log", "tokens_per_s")


# ============================================================================ inputs
def base_model_path(cfg: Any) -> str:
    """Where the policy starts: train.base_checkpoint, else the warm-started built-in model
    (warmstart.out_dir) for ``builtin:tiny``, else model.name_or_path (a local HF folder)."""
    if cfg.train.base_checkpoint:
        path = Path(cfg.train.base_checkpoint)
    elif cfg.model.name_or_path == models.BUILTIN_TINY:
        path = Path(cfg.warmstart.out_dir)
        if not (path / "config.json").exists():
            raise FileNotFoundError(
                f"the built-in base model {path}/ does not exist: run `fade warmstart` first "
                "(or set train.base_checkpoint / model.name_or_path)"
            )
    else:
        path = Path(cfg.model.name_or_path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"base model {path}: no config.json (not a Hugging Face model folder)")
    return str(path)


def load_problems(cfg: Any, problems_path: str | Path | None = None, split: str = "train") -> list[dict[str, Any]]:
    """Training problems (dict rows of the problem table) of ``train.benchmark``, split ``split``.

    Read from ``problems_path`` or ``<data.out_dir>/problems/<benchmark>.parquet``; countdown, when not
    prepared, is generated in-process from ``data.countdown`` (the same rows ``fade prepare`` writes).
    """
    from fade_core import data as data_lib
    from fade_core.data.schema import read_table, records

    bench = cfg.train.benchmark
    path = Path(problems_path) if problems_path else Path(cfg.data.out_dir) / "problems" / f"{bench}.parquet"
    if path.exists():
        table = read_table(path)
    elif bench == "countdown" and problems_path is None:
        table = data_lib.load("countdown", **data_lib.options_from_config("countdown", cfg.data))
    else:
        raise FileNotFoundError(f"problem table {path} does not exist: run `fade prepare` first")
    rows = [r for r in records(table) if r["split"] == split]
    if not rows:
        raise ValueError(f"{path}: no problems in split {split!r} of benchmark {bench!r}")
    return rows


class PromptSampler:
    """Draws problem indices: a fresh seeded permutation per epoch, consumed in order (resumable)."""

    def __init__(self, num: int, seed: int) -> None:
        if num < 1:
            raise ValueError("PromptSampler needs at least one problem")
        self.num, self.seed, self.epoch, self.pos = num, seed, 0, 0
        self._perm = self._permutation()

    def _permutation(self) -> list[int]:
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.num).tolist()

    def take(self, k: int) -> list[int]:
        out = []
        while len(out) < k:
            if self.pos >= self.num:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation()
            out.append(self._perm[self.pos])
            self.pos += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"num": self.num, "seed": self.seed, "epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["num"] != self.num:
            raise ValueError(f"sampler state is for {state['num']} problems, this run has {self.num}")
        self.seed, self.epoch, self.pos = state["seed"], state["epoch"], state["pos"]
        self._perm = self._permutation()


def rollout_seed(seed: int, step: int, round_: int, slot: int) -> int:
    """Seed of one prompt's rollouts: a function of (run seed, step, sampling round, prompt slot)."""
    return int(np.random.default_rng([seed, step, round_, slot]).integers(0, SEED_MOD))


# ============================================================================ schedules and KL
def lr_multiplier(step: int, total: int, warmup: int, schedule: str) -> float:
    """Learning-rate factor at RL step ``step`` (0-based): linear warm-up, then constant or cosine to 0."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, progress))))
    raise ValueError(f"unknown lr_schedule {schedule!r}")


def kl_coef_from_validity(mu: float, base_validity: float, clip: float = 1e-4) -> float:
    """beta = 1 / (logit mu - logit A) (module docstring); A is clipped to [clip, 1 - clip]."""
    a = min(max(base_validity, clip), 1 - clip)
    if not 0 < mu < 1:
        raise ValueError(f"train.kl_target_validity must be in (0, 1), got {mu}")
    gap = math.log(mu / (1 - mu)) - math.log(a / (1 - a))
    if gap <= 0:
        raise ValueError(
            f"train.kl_target_validity={mu} must exceed the base model's measured validity A={base_validity:.4f} "
            "(beta = 1/(logit mu - logit A) is only positive for mu > A)"
        )
    return 1.0 / gap


# ============================================================================ log-probs of the policy
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
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=width > 1)
    first = out.logits[:, -1][row_local]  # [B, V]: predicts completion token 0
    if width > 1:
        cache = output_cache(out)
        cache.batch_select_indices(row_local)
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


# ============================================================================ distributed
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


# ============================================================================ one batch of groups
@dataclass
class Groups:
    """A batch of groups: global problem indices and, for this rank's share, the rollouts.

    global_* fields hold the whole batch (all ranks), in global group order; ``local`` lists the global
    positions of this rank's groups, in the order of ``batch``'s prompts.
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

    def select(self, positions: Sequence[int]) -> Groups:
        """The sub-batch of these global positions (keeps each rank's local share consistent)."""
        pos = list(positions)
        local_set = {p: i for i, p in enumerate(self.local)}
        keep_local = [p for p in pos if p in local_set]
        batch = _select_batch(self.batch, [local_set[p] for p in keep_local]) if self.batch is not None else None
        index = torch.tensor(pos, dtype=torch.long)
        return Groups(
            problems=[self.problems[p] for p in pos],
            rewards=self.rewards[index], passed=self.passed[index], lengths=self.lengths[index],
            mean_logprob=self.mean_logprob[index], entropy_sum=self.entropy_sum[index],
            truncated=self.truncated[index],
            local=[pos.index(p) for p in keep_local], batch=batch,
            gen_seconds=self.gen_seconds, score_seconds=self.score_seconds,
        )


def _select_batch(b: RolloutBatch, groups: Sequence[int]) -> RolloutBatch:
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


def _concat_groups(parts: Sequence[Groups]) -> Groups:
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
        batch=_cat_batches(batches) if batches else parts[0].batch,
        gen_seconds=sum(p.gen_seconds for p in parts), score_seconds=sum(p.score_seconds for p in parts),
    )


def _cat_batches(bs: Sequence[RolloutBatch]) -> RolloutBatch:
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


# ============================================================================ the trainer
@dataclass
class TrainResult:
    """What a training run wrote."""

    run_id: str
    run_dir: Path
    steps: int
    checkpoints: list[Path] = field(default_factory=list)
    final_checkpoint: Path | None = None
    resumed_from: int | None = None
    seconds: float = 0.0
    last_metrics: dict[str, Any] = field(default_factory=dict)


class Trainer:
    """An RL run from a config (see the module docstring). ``Trainer(cfg).train()`` does everything.

    problems: training rows (default: :func:`load_problems`); base_model: path (default:
    :func:`base_model_path`); run_dir: default ``<train.runs_dir>/<run_id>``; progress: a live rich bar
    on rank 0; stop_after: stop (without a final checkpoint) after this many steps of this process --
    for tests; on_step: callback(step, record) after each step.
    """

    def __init__(
        self,
        cfg: Any,
        *,
        problems: list[dict[str, Any]] | None = None,
        base_model: str | None = None,
        run_dir: str | Path | None = None,
        progress: bool = False,
        stop_after: int | None = None,
        on_step: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> None:
        self.cfg, self.tcfg, self.rcfg = cfg, cfg.train, cfg.rollout
        torch.set_flush_denormal(True)
        if cfg.compute.torch_threads > 0:
            torch.set_num_threads(cfg.compute.torch_threads)
        want = cfg.compute.device
        self.device = torch.device("cuda" if want == "cuda" or (want == "auto" and torch.cuda.is_available()) else "cpu")
        self.dist = init_distributed(self.device)
        if self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)
        self.run_id = run_id(cfg)
        self.run_dir = Path(run_dir) if run_dir else Path(self.tcfg.runs_dir) / self.run_id
        self.problems = problems if problems is not None else load_problems(cfg)
        self.base_model = base_model or base_model_path(cfg)
        self.progress, self.stop_after, self.on_step = progress, stop_after, on_step
        self.adv = adv_lib.build(self.tcfg.method, **self.tcfg.params)
        hints = self.adv.recommended()
        self.loss_agg = hints.get("loss_agg", self.tcfg.loss_agg)
        self.eps_low = hints.get("eps_low", self.tcfg.eps_low)
        self.eps_high = hints.get("eps_high", self.tcfg.eps_high)
        self.label = run_label(self.tcfg.method, self.tcfg.params, self.tcfg.label)
        self.skip_zero_rows = True  # rows whose loss is identically 0 skip the forward (exact; off for benchmarks)

    # ------------------------------------------------------------------------------ set-up
    def _setup(self) -> None:
        cfg = self.cfg
        model, self.tokenizer = models.load(self.base_model, dtype=cfg.model.dtype)
        model.to(self.device).train()
        self.backend = UpdateBackend(model, self.tcfg, self.dist, cfg.compute.deepspeed_config)
        self.model = self.backend.model
        self.pad_id = self.tokenizer.pad_token_id
        engine_opts: dict[str, Any] = {}
        if self.rcfg.engine == "vllm":
            engine_opts = dict(
                tensor_parallel_size=self.rcfg.tensor_parallel_size,
                gpu_memory_utilization=self.rcfg.gpu_memory_utilization,
                dtype=cfg.model.dtype,
            )
        self.engine = build_engine(self.rcfg.engine, self.model, self.tokenizer, **engine_opts)
        self.recompute_old = self.rcfg.engine != "hf" or self.rcfg.top_p < 1.0
        self.ref_model = None
        self.sampler = PromptSampler(len(self.problems), self.tcfg.seed)
        self.kl_coef = self.tcfg.kl_coef
        self.base_validity: float | None = None
        self.head_w0 = self.backend.full_weight(models.output_head(self.model)).cpu()
        self.prompts = [prompt_text(p) for p in self.problems]

    def _need_ref(self) -> bool:
        return self.tcfg.kl_coef > 0 or self.tcfg.kl_target_validity is not None

    def _load_ref(self) -> None:
        if self._need_ref() and self.ref_model is None:
            ref, _ = models.load(self.base_model, dtype=self.cfg.model.dtype)
            self.ref_model = ref.to(self.device).eval().requires_grad_(False)

    # ------------------------------------------------------------------------------ sampling + scoring
    def _sample_groups(self, problem_idx: Sequence[int], seeds: Sequence[int]) -> Groups:
        """Rollouts for this rank's strided share of ``problem_idx``, scored, then all-gathered."""
        from fade_core import verifiers

        g = self.tcfg.group_size
        local = list(range(self.dist.rank, len(problem_idx), self.dist.world))
        t0 = time.perf_counter()
        self.engine.sync_weights(self.model)  # vllm: push the current policy; hf: shares the model already
        batch = self.engine.generate(
            [self.prompts[problem_idx[i]] for i in local], g,
            temperature=self.rcfg.temperature, top_p=self.rcfg.top_p, max_new_tokens=self.rcfg.max_new_tokens,
            seed=[seeds[i] for i in local],
        )
        t1 = time.perf_counter()
        rows = [self.problems[problem_idx[i]] for i in local for _ in range(g)]
        scores = verifiers.score_batch(rows, batch.texts, workers=self.cfg.compute.workers or None) if rows else []
        t2 = time.perf_counter()
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
        payload = (local, rewards, passed, lengths, mean_lp, ent_sum, truncated, t1 - t0, t2 - t1)
        gathered = self.dist.gather(payload)
        p = len(problem_idx)
        out = {k: torch.zeros((p, g), dtype=dt) for k, dt in (
            ("rewards", torch.float64), ("passed", torch.bool), ("lengths", torch.long),
            ("mean_logprob", torch.float64), ("entropy_sum", torch.float64), ("truncated", torch.bool))}
        for loc, *tensors, _, _ in gathered:
            index = torch.tensor(loc, dtype=torch.long)
            for key, t in zip(out, tensors, strict=True):
                out[key][index] = t
        groups = Groups(
            problems=list(problem_idx), local=local, batch=batch,
            gen_seconds=max(x[-2] for x in gathered), score_seconds=max(x[-1] for x in gathered), **out,
        )
        groups.rewards = self.adv.shape_rewards(groups.rewards, groups.lengths, self.rcfg.max_new_tokens)
        return groups

    def _seeds(self, step: int, round_: int, count: int) -> list[int]:
        return [rollout_seed(self.tcfg.seed, step, round_, i) for i in range(count)]

    def _collect(self, step: int) -> tuple[Groups, Groups, int]:
        """(first sampled batch, batch to train on, sampling rounds) -- DAPO refills, others use the first."""
        p = self.tcfg.prompts_per_step
        first = self._sample_groups(self.sampler.take(p), self._seeds(step, 0, p))
        keep = self.adv.keep_groups(first.rewards)
        if keep is None:
            return first, first, 1
        kept, rounds, current = [], 1, first
        while True:
            kept.append(current.select([i for i, k in enumerate(keep.tolist()) if k]))
            if sum(len(k.problems) for k in kept) >= p or rounds >= self.adv.max_sampling_rounds:
                break
            current = self._sample_groups(self.sampler.take(p), self._seeds(step, rounds, p))
            keep = self.adv.keep_groups(current.rewards)
            rounds += 1
        train = _concat_groups(kept)
        if len(train.problems) > p:
            train = train.select(range(p))
        train.gen_seconds = sum(k.gen_seconds for k in kept)
        train.score_seconds = sum(k.score_seconds for k in kept)
        return first, train, rounds

    # ------------------------------------------------------------------------------ the update
    def _update(self, groups: Groups, advantages: torch.Tensor, keep: torch.Tensor) -> dict[str, Any]:
        """ppo_epochs x minibatches optimizer steps on ``groups``; returns loss statistics."""
        t = self.tcfg
        p, g = advantages.shape
        batch = groups.batch
        stats = losses.LossStats()
        grad_norms, loss_values = [], []
        need_terms = self.kl_coef > 0 or t.entropy_coef > 0
        if self.kl_coef > 0:
            self._load_ref()
        old_lp = batch.logprobs if batch is not None else None
        if self.recompute_old and batch is not None and batch.num_samples:
            old_lp = self._logprobs_no_grad(self.model, batch)
        ref_lp = self._logprobs_no_grad(self.ref_model, batch) if (self.ref_model is not None and batch is not None and batch.num_samples) else None
        local_pos = {gpos: i for i, gpos in enumerate(groups.local)}
        chunks = [c.tolist() for c in torch.arange(p).chunk(min(t.minibatches, max(p, 1)))] if p else []
        for _epoch in range(t.ppo_epochs):
            for chunk in chunks:
                rows_mask = keep[chunk]  # [c, G]
                lens = groups.lengths[chunk]
                num_tokens = float((lens * rows_mask).sum())
                num_seqs = float(((lens > 0) & rows_mask).sum())
                mine = [(gpos, local_pos[gpos]) for gpos in chunk if gpos in local_pos]
                rows = [
                    (gpos, li * g + j) for gpos, li in mine for j in range(g)
                    if bool(keep[gpos, j]) and int(groups.lengths[gpos, j]) > 0
                    and (need_terms or not self.skip_zero_rows or float(advantages[gpos, j]) != 0.0)
                ]
                if rows and num_tokens > 0:
                    idx = torch.tensor([r for _, r in rows], dtype=torch.long)
                    adv_rows = torch.tensor([float(advantages[gpos, r % g]) for gpos, r in rows])
                    ids = batch.completion_ids[idx]
                    width = int(batch.lengths[idx].max())
                    ids, mask = ids[:, :width], batch.completion_mask[idx, :width]
                    lp, ent = completion_logprobs(
                        self.model, batch.prompt_token_ids, batch.prompt_index[idx], ids,
                        pad_id=self.pad_id, temperature=self.rcfg.temperature, with_entropy=t.entropy_coef > 0,
                    )
                    dev = lp.device
                    loss, st = losses.policy_loss(
                        lp, old_lp[idx, :width].to(dev), adv_rows.to(dev), mask.to(dev),
                        eps_low=self.eps_low, eps_high=self.eps_high, dual_clip=t.dual_clip, agg=self.loss_agg,
                        norm_len=self.rcfg.max_new_tokens, num_tokens=num_tokens, num_seqs=num_seqs,
                        ref_logprobs=ref_lp[idx, :width].to(dev) if ref_lp is not None else None,
                        kl_coef=self.kl_coef, kl_estimator=t.kl_estimator,
                        entropy=ent if ent is not None else (batch.entropies[idx, :width].to(dev) if batch.entropies is not None else None),
                        entropy_coef=t.entropy_coef,
                    )
                    stats.add(st)
                    loss = loss * self.dist.world
                else:
                    loss = self._zero_loss()
                self.backend.backward(loss)
                grad_norms.append(self.backend.step())
                loss_values.append(float(loss.detach()) / self.dist.world)
        total = self._sum_stats(stats)
        out = total.means()
        out["grad_norm"] = float(np.mean(grad_norms)) if grad_norms else math.nan
        out["grad_norm_max"] = float(np.max(grad_norms)) if grad_norms else math.nan
        out["loss"] = float(np.sum(self.dist.gather(float(np.mean(loss_values)) if loss_values else 0.0)))
        out["optimizer_steps"] = len(grad_norms)
        return out

    def _zero_loss(self) -> torch.Tensor:
        """A zero loss through a real (dummy) forward of the same structure as a contributing one.

        A rank with nothing to contribute to a minibatch must still call backward (collectives), and
        under ZeRO-2 its gradients must become ready in the same order as on the other ranks (they are
        reduced in buckets filled in hook order), so it runs the same prompt + completion forward on one
        dummy row and multiplies by 0.
        """
        start = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.pad_id
        lp, _ = completion_logprobs(
            self.model, [[start]], torch.zeros(1, dtype=torch.long), torch.full((1, 2), self.pad_id, dtype=torch.long),
            pad_id=self.pad_id, temperature=self.rcfg.temperature,
        )
        return lp.sum() * 0.0

    def _sum_stats(self, stats: losses.LossStats) -> losses.LossStats:
        total = losses.LossStats()
        for s in self.dist.gather(stats):
            total.add(s)
        return total

    @torch.no_grad()
    def _logprobs_no_grad(self, model: torch.nn.Module, batch: RolloutBatch) -> torch.Tensor:
        out = torch.zeros_like(batch.logprobs)
        if batch.completion_ids.shape[1] == 0:
            return out
        chunk = max(1, 4096 // max(batch.n, 1)) * batch.n
        for s in range(0, batch.num_samples, chunk):
            idx = torch.arange(s, min(s + chunk, batch.num_samples))
            lp, _ = completion_logprobs(
                model, batch.prompt_token_ids, batch.prompt_index[idx], batch.completion_ids[idx],
                pad_id=self.pad_id, temperature=self.rcfg.temperature,
            )
            out[idx] = lp.float().cpu() * batch.completion_mask[idx]
        return out

    # ------------------------------------------------------------------------------ one step
    def _advantages(self, groups: Groups) -> tuple[torch.Tensor, torch.Tensor]:
        ctx = {"mean_logprob": groups.mean_logprob}
        return self.adv(groups.rewards, **ctx).to(torch.float64), self.adv.mask(groups.rewards, **ctx)

    def step(self, step: int) -> dict[str, Any]:
        """Run RL step ``step`` (1-based) and return its metrics record."""
        t_step = time.perf_counter()
        t = self.tcfg
        lr = t.lr * lr_multiplier(step - 1, t.steps, t.warmup_steps, t.lr_schedule)
        self.backend.set_lr(lr)
        measure_rank1 = step % t.rank1_every == 0
        head_before = self.backend.full_weight(models.output_head(self.model)).cpu() if measure_rank1 else None

        first, groups, rounds = self._collect(step)
        # batch statistics of what the policy produced this step (the first sampling round)
        tokens = first.lengths.sum().item()
        solve_rate = float(first.passed.to(torch.float64).mean()) if first.passed.numel() else math.nan
        entropy = float(first.entropy_sum.sum() / max(tokens, 1))
        self.adv.observe(solve_rate=solve_rate, entropy=entropy)
        advantages, keep = self._advantages(groups)
        t_update = time.perf_counter()
        upd = self._update(groups, advantages, keep)
        extra = {}
        again = self.adv.resample_groups(groups.rewards, mean_logprob=groups.mean_logprob) if groups.problems else []
        if again:
            extra = self._second_update(step, groups, again)
        t_done = time.perf_counter()

        record = self._record(step, lr, first, groups, rounds, advantages, keep, upd, extra)
        if measure_rank1:
            head_now = self.backend.full_weight(models.output_head(self.model)).cpu()
            record["rank1_frac_step"] = rank1_fraction(head_now - head_before)
            record["eff_rank_step"] = effective_rank(head_now - head_before)
            record["rank1_frac"] = rank1_fraction(head_now - self.head_w0)
            record["eff_rank"] = effective_rank(head_now - self.head_w0)
        gen_s = groups.gen_seconds + extra.get("resample_gen_seconds", 0.0)
        score_s = groups.score_seconds + extra.get("resample_score_seconds", 0.0)
        record["time_rollout"] = gen_s
        record["time_scoring"] = score_s
        record["time_update"] = t_done - t_update - extra.get("resample_gen_seconds", 0.0) - extra.get("resample_score_seconds", 0.0)
        record["time_step"] = time.perf_counter() - t_step
        record["tokens_per_s"] = float(groups.lengths.sum()) / max(record["time_step"], 1e-9)
        return record

    def _second_update(self, step: int, groups: Groups, positions: list[int]) -> dict[str, Any]:
        """Fresh rollouts of the groups at ``positions`` (Advantage.resample_groups) and a second update."""
        chosen = [groups.problems[i] for i in positions]
        second = self._sample_groups(chosen, self._seeds(step, 1000, len(chosen)))
        adv2, keep2 = self._advantages(second)
        upd = self._update(second, adv2, keep2)
        return {
            "resample_groups": len(chosen),
            "resample_reward_mean": float(second.rewards.mean()),
            "resample_loss": upd["loss"],
            "resample_gen_seconds": second.gen_seconds,
            "resample_score_seconds": second.score_seconds,
        }

    def _record(
        self, step: int, lr: float, first: Groups, groups: Groups, rounds: int,
        advantages: torch.Tensor, keep: torch.Tensor, upd: dict[str, Any], extra: dict[str, Any],
    ) -> dict[str, Any]:
        g = self.tcfg.group_size
        passed = first.passed.to(torch.float64)
        per_group = passed.sum(1).long() if passed.numel() else torch.zeros(0, dtype=torch.long)
        hist = torch.bincount(per_group, minlength=g + 1).tolist() if per_group.numel() else [0] * (g + 1)
        zero_var = adv_lib.zero_variance_groups(first.rewards) if first.rewards.numel() else torch.zeros(0, dtype=torch.bool)
        if groups.rewards.numel():
            totals = decomposition.batch_totals(groups.rewards, advantages, keep)
            m_s, m_f, ratio = totals.m_s, totals.m_f, float(totals.ratio)
        else:
            m_s = m_f = ratio = math.nan
        lengths = first.lengths.to(torch.float64)
        tokens = float(first.lengths.sum())
        adv_kept = advantages[keep] if keep.any() else torch.zeros(0, dtype=torch.float64)
        state = self.adv.state_record()
        rec: dict[str, Any] = {
            "run_id": self.run_id, "method": self.label, "seed": self.tcfg.seed, "step": step,
            "lr": lr,
            "reward_mean": float(first.rewards.mean()) if first.rewards.numel() else math.nan,
            "solve_rate": float(passed.mean()) if passed.numel() else math.nan,
            "solve_hist": hist,
            "zero_var_frac": float(zero_var.to(torch.float64).mean()) if zero_var.numel() else math.nan,
            "all_fail_frac": float((per_group == 0).to(torch.float64).mean()) if per_group.numel() else math.nan,
            "all_pass_frac": float((per_group == g).to(torch.float64).mean()) if per_group.numel() else math.nan,
            "m_s": m_s, "m_f": m_f, "mass_ratio": ratio,
            # Cov(A, log pi) of the entropy-drift formula: over the kept rollouts, the advantage against the
            # rollout's per-token mean log-prob (per token, like `entropy`; E[log pi] = -H then holds)
            "cov_adv_logprob": float(decomposition.adv_logprob_covariance(advantages, groups.mean_logprob, keep))
            if groups.rewards.numel() else math.nan,
            "adv_mean": float(adv_kept.mean()) if adv_kept.numel() else math.nan,
            "adv_abs_mean": float(adv_kept.abs().mean()) if adv_kept.numel() else math.nan,
            "kept_frac": float(keep.to(torch.float64).mean()) if keep.numel() else math.nan,
            "entropy": float(first.entropy_sum.sum() / max(tokens, 1.0)),
            "alpha": state.get("alpha", math.nan),
            "delta": state.get("delta", math.nan),
            "len_mean": float(lengths.mean()) if lengths.numel() else math.nan,
            "len_max": float(lengths.max()) if lengths.numel() else math.nan,
            "len_min": float(lengths.min()) if lengths.numel() else math.nan,
            "truncated_frac": float(first.truncated.to(torch.float64).mean()) if first.truncated.numel() else math.nan,
            "groups_used": len(groups.problems),
            "sampling_rounds": rounds,
            "kl_coef": self.kl_coef,
            "eps_low": self.eps_low,
            "eps_high": self.eps_high,
        }
        rec.update({k: v for k, v in state.items() if k not in rec})
        rec.update(upd)
        rec.update({k: v for k, v in extra.items() if not k.endswith("_seconds")})
        for key in ("rank1_frac", "eff_rank", "rank1_frac_step", "eff_rank_step"):
            rec.setdefault(key, math.nan)
        return rec

    # ------------------------------------------------------------------------------ base validity
    def _measure_base_validity(self) -> float:
        """Mean reward of the base policy on one batch of training prompts (seeded; before any update)."""
        p = self.tcfg.prompts_per_step
        idx = np.random.default_rng([self.tcfg.seed, 7]).permutation(len(self.problems))[:p].tolist()
        groups = self._sample_groups(idx, self._seeds(0, 0, len(idx)))
        return float(groups.rewards.mean())

    # ------------------------------------------------------------------------------ checkpoints
    def checkpoint_dirs(self) -> list[tuple[int, Path]]:
        """Complete checkpoints of this run, by step."""
        return list_checkpoints(self.run_dir, resumable=True)

    def save_checkpoint(self, step: int) -> Path:
        final = checkpoint_dir(self.run_dir, step)
        tmp = final.with_name(final.name + ".tmp")
        if self.dist.main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.dist.barrier()
        if self.backend.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.model.parameters())):
                if self.dist.main:
                    models.save(self.model, self.tokenizer, tmp)
        elif self.dist.main:
            models.save(self.model, self.tokenizer, tmp)
        opt_state = self.backend.save(tmp)
        if self.dist.main:
            state = {
                "step": step,
                "run_id": self.run_id,
                "schedule": {"lr": self.tcfg.lr, "warmup_steps": self.tcfg.warmup_steps, "lr_schedule": self.tcfg.lr_schedule},
                "sampler": self.sampler.state_dict(),
                "advantage": self.adv.state_dict(),
                "kl_coef": self.kl_coef,
                "base_validity": self.base_validity,
                "head_w0": self.head_w0,
                "rng": {
                    "torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                },
                **opt_state,
            }
            torch.save(state, tmp / STATE_FILE)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        self.dist.barrier()
        return final

    def load_checkpoint(self, folder: Path) -> int:
        """Restore weights, optimizer, sampler, advantage, RNG; returns the checkpoint's step."""
        from safetensors.torch import load_file

        state = torch.load(folder / STATE_FILE, weights_only=False)
        weights = load_file(str(folder / "model.safetensors"))
        target = self.model
        if self.backend.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(target.parameters()), modifier_rank=0):
                if self.dist.main:
                    target.load_state_dict(weights, strict=False)
        else:
            missing, unexpected = target.load_state_dict(weights, strict=False)
            if unexpected or [m for m in missing if "rotary" not in m]:
                raise ValueError(f"{folder}: checkpoint weights do not match the model (missing {missing}, unexpected {unexpected})")
        self.backend.load(folder, state)
        self.sampler.load_state_dict(state["sampler"])
        self.adv.load_state_dict(state["advantage"])
        self.kl_coef = state["kl_coef"]
        self.base_validity = state["base_validity"]
        self.head_w0 = state["head_w0"]
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        if rng.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        return int(state["step"])

    # ------------------------------------------------------------------------------ the loop
    def train(self) -> TrainResult:
        """Train (resuming from the latest complete checkpoint of this run dir if there is one)."""
        from fade_core import config as fconfig

        t0 = time.perf_counter()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._setup()
        log = MetricsLog(self.run_dir)
        start, resumed = 0, None
        ckpts = self.checkpoint_dirs()
        if ckpts:
            start = resumed = self.load_checkpoint(ckpts[-1][1])
            if self.dist.main:
                log.truncate(start)
        elif self.dist.main:
            log.reset()
        if self.dist.main:
            fconfig.save(self.cfg, self.run_dir / "config.yaml")
        if start == 0 and self.tcfg.kl_target_validity is not None:
            self.base_validity = self._measure_base_validity()
            self.kl_coef = kl_coef_from_validity(self.tcfg.kl_target_validity, self.base_validity)
        result = TrainResult(self.run_id, self.run_dir, self.tcfg.steps, resumed_from=resumed)
        bar = _ProgressBar(self.tcfg.steps, start, self.label) if (self.progress and self.dist.main) else None
        done = 0
        try:
            for step in range(start + 1, self.tcfg.steps + 1):
                record = self.step(step)
                t_log = time.perf_counter()
                if self.dist.main:
                    record["time_log"] = 0.0
                    log.append(record)
                    record["time_log"] = time.perf_counter() - t_log
                if bar is not None:
                    bar.update(step, record)
                if self.on_step is not None:
                    self.on_step(step, record)
                result.last_metrics = record
                if step % self.tcfg.checkpoint_every == 0 or step == self.tcfg.steps:
                    result.checkpoints.append(self.save_checkpoint(step))
                done += 1
                if self.stop_after is not None and done >= self.stop_after:
                    break
        finally:
            log.close()
            if bar is not None:
                bar.close()
        if result.checkpoints:
            result.final_checkpoint = result.checkpoints[-1]
        result.seconds = time.perf_counter() - t0
        return result


class _ProgressBar:
    """A live rich bar: step, reward, entropy, alpha/delta, ETA."""

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

    def update(self, step: int, rec: dict[str, Any]) -> None:
        info = f"reward {rec['reward_mean']:.3f} H {rec['entropy']:.2f}"
        if not math.isnan(rec.get("alpha", math.nan)) or not math.isnan(rec.get("delta", math.nan)):
            info += f" a {rec['alpha']:.2f} d {rec['delta']:.2f}"
        self.progress.update(self.task, completed=step, info=info)

    def close(self) -> None:
        self.progress.stop()


def train(cfg: Any, **kwargs: Any) -> TrainResult:
    """Train one run from a validated Config (see :class:`Trainer` for keyword options)."""
    return Trainer(cfg, **kwargs).train()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fade_core.trainer --config run.yaml`` (what torchrun / deepspeed launch on every rank)."""
    import argparse

    from fade_core import config as fconfig

    ap = argparse.ArgumentParser(description="Train one fade RL run from a resolved config file.")
    ap.add_argument("--config", required=True, help="config.yaml (a resolved fade config)")
    ap.add_argument("--problems", default=None, help="problem table parquet (default: from the config)")
    ap.add_argument("--base-model", default=None, help="base model folder (default: from the config)")
    ap.add_argument("--run-dir", default=None, help="run folder (default: <train.runs_dir>/<run_id>)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="dotted override KEY=VALUE")
    ap.add_argument("--progress", action="store_true", help="live progress bar on rank 0")
    ap.add_argument("--stop-after", type=int, default=None, help="stop after this many steps (tests)")
    args = ap.parse_args(argv)
    cfg = fconfig.load(args.config, args.overrides)
    problems = load_problems(cfg, args.problems) if args.problems else None
    res = Trainer(cfg, problems=problems, base_model=args.base_model, run_dir=args.run_dir, progress=args.progress,
                  stop_after=args.stop_after).train()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({"run_id": res.run_id, "run_dir": str(res.run_dir), "steps": res.steps,
                          "final_checkpoint": str(res.final_checkpoint) if res.final_checkpoint else None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
