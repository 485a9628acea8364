"""Warm start: supervised pre-training of the built-in tiny model on the countdown task.

RL with verifiable rewards works when the base policy is *partially* competent: it must sometimes
solve a problem (else every group has zero reward variance and no signal) but not always (else there
is nothing to learn). The warm start produces such a base from a freshly initialised tiny Llama.

Examples mix two kinds, chosen per example with probability ``correct_fraction``:

* **correct**: a problem (numbers, target) and a uniformly chosen correct expression for that target
  ("3 5 7 -> 22: 3*5+7"). These teach the model to *aim at the target*.
* **random valid**: a problem and a uniformly chosen well-formed expression that uses every number
  exactly once, whatever its value ("3 5 7 -> 22: 7-5*3"). These teach the format and the rule "use
  each number once", but not the target.

Why both: a model trained on random valid expressions alone samples correct answers only at the rate
of the candidate space (a few percent) and, in a measured prototype, did not learn to use the target in
300 RL steps; RL only sharpened it. With a share of correct examples the model learns a weak, noisy
target-conditioned policy, which is the regime where RL can raise pass@1 by *learning* (moving mass
toward expressions that hit the target) and not only by sharpening. The loss is cross-entropy on the
completion tokens and the closing EOS only (the prompt is context).

Problems of the evaluation split (``data.countdown``: the same generator and seeds as
``fade_core.data.countdown``) are excluded from the correct examples, so held-out pass@k measures
generalisation. Intermediate checkpoints go to ``<out_dir>/checkpoints/step-N/`` (HF format), the
final model to ``<out_dir>/``, the loss curve to ``<out_dir>/warmstart.jsonl`` and, when asked, a
held-out pass@k check to ``<out_dir>/warmstart_eval.json``.

Defaults (config ``warmstart``: 2000 steps x 64 examples, lr 5e-3, correct_fraction 0.8, on the
266K-parameter model.tiny default and the three default levels), measured on held-out test problems with
n = 128 samples each (60 per level; 290 s on a busy 2-core machine), against the uniform sampler of the same
problems (:func:`fade_core.countdown_task.uniform_pass_at_k`)::

    level                    base pass@1 / @8 / @32 / @128     uniform pass@1 / @8 / @32 / @128
    easy   (3 numbers, 1-9)  0.178 / 0.692 / 0.950 / 1.000    0.066 / 0.384 / 0.777 / 0.983
    medium (4 numbers, 1-9)  0.027 / 0.189 / 0.521 / 0.917    0.008 / 0.061 / 0.203 / 0.518
    hard   (4 numbers, 1-19) 0.013 / 0.096 / 0.299 / 0.683    0.009 / 0.066 / 0.200 / 0.444

The earlier default (400 steps, correct_fraction 0.4) was indistinguishable from the uniform sampler
(easy 0.065 against 0.066 at pass@1, hard 0.015 against 0.015); 2000 steps at 0.4 reached 0.092 (easy) and
0.022 (4 numbers, 1-9). The study's headroom check (fade_core.claims) tests base against uniform on every
study run, so these figures are re-measured where it matters.

Denormal floats slow CPU matmuls by several times as small weights train (seen as a 4x slow-down of
steps), so every entry point here calls ``torch.set_flush_denormal(True)``.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fade_core import countdown_task, models, runs
from fade_core.metrics import pass_at_k


# ------------------------------------------------------------------------------------------ examples
def sample_example(
    rng: random.Random,
    *,
    correct: bool,
    num_numbers: int = 3,
    max_number: int = 9,
    min_solutions: int = 2,
    exclude: set[tuple[tuple[int, ...], int]] | frozenset = frozenset(),
) -> tuple[str, str]:
    """One (prompt, completion) pair; ``correct`` picks the kind (see the module docstring).

    The problem distribution matches :func:`fade_core.countdown_task.generate` (uniform numbers, a target
    uniform over the qualifying reachable values); keys (sorted numbers, target) in ``exclude`` are
    redrawn.
    """
    while True:
        numbers = tuple(rng.randint(1, max_number) for _ in range(num_numbers))
        targets = countdown_task.qualifying_targets(tuple(sorted(numbers)), min_solutions)
        if not targets:
            continue
        target = targets[rng.randrange(len(targets))]
        if (tuple(sorted(numbers)), target) in exclude:
            continue
        cands = countdown_task.candidate_expressions(numbers)
        if correct:
            pool = sorted({t for t, v in cands if v == target})
        else:
            pool = sorted({t for t, _ in cands})
        return countdown_task.format_prompt(numbers, target), pool[rng.randrange(len(pool))]


def sample_level(rng: random.Random, levels: dict[str, countdown_task.Level]) -> countdown_task.Level:
    """A level drawn with probability proportional to its share."""
    names = list(levels)
    return levels[rng.choices(names, weights=[levels[n].share for n in names])[0]]


def encode_examples(
    tokenizer: Any, examples: Sequence[tuple[str, str]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids [B, L], attention_mask [B, L], loss_mask [B, L]) of prompt+completion+EOS.

    loss_mask[b, t] is True where token t is a completion token or the final EOS: the positions whose
    prediction (from position t-1) is trained.
    """
    prompts = tokenizer([p for p, _ in examples], add_special_tokens=True)["input_ids"]
    comps = tokenizer([c for _, c in examples], add_special_tokens=False)["input_ids"]
    rows = [list(p) + list(c) + [tokenizer.eos_token_id] for p, c in zip(prompts, comps, strict=True)]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    loss = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (r, p) in enumerate(zip(rows, prompts, strict=True)):
        ids[i, : len(r)] = torch.tensor(r)
        attn[i, : len(r)] = 1
        loss[i, len(p) : len(r)] = True
    return ids, attn, loss


