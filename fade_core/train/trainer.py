"""The training loop: :class:`Trainer` runs the steps of one RL run and writes its run folder.

One step (:meth:`Trainer.step`)::

    prompts   P problems from the training split (schedules.PromptSampler: seeded, resumable, by epochs),
              rendered once by fade_core.data.prompts.build_prompt (template, chat template, system message)
    rollouts  G completions per prompt from the rollout engine, seeded per prompt slot (schedules.step_seeds),
              cut at the template's stop sequences; budget rollout.max_new_tokens or the template's
    rewards   rewards.score_rollouts (fade_core.verifiers.score_batch: sandbox, math-verify, countdown) with a
              verdict per rollout, then adv.shape_rewards; all-gathered (groups.gather_groups)
    refill    adv.keep_groups drops groups and more prompts are sampled, up to adv.max_sampling_rounds rounds
    stats     batch solve rate and mean token entropy -> adv.observe(...)   (before this batch's advantages)
    advantage A = adv(rewards [P, G], mean_logprob=...), keep = adv.mask(...)
    update    ppo_epochs x minibatches optimizer steps on the PPO clipped surrogate (fade_core.losses) with
              the shared-prefix forward (policy.completion_logprobs); gradient clipping; lr from the schedule
    resample  adv.resample_groups: fresh rollouts of those groups and a second update (CoDaPO)
    record    record.step_record -> runs/<run_id>/metrics.jsonl + metrics.duckdb, then every StepLogger
              (the live trackers of tracking.*: TensorBoard events by default, train/loggers.py);
              one warning per run when most rollouts of a step hit the generation budget
    budget    ``rollouts`` (this step's samples: refill rounds and resampled groups included) adds to the run's
              total, logged as ``rollouts_total`` and kept in checkpoints; with train.max_rollouts the run
              ends (and checkpoints) after the step that reaches it, so a method that samples more per step
              takes fewer steps: budgets matched in rollouts, not steps

Method hints: a method's recommended loss aggregation and clip range (``adv.recommended()``) take
precedence over ``train.loss_agg`` / ``eps_low`` / ``eps_high``; the range used is logged every step.

The PPO "old" log-probs are the engine's sampling log-probs, so an on-policy update (ppo_epochs =
minibatches = 1) needs no extra forward pass: the ratio is exactly 1. They are recomputed by one no-grad
forward pass when they would not match the trainer's policy (top_p < 1, or an engine other than hf).
Rows whose loss is identically zero (advantage 0 or dropped by the mask, with no KL or entropy term) skip
the forward but still count in the loss denominators, so the gradient is exactly the full batch's.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fade_core import advantages as adv_lib
from fade_core import losses, models, plan
from fade_core.code_version import git_state
from fade_core.data.prompts import PromptStyle, build_prompt, generation_budget, prompt_record
from fade_core.integrity import DamagedFile
from fade_core.metrics import effective_rank, rank1_fraction
from fade_core.rollout import build_engine
from fade_core.runs import (
    ENGINE_FILE,
    PROMPT_FILE,
    MetricsLog,
    checkpoint_dir,
    load_verified,
    problems_digest,
    record_code_version,
    resume_candidates,
    run_id,
    run_label,
)
from fade_core.train import checkpoint as ckpt
from fade_core.train import rewards as rewards_lib
from fade_core.train.distributed import UpdateBackend, init_distributed
from fade_core.train.groups import Groups, concat_groups, gather_groups, local_share
from fade_core.train.loggers import tracking_loggers
from fade_core.train.policy import (
    batch_logprobs,
    completion_logprobs,
    logprob_gap_record,
    logprob_gap_sums,
    zero_loss,
)
from fade_core.train.probes import Probes
from fade_core.train.record import ProgressBar, StepLogger, step_record
from fade_core.train.schedules import (
    RESAMPLE_ROUND,
    PromptSampler,
    base_validity_prompts,
    kl_coef_from_validity,
    lr_multiplier,
    step_seeds,
)

log = logging.getLogger(__name__)
TRUNCATION_WARNING = 0.5
"""Warn (once per run) when more than this share of a step's rollouts hit the generation budget."""


