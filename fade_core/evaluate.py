"""Evaluation: sample n completions per problem from a checkpoint, score them, one row per sample.

For one checkpoint and one benchmark's problem table:

1. Load the checkpoint (HF format) with :func:`fade_core.models.load` and wrap it in a rollout engine
   (:func:`fade_core.rollout.build_engine`: "hf" on the CPU, "vllm" on GPUs).
2. In chunks of ``prompts_per_batch`` problems, sample ``n`` completions per prompt with the engine
   (temperature / top-p / budget from the options; the seed of chunk ``j`` is derived from the
   evaluation seed and ``j``, so an evaluation is reproducible given its options).
3. Score every completion with :func:`fade_core.verifiers.score_batch` (sandboxed code, math, countdown).
4. Return the samples frame in the store's schema (:data:`fade_core.store.SAMPLE_COLUMNS`); latency is
   the chunk's generation + scoring time divided evenly over its samples.

:func:`evaluate_checkpoints` evaluates a list of checkpoints (a run's: :func:`fade_core.runs.run_checkpoints`)
and commits each (run, benchmark, step) to the :class:`~fade_core.store.ResultsStore` atomically. Who made
a checkpoint (run id, method, seed, step) is :func:`fade_core.runs.identify_checkpoint`; the prompt is
:func:`fade_core.data.prompts.prompt_text`, the rule training uses too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fade_core.data.prompts import prompt_text
from fade_core.rollout.base import SEED_STRIDE
from fade_core.runs import CheckpointId, identify_checkpoint
from fade_core.store import SAMPLE_COLUMNS, EvalKey, ResultsStore


@dataclass
class SamplingOptions:
    """How completions are drawn at evaluation (mirrors config sections eval + rollout)."""

    engine: str = "hf"
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 16
    seed: int = 0
    prompts_per_batch: int = 16
    dtype: str = "float32"
    engine_opts: dict[str, Any] = field(default_factory=dict)
    workers: int | None = None  # verifier workers (None: the verifier's default)


def _records(problems: pd.DataFrame) -> list[dict[str, Any]]:
    from fade_core.data.schema import records

    return records(problems)


def evaluate(
    checkpoint: str | Path | None,
    problems: pd.DataFrame,
    n_samples: int,
    opts: SamplingOptions | None = None,
    *,
    ident: CheckpointId | None = None,
    engine: Any = None,
    score_batch: Callable[..., list[Any]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Sample ``n_samples`` completions per problem from ``checkpoint`` and score them.

    problems: a problem table (fade_core.data.schema), one benchmark. ``engine`` (an object with the
    RolloutEngine ``generate``) overrides loading the checkpoint; ``score_batch`` overrides
    :func:`fade_core.verifiers.score_batch`; ``progress(done, total)`` is called after each chunk.
    Returns the samples frame, ``len(problems) * n_samples`` rows in the store's schema.
    """
    opts = opts or SamplingOptions()
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if problems.empty:
        raise ValueError("no problems to evaluate")
    benchmarks = problems["benchmark"].unique().tolist()
    if len(benchmarks) != 1:
        raise ValueError(f"evaluate() takes one benchmark at a time, got {benchmarks}")
    if problems["problem_id"].duplicated().any():
        raise ValueError(f"duplicate problem_id {problems.loc[problems.problem_id.duplicated(), 'problem_id'].iloc[0]!r}")
    if ident is None:
        if checkpoint is None:
            raise ValueError("evaluate() needs a checkpoint or an explicit ident")
        ident = identify_checkpoint(checkpoint)
    if engine is None:
        if checkpoint is None:
            raise ValueError("evaluate() needs a checkpoint folder or an engine")
        from fade_core import models
        from fade_core.rollout import build_engine

        model, tokenizer = models.load(checkpoint, dtype=opts.dtype)
        engine = build_engine(opts.engine, model, tokenizer, **opts.engine_opts)
    if score_batch is None:
        from fade_core.verifiers import score_batch

    rows_in = _records(problems)
    out: list[dict[str, Any]] = []
    chunk = max(1, int(opts.prompts_per_batch))
    for j, start in enumerate(range(0, len(rows_in), chunk)):
        part = rows_in[start : start + chunk]
        t0 = time.perf_counter()
        batch = engine.generate(
            [prompt_text(p) for p in part], n_samples, temperature=opts.temperature, top_p=opts.top_p,
            max_new_tokens=opts.max_new_tokens, seed=opts.seed * SEED_STRIDE + j,
        )
        texts = list(batch.texts)
        per_sample_problems = [part[i // n_samples] for i in range(len(texts))]
        scores = score_batch(per_sample_problems, texts, workers=opts.workers)
        if len(scores) != len(texts):
            raise RuntimeError(f"score_batch returned {len(scores)} scores for {len(texts)} completions")
        latency = (time.perf_counter() - t0) / max(len(texts), 1)
        lengths = batch.lengths.tolist()
        for i, (text, sc) in enumerate(zip(texts, scores, strict=True)):
            p = per_sample_problems[i]
            out.append(dict(
                run_id=ident.run_id, method=ident.method, seed=ident.seed, step=ident.step,
                benchmark=p["benchmark"], problem_id=p["problem_id"],
                difficulty_level=p.get("difficulty_level") or "unknown", sample_index=i % n_samples,
                completion=text, status=str(sc.status), passed=bool(sc.passed), reward=float(sc.reward),
                tokens=int(lengths[i]), finish_reason=str(batch.finish_reasons[i]), latency_s=latency,
            ))
        if progress is not None:
            progress(min(start + chunk, len(rows_in)), len(rows_in))
    return pd.DataFrame(out, columns=list(SAMPLE_COLUMNS))


def select_problems(problems: pd.DataFrame, *, split: str = "test", max_problems: int | None = None,
                    source: str = "problems") -> pd.DataFrame:
    """The rows of ``split`` ('all': every row), the first ``max_problems`` of them (stable order)."""
    if split != "all":
        chosen = problems[problems["split"] == split]
        if chosen.empty:
            raise ValueError(f"{source}: no rows with split={split!r} (splits present: {sorted(problems['split'].unique())}); "
                             "set eval.split")
        problems = chosen
    if max_problems is not None:
        problems = problems.head(max_problems)
    return problems.reset_index(drop=True)


def evaluate_checkpoints(
    checkpoints: Sequence[tuple[CheckpointId, Path]],
    problem_tables: Mapping[str, pd.DataFrame],
    n_samples: int,
    store: ResultsStore,
    opts: SamplingOptions | None = None,
    *,
    skip_existing: bool = False,
    metadata: Mapping[str, Any] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    score_batch: Callable[..., list[Any]] | None = None,
) -> list[Path]:
    """Evaluate each checkpoint on each benchmark and commit each (run, benchmark, step) part atomically.

    The model is loaded once per checkpoint. ``skip_existing`` keeps parts already in the store whose
    n_samples matches (resume); otherwise an existing part is replaced. ``score_batch`` overrides the
    verifiers' (as in :func:`evaluate`). Returns the written part paths.
    """
    from fade_core import models
    from fade_core.rollout import build_engine

    opts = opts or SamplingOptions()
    written: list[Path] = []
    existing = {p.key: p for p in store.parts()} if skip_existing else {}
    for ident, path in checkpoints:
        todo = []
        for bench in problem_tables:
            key = EvalKey(ident.run_id, bench, ident.step)
            prev = existing.get(key)
            if prev is not None and prev.metadata.get("n_samples") == n_samples:
                continue
            todo.append(bench)
        if not todo:
            continue
        model, tokenizer = models.load(path, dtype=opts.dtype)
        engine = build_engine(opts.engine, model, tokenizer, **opts.engine_opts)
        for bench in todo:
            label = f"{ident.run_id} step {ident.step} {bench}"
            df = evaluate(path, problem_tables[bench], n_samples, opts, ident=ident, engine=engine, score_batch=score_batch,
                          progress=(lambda d, t, label=label: progress(label, d, t)) if progress else None)
            meta = {"checkpoint": str(path), "n_samples": n_samples, "num_problems": int(len(problem_tables[bench])),
                    "sampling": {k: v for k, v in asdict(opts).items()}, "evaluated_at": time.time(),
                    **dict(metadata or {})}
            written.append(store.write(df, meta))
        del model, engine
    return written