def sft_loss(model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over ``loss_mask`` positions (shapes [B, L])."""
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    targets = ids[:, 1:]
    mask = loss_mask[:, 1:]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    return (nll * mask.reshape(-1)).sum() / mask.sum().clamp(min=1)


# ------------------------------------------------------------------------------------ held-out check
def countdown_pass_at_k(
    model: torch.nn.Module,
    tokenizer: Any,
    problems: Sequence[countdown_task.CountdownProblem] | Sequence[dict[str, Any]],
    *,
    n: int = 64,
    ks: Sequence[int] = (1, 8, 32),
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    seed: int = 0,
    prompts_per_batch: int = 32,
) -> dict[str, float]:
    """In-process held-out pass@k on countdown problems (the quick check used by warm start and train).

    ``problems``: CountdownProblem objects or mappings with "numbers" and "target". Samples ``n``
    completions per problem with the hf engine and averages the unbiased pass@k (fade_core.metrics) over
    problems. Returns {"pass@k": ..., "n": n, "problems": P}. The full evaluation stage (DuckDB store,
    per-sample records) is fade_core.evaluate; this is the same estimator without the bookkeeping.
    """
    from fade_core.rollout.hf import HFEngine

    items = [
        (tuple(p.numbers), int(p.target)) if isinstance(p, countdown_task.CountdownProblem) else (tuple(p["numbers"]), int(p["target"]))
        for p in problems
    ]
    engine = HFEngine(model, tokenizer)
    correct = []
    for start in range(0, len(items), prompts_per_batch):
        chunk = items[start : start + prompts_per_batch]
        batch = engine.generate(
            [countdown_task.format_prompt(nums, t) for nums, t in chunk], n,
            temperature=temperature, max_new_tokens=max_new_tokens, seed=seed * 7919 + start,
        )
        ok = [countdown_task.check(text, *chunk[i // n])[0] for i, text in enumerate(batch.texts)]
        correct.extend(np.asarray(ok).reshape(len(chunk), n).sum(1).tolist())
    c = np.asarray(correct)
    out: dict[str, float] = {f"pass@{k}": float(np.mean(pass_at_k(n, c, k))) for k in ks if k <= n}
    out.update(n=n, problems=len(items))
    return out


def countdown_splits(data_cfg: Any, splits: Sequence[str] = ("validation", "test")
                     ) -> dict[str, list[countdown_task.CountdownProblem]]:
    """The countdown splits named in ``splits`` exactly as fade_core.data.countdown generates them
    (``data.countdown``; held-out splits do not depend on the training split's size)."""
    from fade_core.data.countdown import parse_levels

    cd = data_cfg.countdown
    sizes = {"train": cd.num_train, "validation": cd.num_validation, "test": cd.num_test}
    wanted = {s: sizes[s] for s in splits if sizes[s] > 0}
    return countdown_task.generate_splits(parse_levels(cd.levels), wanted, min_solutions=cd.min_solutions,
                                          seed=cd.seed)


def heldout_problems(data_cfg: Any, limit: int | None = None) -> list[countdown_task.CountdownProblem]:
    """The countdown test split exactly as fade_core.data.countdown generates it (``data.countdown``)."""
    test = countdown_splits(data_cfg, ("test",))["test"]
    return test[:limit] if limit else test


# ------------------------------------------------------------------------------------------ training
@dataclass
class WarmstartResult:
    """What a warm start wrote and measured."""

    out_dir: Path
    checkpoints: list[Path] = field(default_factory=list)
    final_loss: float = math.nan
    seconds: float = 0.0
    num_parameters: int = 0
    eval: dict[str, float] | None = None


def lr_at(step: int, total: int, lr: float, warmup: int = 20) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 10% of ``lr`` at ``total``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def run_warmstart(
    tiny: Any,
    ws: Any,
    data_cfg: Any,
    *,
    out_dir: str | Path | None = None,
    eval_problems: int = 0,
    eval_samples: int = 64,
    max_new_tokens: int = 16,
    progress: Any = None,
) -> WarmstartResult:
    """Train a fresh tiny model (``tiny``: config.model.tiny) with the ``ws`` (config.warmstart) recipe.

    data_cfg: config.data (countdown shape and the held-out split to exclude). Writes the final model
    and checkpoints every ``ws.checkpoint_every`` steps; with ``eval_problems > 0`` also measures
    held-out pass@k on that many test problems with ``eval_samples`` samples each. ``progress``: a
    callable ``(step, total, loss)`` for a progress display (None: silent).
    """
    torch.set_flush_denormal(True)
    t_start = time.perf_counter()
    out = Path(out_dir or ws.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from fade_core.data.countdown import parse_levels

    cd = data_cfg.countdown
    held_out = countdown_splits(data_cfg)
    test = held_out.get("test", [])
    exclude = frozenset(p.key for probs in held_out.values() for p in probs)
    levels = parse_levels(cd.levels)
    model, tokenizer = models.build_tiny(tiny, seed=ws.seed)
    model.train()
    rng = random.Random(ws.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=ws.lr, weight_decay=0.01, betas=(0.9, 0.98))
    result = WarmstartResult(out_dir=out, num_parameters=models.num_parameters(model))
    log = (out / "warmstart.jsonl").open("w")
    ema = math.nan
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ws.seed)
        for step in range(1, ws.steps + 1):
            examples = []
            for _ in range(ws.batch_size):
                lv = sample_level(rng, levels)
                examples.append(sample_example(
                    rng, correct=rng.random() < ws.correct_fraction, num_numbers=lv.num_numbers,
                    max_number=lv.max_number, min_solutions=cd.min_solutions, exclude=exclude,
                ))
            ids, attn, loss_mask = encode_examples(tokenizer, examples)
            for group in opt.param_groups:
                group["lr"] = lr_at(step - 1, ws.steps, ws.lr)
            loss = sft_loss(model, ids, attn, loss_mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            value = float(loss.detach())
            ema = value if math.isnan(ema) else 0.95 * ema + 0.05 * value
            log.write(json.dumps({"step": step, "loss": value, "lr": opt.param_groups[0]["lr"]}) + "\n")
            if progress is not None:
                progress(step, ws.steps, ema)
            if step % ws.checkpoint_every == 0 and step < ws.steps:
                model.eval()
                result.checkpoints.append(_saved(models.save(model, tokenizer, out / "checkpoints" / f"step-{step}")))
                model.train()
    log.close()
    model.eval()
    result.checkpoints.append(_saved(models.save(model, tokenizer, out / "checkpoints" / f"step-{ws.steps}")))
    _saved(models.save(model, tokenizer, out))
    result.final_loss = ema
    if eval_problems > 0:
        result.eval = countdown_pass_at_k(
            model, tokenizer, test[:eval_problems], n=eval_samples, max_new_tokens=max_new_tokens, seed=ws.seed
        )
        (out / "warmstart_eval.json").write_text(json.dumps(result.eval, indent=2))
    result.seconds = time.perf_counter() - t_start
    return result


def _saved(folder: Path) -> Path:
    """Record the checksums of a model folder just written (runs.seal_checkpoint: its SHA256SUMS)."""
    runs.seal_checkpoint(folder)
    return folder