def load_problems(cfg: Any, problems_path: str | Path | None = None, split: str = "train") -> list[dict[str, Any]]:
    """Training problems (dict rows of the problem table) of ``train.benchmark``, split ``split``.

    Read from ``problems_path`` or :func:`fade_core.plan.problem_path`; countdown, when not prepared, is
    generated in-process from ``data.countdown`` (the same rows ``fade prepare`` writes).
    """
    from fade_core import data as data_lib
    from fade_core.data.schema import read_table, records

    bench = cfg.train.benchmark
    path = Path(problems_path) if problems_path else plan.problem_path(cfg, bench)
    if path.exists():
        table = read_table(path)
    elif bench == "countdown" and problems_path is None:
        table = data_lib.load("countdown", **data_lib.options_from_config("countdown", cfg.data))
    else:
        raise FileNotFoundError(f"problem table {path} does not exist: run `fade prepare` first")
    rows = [r for r in records(table) if r["split"] == split]
    if not rows:
        raise ValueError(f"{path}: no problems in split {split!r} of benchmark {bench!r}")
    if split == "train" and cfg.train.levels is not None:
        rows = select_levels(rows, cfg.train.levels, str(path))
    if split == "train" and cfg.train.problem_pool is not None:
        rows = select_pool(rows, cfg.train.problem_pool, str(path))
    return rows


def select_pool(rows: list[dict[str, Any]], size: int, where: str = "") -> list[dict[str, Any]]:
    """The first ``size`` rows (config ``train.problem_pool``): RL's fixed pool of training problems. More than
    there are is an error naming the key and the count (after train.levels)."""
    if size > len(rows):
        raise ValueError(f"train.problem_pool: {size} problems asked, the training split has {len(rows)} (after "
                         "train.levels)" + (f" ({where})" if where else ""))
    return rows[:size]


