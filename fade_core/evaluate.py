"""Evaluation: sample n completions per problem from a checkpoint, score them, one row per sample.

For one checkpoint and one benchmark's problem table:

1. Load the checkpoint (HF format, or any HF model: a folder or a hub id) with
   :func:`fade_core.models.load` and wrap it in a rollout engine (:func:`fade_core.rollout.build_engine`:
   "hf" on the CPU, "vllm" on GPUs).
2. Render every problem's prompt with :func:`fade_core.data.prompts.build_prompt`, the function training
   uses (template, chat template, system message): a checkpoint of a fade run gets its run's prompt options
   (:func:`prompt_style_for`), any other model the options given. In chunks of ``prompts_per_batch``
   problems, sample ``n`` completions per prompt (temperature / top-p from the options; the budget is the
   options' or, when null, the benchmark template's; completions stop at the template's stop sequences;
   the seed of chunk ``j`` is derived from the evaluation seed and ``j``, so an evaluation is
   reproducible given its options). A warning says when most completions hit the budget.
3. Score every completion with :func:`fade_core.verifiers.score_batch` (sandboxed code, math, countdown).
4. Return the samples frame in the store's schema (:data:`fade_core.store.SAMPLE_COLUMNS`); latency is
   the chunk's generation + scoring time divided evenly over its samples.

:func:`evaluate_checkpoints` evaluates a list of checkpoints (a run's: :func:`fade_core.runs.run_checkpoints`)
and commits each (run, benchmark, step) to the :class:`~fade_core.store.ResultsStore` atomically. Who made
a checkpoint (run id, method, seed, step) is :func:`fade_core.runs.identify_checkpoint`, or
:func:`model_ident` for a model fade did not train (``fade evaluate --model``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fade_core.data.prompts import PromptStyle, build_prompt, generation_budget, prompt_record
from fade_core.rollout.base import SEED_STRIDE
from fade_core.runs import CheckpointId, checkpoint_owner, identify_checkpoint, load_verified, read_run_config
from fade_core.store import SAMPLE_COLUMNS, EvalKey, ResultsStore

log = logging.getLogger(__name__)
TRUNCATION_WARNING = 0.5
"""Warn when more than this share of an evaluation's completions hit the generation budget."""


@dataclass
class SamplingOptions:
    """How completions are drawn at evaluation (mirrors config sections eval + rollout)."""

    engine: str = "hf"
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int | None = None  # None: the budget of each benchmark's prompt template
    seed: int = 0
    prompts_per_batch: int = 16
    dtype: str = "float32"
    engine_opts: dict[str, Any] = field(default_factory=dict)
    workers: int | None = None  # verifier workers (None: the verifier's default)
    model_opts: dict[str, Any] = field(default_factory=dict)  # fade_core.models.load options (dtype wins from above)
    prompt_style: PromptStyle = field(default_factory=PromptStyle)  # for models outside a fade run


def model_ident(name_or_path: str | Path) -> CheckpointId:
    """The identity of a model fade did not train: run id and method are its folder's name (a hub id with
    '/' as '--'), seed 0, step 0."""
    name = str(name_or_path).rstrip("/")
    label = Path(name).name if Path(name).expanduser().exists() else name.replace("/", "--")
    label = re.sub(r"[^A-Za-z0-9._=+,()@-]", "_", label) or "model"
    return CheckpointId(run_id=label, method=label, seed=0, step=0)


def prompt_style_for(checkpoint: str | Path | None, default: PromptStyle) -> PromptStyle:
    """The prompt options a checkpoint is evaluated with: those of the run that trained it (its
    config.yaml's model section) for a checkpoint inside a fade run, else ``default``. The chat template
    itself travels in the checkpoint's tokenizer files."""
    owner = checkpoint_owner(checkpoint) if checkpoint is not None else None
    model = (read_run_config(owner).get("model") or {}) if owner is not None else None
    return PromptStyle.from_model_config(model) if model else default


