"""Probe measurements: quantities measured on *fixed* sets at given steps, so that a change between two
steps is the policy's change and not a change of what was measured.

Why. The step record's ``entropy`` is the mean token entropy of that step's own rollouts, on new prompts
every step: its step-to-step scatter (~±0.05 nats for the tiny model) buries the first-order change a step
makes (~1e-5). And the rank-1 fraction of the output head's update is a property of a [vocab, hidden]
matrix (24 x 64 for the tiny model), whose spectrum has few directions to choose from. Here:

    probe_entropy     the policy's mean next-token entropy, teacher-forced along a fixed probe set:
                      ``train.probe_prompts`` training prompts (a fixed, seeded choice, the same for every run
                      of a config) with ``train.probe_samples`` completions each, drawn once from the base
                      model with a fixed seed. A deterministic function of the weights.
    rank1_frac_hidden the rank-1 fraction (and effective rank) of a hidden-layer weight's update since step 0
                      (``train.rank1_hidden``: auto = the middle block's MLP down projection), every
                      ``train.rank1_every`` steps, beside the output head's (the trainer's ``rank1_frac``)
    rank1_noise_*     the noise baseline of both: the mean rank-1 fraction of a Gaussian matrix of the same
                      shape (what an update without structure scores)
    eval_pass1        every ``train.eval_every`` steps, pass@1 (unbiased, ``train.eval_samples`` samples per
                      problem) on a fixed, seeded choice of ``train.eval_problems`` problems of split
                      ``train.eval_split``, with one fixed sampling seed (the same random numbers at every
                      evaluation, so successive evaluations differ by the policy only); also per difficulty
                      level (``eval_pass1_<level>``)

A resumed run measures the same values: the probe set and the initial weights come from the base model
(the probes are set up before a checkpoint is loaded), and the evaluation is seeded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fade_core.metrics import effective_rank, rank1_fraction
from fade_core.train.policy import completion_logprobs

PROBE_SEED = 20_250_715
"""Seed of the probe set's prompt choice and completions, and of the periodic evaluation's problems and
samples: fixed, so every run of a study is measured on the same sets with the same random numbers."""
NOISE_DRAWS = 16
"""Gaussian matrices averaged for the rank-1 noise baseline."""
HIDDEN_AUTO = "auto"


# ============================================================================ fixed sets
def fixed_choice(count: int, total: int, seed: int = PROBE_SEED) -> list[int]:
    """``count`` indices of ``range(total)`` (a seeded permutation's head; all of them when count >= total)."""
    return np.random.default_rng(seed).permutation(total)[: min(count, total)].tolist()


@dataclass
class ProbeSet:
    """Fixed (prompt, completion) pairs: ``prompt_ids`` the distinct prompts' token ids, ``row_prompt`` [B]
    each completion's prompt, ``completion_ids`` / ``mask`` [B, T] the completions drawn once."""

    prompt_ids: list[list[int]]
    row_prompt: torch.Tensor
    completion_ids: torch.Tensor
    mask: torch.Tensor


def draw_probe_set(model: torch.nn.Module, tokenizer: Any, prompts: Sequence[str], samples: int, *,
                   temperature: float, max_new_tokens: int, seed: int = PROBE_SEED) -> ProbeSet:
    """Sample ``samples`` completions of each prompt once from ``model`` (the base) with a fixed seed."""
    from fade_core.rollout.hf import HFEngine

    batch = HFEngine(model, tokenizer).generate(list(prompts), samples, temperature=temperature,
                                                max_new_tokens=max_new_tokens, seed=seed)
    keep = batch.lengths > 0  # an immediately stopped completion has no token to measure
    return ProbeSet(batch.prompt_token_ids, batch.prompt_index[keep], batch.completion_ids[keep],
                    batch.completion_mask[keep])


@torch.no_grad()
def probe_entropy(model: torch.nn.Module, probe: ProbeSet, *, pad_id: int, temperature: float) -> float:
    """Mean next-token entropy (nats, at ``temperature``) of ``model`` over the probe set's completion tokens,
    teacher-forced (a deterministic function of the weights)."""
    if probe.completion_ids.numel() == 0:
        return math.nan
    _, ent = completion_logprobs(model, probe.prompt_ids, probe.row_prompt, probe.completion_ids, pad_id=pad_id,
                                 temperature=temperature, with_entropy=True)
    m = probe.mask.to(ent.device, torch.float64)
    return float((ent.to(torch.float64) * m).sum() / m.sum())


# ============================================================================ weight matrices
def hidden_matrix_name(model: torch.nn.Module, spec: str = HIDDEN_AUTO) -> str:
    """The parameter name of the hidden-layer matrix whose update is measured: ``spec`` itself (it must be a
    2-D parameter), or for ``auto`` the middle block's MLP down projection (``...layers.<(L-1)//2>.mlp.down_proj
    .weight``), else the middle 2-D weight that is neither the input embedding nor the output head."""
    params = dict(model.named_parameters())
    if spec != HIDDEN_AUTO:
        if spec not in params or params[spec].ndim != 2:
            two_d = [n for n, p in params.items() if p.ndim == 2]
            raise ValueError(f"train.rank1_hidden={spec!r} is not a 2-D parameter of the model; 2-D parameters: "
                             f"{', '.join(two_d[:12])}{' ...' if len(two_d) > 12 else ''}")
        return spec
    down = sorted((int(m.group(1)), n) for n in params
                  if (m := re.search(r"layers\.(\d+)\.mlp\.down_proj\.weight$", n)))
    if down:
        return down[(len(down) - 1) // 2][1]
    skip = {id(model.get_input_embeddings().weight), id(model.get_output_embeddings().weight)}
    inner = [n for n, p in params.items() if p.ndim == 2 and id(p) not in skip]
    if not inner:
        raise ValueError("the model has no 2-D hidden-layer weight to measure")
    return inner[len(inner) // 2]


def gaussian_rank1(shape: tuple[int, int], draws: int = NOISE_DRAWS, seed: int = PROBE_SEED) -> float:
    """Mean rank-1 fraction of ``draws`` i.i.d. Gaussian matrices of ``shape``: the noise baseline of an
    update's rank-1 fraction (an update with no preferred direction)."""
    gen = torch.Generator().manual_seed(seed)
    return float(np.mean([rank1_fraction(torch.randn(shape, generator=gen, dtype=torch.float64))
                          for _ in range(draws)]))


# ============================================================================ the probes of a run
class Probes:
    """The probe measurements of one run (module docstring). Build it on the base model, before a
    checkpoint is loaded; call :meth:`measure` after every step.

    cfg: the run's Config; problems: the training rows (probe prompts); eval_rows: the rows of
    ``train.eval_split`` (periodic evaluation; None: no evaluation); backend: the trainer's UpdateBackend
    (``full_weight``); prompt_text: the prompt of a problem row; max_new_tokens: the run's generation
    budget (``rollout.max_new_tokens``, else the benchmark template's).
    """

    def __init__(self, cfg: Any, model: torch.nn.Module, tokenizer: Any, problems: Sequence[dict[str, Any]],
                 eval_rows: Sequence[dict[str, Any]] | None, backend: Any, prompt_text: Any,
                 max_new_tokens: int) -> None:
        t, r = cfg.train, cfg.rollout
        self.cfg, self.tokenizer, self.backend = cfg, tokenizer, backend
        self.pad_id = tokenizer.pad_token_id
        self.temperature = r.temperature
        self.max_new_tokens = max_new_tokens
        self.probe: ProbeSet | None = None
        if t.probe_prompts > 0:
            idx = fixed_choice(t.probe_prompts, len(problems))
            self.probe = draw_probe_set(model, tokenizer, [prompt_text(problems[i]) for i in idx], t.probe_samples,
                                        temperature=r.temperature, max_new_tokens=max_new_tokens)
        self.hidden_name: str | None = None
        self.hidden_w0: torch.Tensor | None = None
        self.noise: dict[str, float] = {}
        if t.rank1_hidden is not None:
            target = getattr(model, "module", model)
            self.hidden_name = hidden_matrix_name(target, t.rank1_hidden)
            self.hidden_w0 = self._hidden(model).clone()
            head = target.get_output_embeddings().weight
            self.noise = {"rank1_noise_head": gaussian_rank1(tuple(head.shape)),
                          "rank1_noise_hidden": gaussian_rank1(tuple(self.hidden_w0.shape))}
        self.eval_rows = [eval_rows[i] for i in fixed_choice(t.eval_problems, len(eval_rows))] if (
            eval_rows and t.eval_every > 0) else []
        self.eval_prompts = [prompt_text(p) for p in self.eval_rows]

    def _hidden(self, model: torch.nn.Module) -> torch.Tensor:
        target = getattr(model, "module", model)
        return self.backend.full_weight(dict(target.named_parameters())[self.hidden_name]).detach().cpu()

    def measure(self, step: int, model: torch.nn.Module) -> dict[str, Any]:
        """The probe columns of step ``step``'s record (NaN where a measurement is not due this step)."""
        t = self.cfg.train
        out: dict[str, Any] = {"probe_entropy": math.nan, "rank1_frac_hidden": math.nan, "eff_rank_hidden": math.nan}
        if self.probe is not None:
            out["probe_entropy"] = probe_entropy(model, self.probe, pad_id=self.pad_id, temperature=self.temperature)
        if self.hidden_name is not None:
            out.update(self.noise)
            if step % t.rank1_every == 0:
                dw = self._hidden(model) - self.hidden_w0
                out["rank1_frac_hidden"], out["eff_rank_hidden"] = rank1_fraction(dw), effective_rank(dw)
        if self.eval_rows:
            out["eval_pass1"] = math.nan
            if step % t.eval_every == 0:
                out.update(self.evaluate(model))
        return out

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> dict[str, float]:
        """pass@1 on the fixed evaluation problems (overall and per difficulty level), one fixed seed."""
        from fade_core import verifiers
        from fade_core.rollout.hf import HFEngine

        t, e = self.cfg.train, self.cfg.eval
        n = t.eval_samples
        batch = HFEngine(model, self.tokenizer).generate(
            self.eval_prompts, n, temperature=e.temperature,
            max_new_tokens=e.max_new_tokens or self.max_new_tokens, seed=PROBE_SEED)
        rows = [p for p in self.eval_rows for _ in range(n)]
        scores = verifiers.score_batch(rows, batch.texts, workers=self.cfg.compute.workers or None)
        solved = np.asarray([s.passed for s in scores], dtype=np.float64).reshape(len(self.eval_rows), n).mean(1)
        out = {"eval_pass1": float(solved.mean())}
        levels = np.asarray([str(p.get("difficulty_level") or "unknown") for p in self.eval_rows])
        for level in sorted(set(levels)):
            out[f"eval_pass1_{level}"] = float(solved[levels == level].mean())
        return out