def select_levels(rows: list[dict[str, Any]], levels: list[str], where: str = "") -> list[dict[str, Any]]:
    """The rows whose ``difficulty_level`` is one of ``levels`` (config ``train.levels``), in their order.

    A named level without rows is an error that names the key and the levels the rows have."""
    have = sorted({str(r.get("difficulty_level")) for r in rows})
    missing = [lv for lv in levels if lv not in have]
    if missing or not levels:
        raise ValueError(f"train.levels: {missing or levels} not among the training problems' levels {have}"
                         + (f" ({where})" if where else ""))
    wanted = set(levels)
    return [r for r in rows if str(r.get("difficulty_level")) in wanted]


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
    """An RL run from a validated Config. ``Trainer(cfg).train()`` does everything.

    problems: training rows (default: :func:`load_problems`); base_model: path (default:
    :func:`fade_core.plan.base_model_path`); run_dir: default ``<train.runs_dir>/<run_id>``; progress: a
    live rich bar on rank 0; loggers: more :class:`~fade_core.train.record.StepLogger` sinks of every
    step's record on rank 0 (besides the trackers ``tracking`` asks for, :mod:`fade_core.train.loggers`);
    stop_after: stop (without a final checkpoint) after this many steps of this process -- for tests;
    on_step: callback(step, record) after each step, on every rank.
    """

    def __init__(
        self,
        cfg: Any,
        *,
        problems: list[dict[str, Any]] | None = None,
        base_model: str | None = None,
        run_dir: str | Path | None = None,
        progress: bool = False,
        loggers: Sequence[StepLogger] = (),
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
        self.problems = problems if problems is not None else load_problems(cfg)
        self.run_id = run_id(cfg, problems_digest(self.problems))
        self.run_dir = Path(run_dir) if run_dir else Path(self.tcfg.runs_dir) / self.run_id
        self.base_model = base_model or plan.base_model_path(cfg)
        self.progress, self.loggers, self.stop_after, self.on_step = progress, list(loggers), stop_after, on_step
        self.adv = adv_lib.build(self.tcfg.method, **self.tcfg.params)
        hints = self.adv.recommended()
        self.loss_agg = hints.get("loss_agg", self.tcfg.loss_agg)
        self.eps_low = hints.get("eps_low", self.tcfg.eps_low)
        self.eps_high = hints.get("eps_high", self.tcfg.eps_high)
        self.label = run_label(self.tcfg.method, self.tcfg.params, self.tcfg.label)
        self.kl_estimator = losses.kl_estimator_for(self.tcfg.kl_estimator, self.tcfg.kl_target_validity is not None)
        self.skip_zero_rows = True  # rows whose loss is identically 0 skip the forward (exact; off for benchmarks)
        self._warned_truncation = False

    # ------------------------------------------------------------------------------ set-up
    def _setup(self) -> None:
        cfg = self.cfg
        model, self.tokenizer = load_verified(models.load, self.base_model, **models.load_options(cfg.model))
        if cfg.model.gradient_checkpointing:
            models.enable_activation_checkpointing(model)
        model.to(self.device).train()
        self.backend = UpdateBackend(model, self.tcfg, self.dist, cfg.compute.deepspeed_config)
        self.model = self.backend.model
        self.pad_id = self.tokenizer.pad_token_id
        self.engine = build_engine(self.rcfg.engine, self.model, self.tokenizer,
                                   **plan.engine_options(cfg, self.tcfg.seed))
        self.recompute_old = self.rcfg.engine != "hf" or self.rcfg.top_p < 1.0
        self.ref_model = None
        self.sampler = PromptSampler(len(self.problems), self.tcfg.seed)
        self.kl_coef = self.tcfg.kl_coef
        self.base_validity: float | None = None
        self.head_w0 = self.backend.full_weight(models.output_head(self.model)).cpu()
        self.rollouts_used = 0  # rollouts sampled so far (train.max_rollouts), kept in checkpoints
        self.prompt_style = PromptStyle.from_model_config(cfg.model)
        self.rendered = [build_prompt(p, self.tokenizer, self.prompt_style) for p in self.problems]
        self.prompts = [r.text for r in self.rendered]
        self.max_new_tokens = self.rcfg.max_new_tokens or generation_budget(self.rendered)
        eval_rows = load_problems(cfg, split=self.tcfg.eval_split) if self.tcfg.eval_every > 0 else None
        self.probes = Probes(cfg, self.model, self.tokenizer, self.problems, eval_rows, self.backend,
                             lambda p: build_prompt(p, self.tokenizer, self.prompt_style).text, self.max_new_tokens)

    def _save_prompts(self) -> None:
        """``prompt.json`` beside config.yaml: the prompt style, the resolved templates, the chat template
        and the first rendered prompt, with the generation budget and stops the run samples with."""
        rec = prompt_record(self.problems, self.rendered, self.tokenizer, self.prompt_style)
        rec["max_new_tokens"] = self.max_new_tokens
        (self.run_dir / PROMPT_FILE).write_text(json.dumps(rec, indent=1) + "\n")

    def _save_engine(self) -> None:
        """``engine.json`` beside config.yaml: the engine's own description (vllm: version, device, seeding mode,
        which can fall back from per-prompt to per-call seeds at the first call); rewritten with each checkpoint."""
        rec = self.engine.describe() if hasattr(self.engine, "describe") else {"engine": self.engine.name}
        (self.run_dir / ENGINE_FILE).write_text(json.dumps(rec, indent=1) + "\n")

    def _load_ref(self) -> None:
        if self.ref_model is None and (self.tcfg.kl_coef > 0 or self.tcfg.kl_target_validity is not None):
            ref, _ = load_verified(models.load, self.base_model, **models.load_options(self.cfg.model))
            self.ref_model = ref.to(self.device).eval().requires_grad_(False)

    # ------------------------------------------------------------------------------ sampling + scoring
    def _sample_groups(self, problem_idx: Sequence[int], seeds: Sequence[int]) -> Groups:
        """Rollouts for this rank's strided share of ``problem_idx``, scored (rewards.score_rollouts: the
        verifiers, a verdict each, a few examples), shaped and all-gathered."""
        local = local_share(len(problem_idx), self.dist)
        t0 = time.perf_counter()
        self.engine.sync_weights(self.model)  # vllm: push the current policy; hf: shares the model already
        mine = [problem_idx[i] for i in local]
        batch = self.engine.generate(
            [self.prompts[j] for j in mine], self.tcfg.group_size,
            temperature=self.rcfg.temperature, top_p=self.rcfg.top_p, max_new_tokens=self.max_new_tokens,
            seed=[seeds[i] for i in local], stop=[self.rendered[j].stop for j in mine],
        )
        t1 = time.perf_counter()
        g = self.tcfg.group_size
        rows = [self.problems[j] for j in mine for _ in range(g)]
        scores = rewards_lib.score_rollouts(rows, batch.texts, workers=self.cfg.compute.workers or None)
        groups = gather_groups(problem_idx, local, batch, scores, self.dist,
                               gen_seconds=t1 - t0, score_seconds=time.perf_counter() - t1)
        groups.examples = rewards_lib.pick_examples(
            [str(r.get("problem_id")) for r in rows], [self.prompts[j] for j in mine for _ in range(g)],
            batch.texts, scores)
        groups.rewards = self.adv.shape_rewards(groups.rewards, groups.lengths, self.max_new_tokens)
        return groups

    def _seeds(self, step: int, round_: int, count: int) -> list[int]:
        return step_seeds(self.tcfg.seed, step, round_, count)

    def _collect(self, step: int) -> tuple[Groups, Groups, int]:
        """(first sampled round, batch to train on, sampling rounds): groups the advantage drops
        (``keep_groups``) are replaced by more rounds of P prompts, up to ``max_sampling_rounds``."""
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
        train = concat_groups(kept)
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
        has_rows = batch is not None and batch.num_samples > 0
        old_lp = batch.logprobs if batch is not None else None
        gap: dict[str, float] | None = None
        if self.recompute_old and has_rows:
            old_lp = self._logprobs_no_grad(self.model, batch)
            gap = logprob_gap_sums(batch.logprobs, old_lp, batch.completion_mask)
        ref_lp = self._logprobs_no_grad(self.ref_model, batch) if (self.ref_model is not None and has_rows) else None
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
                    sampled_ent = batch.entropies[idx, :width].to(dev) if batch.entropies is not None else None
                    loss, st = losses.policy_loss(
                        lp, old_lp[idx, :width].to(dev), adv_rows.to(dev), mask.to(dev),
                        eps_low=self.eps_low, eps_high=self.eps_high, dual_clip=t.dual_clip, agg=self.loss_agg,
                        norm_len=self.max_new_tokens, num_tokens=num_tokens, num_seqs=num_seqs,
                        ref_logprobs=ref_lp[idx, :width].to(dev) if ref_lp is not None else None,
                        kl_coef=self.kl_coef, kl_estimator=self.kl_estimator,
                        entropy=ent if ent is not None else sampled_ent, entropy_coef=t.entropy_coef,
                    )
                    stats.add(st)
                    loss = loss * self.dist.world
                else:
                    start = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.pad_id
                    loss = zero_loss(self.model, start_id=start, pad_id=self.pad_id, temperature=self.rcfg.temperature)
                self.backend.backward(loss)
                grad_norms.append(self.backend.step())
                loss_values.append(float(loss.detach()) / self.dist.world)
        total = losses.LossStats()
        for s in self.dist.gather(stats):
            total.add(s)
        out = total.means()
        out["grad_norm"] = float(np.mean(grad_norms)) if grad_norms else math.nan
        out["grad_norm_max"] = float(np.max(grad_norms)) if grad_norms else math.nan
        out["loss"] = float(np.sum(self.dist.gather(float(np.mean(loss_values)) if loss_values else 0.0)))
        out["optimizer_steps"] = len(grad_norms)
        if self.recompute_old:  # the engine's log-probs against the trainer's (every rank's tokens)
            empty = {"tokens": 0.0, "abs_sum": 0.0, "abs_max": 0.0, "ratio_sum": 0.0}
            out.update(logprob_gap_record(self.dist.gather(gap or empty)))
        return out

    def _logprobs_no_grad(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return batch_logprobs(model, batch, pad_id=self.pad_id, temperature=self.rcfg.temperature)

    # ------------------------------------------------------------------------------ one step
    def _advantages(self, groups: Groups) -> tuple[torch.Tensor, torch.Tensor]:
        ctx = {"mean_logprob": groups.mean_logprob}
        return self.adv(groups.rewards, **ctx).to(torch.float64), self.adv.mask(groups.rewards, **ctx)

    def step(self, step: int) -> dict[str, Any]:
        """Run RL step ``step`` (1-based) and return its record."""
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
        again = self.adv.resample_groups(groups.rewards, mean_logprob=groups.mean_logprob) if groups.problems else []
        resample = self._second_update(step, groups, again) if again else {}
        t_done = time.perf_counter()

        record = self._record(step, lr, first, groups, rounds, advantages, keep, upd, resample)
        if measure_rank1:
            head_now = self.backend.full_weight(models.output_head(self.model)).cpu()
            record["rank1_frac_step"] = rank1_fraction(head_now - head_before)
            record["eff_rank_step"] = effective_rank(head_now - head_before)
            record["rank1_frac"] = rank1_fraction(head_now - self.head_w0)
            record["eff_rank"] = effective_rank(head_now - self.head_w0)
        record.update(self.probes.measure(step, self.model))
        # the step's budget: every rollout sampled (refill rounds and resampled groups included), every optimizer step
        record["rollouts"] = t.group_size * (rounds * t.prompts_per_step + resample.get("resample_groups", 0))
        record["optimizer_steps"] = upd["optimizer_steps"] + resample.get("resample_optimizer_steps", 0)
        resample_gen = resample.get("resample_gen_seconds", 0.0)
        resample_score = resample.get("resample_score_seconds", 0.0)
        record["time_rollout"] = groups.gen_seconds + resample_gen
        record["time_scoring"] = groups.score_seconds + resample_score
        record["time_update"] = t_done - t_update - resample_gen - resample_score
        record["time_step"] = time.perf_counter() - t_step
        record["tokens_per_s"] = float(groups.lengths.sum()) / max(record["time_step"], 1e-9)
        self._warn_truncation(step, record)
        return record

    def _warn_truncation(self, step: int, record: dict[str, Any]) -> None:
        """One warning per run when most rollouts of a step hit the generation budget (``truncated_frac``)."""
        frac = record.get("truncated_frac", math.nan)
        if self._warned_truncation or not frac > TRUNCATION_WARNING or not self.dist.main:
            return
        self._warned_truncation = True
        log.warning("%s: %.0f%% of step %d's rollouts hit the generation budget of %d tokens and were cut "
                    "(their rewards judge unfinished answers); raise rollout.max_new_tokens",
                    self.run_id, 100 * frac, step, self.max_new_tokens)

    def _second_update(self, step: int, groups: Groups, positions: list[int]) -> dict[str, Any]:
        """Fresh rollouts of the groups at ``positions`` (Advantage.resample_groups) and a second update."""
        chosen = [groups.problems[i] for i in positions]
        second = self._sample_groups(chosen, self._seeds(step, RESAMPLE_ROUND, len(chosen)))
        adv2, keep2 = self._advantages(second)
        upd = self._update(second, adv2, keep2)
        return {
            "resample_groups": len(chosen),
            "resample_reward_mean": float(second.rewards.mean()),
            "resample_loss": upd["loss"],
            "resample_optimizer_steps": upd["optimizer_steps"],
            "resample_gen_seconds": second.gen_seconds,
            "resample_score_seconds": second.score_seconds,
        }

    def _record(
        self, step: int, lr: float, first: Groups, groups: Groups, rounds: int,
        advantages: torch.Tensor, keep: torch.Tensor, upd: dict[str, Any], resample: dict[str, Any],
    ) -> dict[str, Any]:
        return step_record(
            run_id=self.run_id, method=self.label, seed=self.tcfg.seed, step=step, lr=lr,
            group_size=self.tcfg.group_size, first=first, groups=groups, rounds=rounds, advantages=advantages,
            keep=keep, update=upd, resample=resample, state=self.adv.state_record(), kl_coef=self.kl_coef,
            eps_low=self.eps_low, eps_high=self.eps_high, max_new_tokens=self.max_new_tokens,
        )

    def _measure_base_validity(self) -> float:
        """Mean reward of the base policy on one batch of training prompts (seeded; before any update)."""
        idx = base_validity_prompts(self.tcfg.seed, len(self.problems), self.tcfg.prompts_per_step)
        return float(self._sample_groups(idx, self._seeds(0, 0, len(idx))).rewards.mean())

    # ------------------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, step: int) -> Path:
        if self.dist.main:
            self._save_engine()
        state = {
            "step": step,
            "run_id": self.run_id,
            "schedule": {"lr": self.tcfg.lr, "warmup_steps": self.tcfg.warmup_steps, "lr_schedule": self.tcfg.lr_schedule},
            "sampler": self.sampler.state_dict(),
            "advantage": self.adv.state_dict(),
            "kl_coef": self.kl_coef,
            "base_validity": self.base_validity,
            "head_w0": self.head_w0,
            "rollouts_used": self.rollouts_used,
        }
        return ckpt.save_checkpoint(checkpoint_dir(self.run_dir, step), state, model=self.model,
                                    tokenizer=self.tokenizer, backend=self.backend, dist=self.dist)

    def load_checkpoint(self, folder: Path) -> int:
        """Restore weights, optimizer, RNG, sampler, advantage and KL state; returns the checkpoint's step."""
        state = ckpt.load_checkpoint(folder, model=self.model, backend=self.backend, dist=self.dist)
        self.sampler.load_state_dict(state["sampler"])
        self.adv.load_state_dict(state["advantage"])
        self.kl_coef = state["kl_coef"]
        self.base_validity = state["base_validity"]
        self.head_w0 = state["head_w0"]
        self.rollouts_used = int(state.get("rollouts_used", 0))
        if "rollouts_used" not in state and self.tcfg.max_rollouts is not None:
            logging.getLogger(__name__).warning(
                "fade: %s's checkpoint predates rollout counting: the rollout budget counts from step %d",
                folder, int(state["step"]))
        return int(state["step"])

    # ------------------------------------------------------------------------------ the loop
    def budget_spent(self) -> bool:
        """Whether the run has sampled its rollout budget (train.max_rollouts; never without one)."""
        return self.tcfg.max_rollouts is not None and self.rollouts_used >= self.tcfg.max_rollouts

    def train(self) -> TrainResult:
        """Train (resuming from the latest complete checkpoint of this run dir if there is one)."""
        from fade_core import config as fconfig

        t0 = time.perf_counter()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._setup()
        log = MetricsLog(self.run_dir)
        start, resumed = 0, None
        for _, folder in resume_candidates(self.run_dir):  # newest first; a damaged one falls back to the previous
            try:
                start = resumed = self.load_checkpoint(folder)
                break
            except DamagedFile as e:  # raised before anything is restored (ckpt.load_checkpoint checks first)
                logging.getLogger(__name__).warning(
                    "fade: cannot resume from %s: %s; trying the checkpoint before it", folder, e)
        if resumed is not None:
            if self.dist.main:
                log.truncate(start)
        elif self.dist.main:
            log.reset()
        if self.dist.main:
            fconfig.save(self.cfg, self.run_dir / "config.yaml")
            self._save_prompts()
            self._save_engine()
            record_code_version(self.run_dir, git_state(), start)  # what code trained from here (the report names it)
        if start == 0 and self.tcfg.kl_target_validity is not None:
            self.base_validity = self._measure_base_validity()
            self.kl_coef = kl_coef_from_validity(self.tcfg.kl_target_validity, self.base_validity)
        result = TrainResult(self.run_id, self.run_dir, self.tcfg.steps, resumed_from=resumed)
        loggers = list(self.loggers) if self.dist.main else []
        if self.dist.main:  # live trackers (tracking.*): TensorBoard by default, rank 0 only
            loggers += tracking_loggers(self.cfg, self.run_id, resume_step=start)
        if self.progress and self.dist.main:
            loggers.insert(0, ProgressBar(self.tcfg.steps, start, self.label))
        done = 0
        try:
            for step in range(start + 1, self.tcfg.steps + 1):
                if self.budget_spent():
                    break
                record = self.step(step)
                self.rollouts_used += int(record["rollouts"])
                record["rollouts_total"] = self.rollouts_used
                t_log = time.perf_counter()
                if self.dist.main:
                    record["time_log"] = 0.0  # the written line cannot hold its own write time
                    log.append(record)
                    record["time_log"] = time.perf_counter() - t_log
                for logger in loggers:
                    logger.log(step, record)
                if self.on_step is not None:
                    self.on_step(step, record)
                result.last_metrics = record
                if step % self.tcfg.checkpoint_every == 0 or step == self.tcfg.steps or self.budget_spent():
                    result.checkpoints.append(self.save_checkpoint(step))
                done += 1
                if self.stop_after is not None and done >= self.stop_after:
                    break
        finally:
            log.close()
            for logger in loggers:
                logger.close()
        if result.checkpoints:
            result.final_checkpoint = result.checkpoints[-1]
        result.seconds = time.perf_counter() - t0
        return result


def train(cfg: Any, **kwargs: Any) -> TrainResult:
    """Train one run from a validated Config (see :class:`Trainer` for keyword options)."""
    return Trainer(cfg, **kwargs).train()