def engine_tokenizer(engine: Any) -> Any:
    """The tokenizer an engine encodes with (None for an engine without one: prompts are then plain)."""
    return getattr(engine, "tokenizer", None)


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
    style: PromptStyle | None = None,
    prompt_info: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Sample ``n_samples`` completions per problem from ``checkpoint`` and score them.

    problems: a problem table (fade_core.data.schema), one benchmark. ``engine`` (an object with the
    RolloutEngine ``generate``) overrides loading the checkpoint; ``score_batch`` overrides
    :func:`fade_core.verifiers.score_batch`; ``progress(done, total)`` is called after each chunk;
    ``style``: the prompt options (default: :func:`prompt_style_for` the checkpoint); ``prompt_info``, when
    given, receives the prompt record (:func:`fade_core.data.prompts.prompt_record`) and the budget.
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

        model, tokenizer = load_verified(models.load, checkpoint, **{**opts.model_opts, "dtype": opts.dtype})
        engine = build_engine(opts.engine, model, tokenizer, **opts.engine_opts)
    if score_batch is None:
        from fade_core.verifiers import score_batch

    rows_in = _records(problems)
    style = style or prompt_style_for(checkpoint, opts.prompt_style)
    rendered = [build_prompt(p, engine_tokenizer(engine), style) for p in rows_in]
    budget = opts.max_new_tokens or generation_budget(rendered)
    if prompt_info is not None:
        prompt_info.update(prompt_record(rows_in, rendered, engine_tokenizer(engine), style), max_new_tokens=budget)
    out: list[dict[str, Any]] = []
    chunk = max(1, int(opts.prompts_per_batch))
    for j, start in enumerate(range(0, len(rows_in), chunk)):
        part = rows_in[start : start + chunk]
        prompts = rendered[start : start + chunk]
        t0 = time.perf_counter()
        batch = engine.generate(
            [p.text for p in prompts], n_samples, temperature=opts.temperature, top_p=opts.top_p,
            max_new_tokens=budget, seed=opts.seed * SEED_STRIDE + j, stop=[p.stop for p in prompts],
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
    cut = sum(r["finish_reason"] == "length" for r in out) / max(len(out), 1)
    if cut > TRUNCATION_WARNING:
        log.warning("%s step %d on %s: %.0f%% of the completions hit the generation budget of %d tokens and were "
                    "cut; raise eval.max_new_tokens", ident.run_id, ident.step, benchmarks[0], 100 * cut, budget)
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
    verifiers' (as in :func:`evaluate`). Each part's metadata holds the prompt record (templates, chat
    template, one rendered prompt) and the budget. Returns the written part paths.
    """
    from fade_core import models
    from fade_core.rollout import build_engine

    opts = opts or SamplingOptions()
    written: list[Path] = []
    engine: Any = None
    # a damaged part (undecodable, or rows that differ from its checksum) is not kept: it is evaluated again.
    # Only the parts of these checkpoints are checked: checking every part of the store in each of a study's
    # 56 evaluation tasks took ~5 min for a resume that had nothing left to evaluate.
    wanted = {EvalKey(ident.run_id, bench, ident.step) for ident, _ in checkpoints for bench in problem_tables}
    existing = ({p.key: p for p in store.parts(skip_damaged=True) if p.key in wanted and store.intact(p.path)}
                if skip_existing else {})
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
        model, tokenizer = load_verified(models.load, path, **{**opts.model_opts, "dtype": opts.dtype})
        engine = reuse_or_build_engine(engine, opts, model, tokenizer, build_engine)
        style = prompt_style_for(path, opts.prompt_style)
        for bench in todo:
            label = f"{ident.run_id} step {ident.step} {bench}"
            info: dict[str, Any] = {}
            df = evaluate(path, problem_tables[bench], n_samples, opts, ident=ident, engine=engine, score_batch=score_batch,
                          progress=(lambda d, t, label=label: progress(label, d, t)) if progress else None,
                          style=style, prompt_info=info)
            meta = {"checkpoint": str(path), "n_samples": n_samples, "num_problems": int(len(problem_tables[bench])),
                    "sampling": {k: v for k, v in asdict(opts).items()}, "evaluated_at": time.time(),
                    "prompt": info, **dict(metadata or {})}
            written.append(store.write(df, meta))
        del model
    del engine
    return written


def weights_signature(model: Any) -> tuple[Any, ...]:
    """The model class and every parameter's name and shape: two checkpoints with the same signature can
    share one engine (their weights are copied in)."""
    return (type(model).__name__, tuple((k, tuple(v.shape)) for k, v in model.state_dict().items()))


def reuse_or_build_engine(engine: Any, opts: SamplingOptions, model: Any, tokenizer: Any,
                          build: Callable[..., Any]) -> Any:
    """The engine for the next checkpoint. An engine that owns a copy of the weights (vllm: starting one takes
    ~20 s and holds its KV cache) is kept across checkpoints of the same architecture, with the new weights
    and tokenizer pushed in; the hf engine wraps the loaded model itself and is built anew."""
    if engine is not None and getattr(engine, "owns_weights", False) and \
            getattr(engine, "signature", None) == weights_signature(model):
        engine.tokenizer = tokenizer
        engine.sync_weights(model)
        return engine
    del engine
    engine = build(opts.engine, model, tokenizer, **opts.engine_opts)
    if getattr(engine, "owns_weights", False):
        engine.signature = weights_signature(model)
    return engine
