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

:func:`evaluate_run` evaluates every checkpoint of ``runs/<run_id>/checkpoints/step-N/`` (or the last)
and commits each (step, benchmark) to the :class:`~fade_core.store.ResultsStore` atomically.
Checkpoint identity: ``runs/<run_id>/checkpoints/step-N`` gives run id, method label and seed from the
run id (``<label>-s<seed>-<hash>``) and step N; a folder elsewhere (the warm-started base model,
``models/base`` or ``models/base/checkpoints/step-N``) is an untrained baseline named after its
folder ("base").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fade_core.aggregate import parse_run_id, read_run_config
from fade_core.store import SAMPLE_COLUMNS, EvalKey, ResultsStore

STEP_DIR_RE = re.compile(r"^step-(\d+)$")
CODE_KINDS = ("code_stdio", "code_call")


@dataclass(frozen=True)
class CheckpointId:
    """Who produced a checkpoint: run id, method label, seed and training step."""

    run_id: str
    method: str
    seed: int
    step: int


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


def is_checkpoint(path: Path) -> bool:
    """A complete HF checkpoint folder: config.json and weights present."""
    has_weights = any(path.glob("*.safetensors")) or (path / "pytorch_model.bin").exists()
    return (path / "config.json").exists() and has_weights


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``[(step, path)]`` of ``run_dir/checkpoints/step-N/`` sorted by step; incomplete folders are skipped."""
    ck = Path(run_dir) / "checkpoints"
    out = []
    for p in ck.iterdir() if ck.is_dir() else []:
        m = STEP_DIR_RE.match(p.name)
        if m and p.is_dir() and is_checkpoint(p):
            out.append((int(m.group(1)), p))
    return sorted(out)


def identify_checkpoint(path: str | Path) -> CheckpointId:
    """Run id, method, seed and step of a checkpoint folder (see the module docstring)."""
    path = Path(path).resolve()
    m = STEP_DIR_RE.match(path.name)
    if m and path.parent.name == "checkpoints":
        owner = path.parent.parent
        step = int(m.group(1))
    else:
        owner, step = path, 0
    run_id = owner.name
    label, seed = parse_run_id(run_id)
    if seed is None:
        cfg = read_run_config(owner)
        seed = int(((cfg.get("train") or {}).get("seed")) or 0)
    return CheckpointId(run_id=run_id, method=label, seed=int(seed), step=step)


def build_prompt(problem: Mapping[str, Any]) -> str:
    """The text the policy is conditioned on: the problem's prompt, plus its starter code for code
    problems whose prompt does not already end with it (HumanEval prompts already hold the signature)."""
    prompt = str(problem["prompt"])
    starter = problem.get("starter_code") or ""
    if problem.get("kind") in CODE_KINDS and starter and not prompt.rstrip().endswith(starter.rstrip()):
        prompt = prompt.rstrip("\n") + "\n\n" + starter
    return prompt


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
            [build_prompt(p) for p in part], n_samples, temperature=opts.temperature, top_p=opts.top_p,
            max_new_tokens=opts.max_new_tokens, seed=opts.seed * 1_000_003 + j,
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


def run_checkpoints(run_dir: str | Path, which: str = "all") -> list[tuple[CheckpointId, Path]]:
    """The checkpoints of a run to evaluate: every one ('all') or the last ('last')."""
    if which not in ("all", "last"):
        raise ValueError(f"which must be 'all' or 'last', got {which!r}")
    found = list_checkpoints(run_dir)
    if not found:
        raise FileNotFoundError(f"{run_dir}: no complete checkpoints under checkpoints/step-N/")
    if which == "last":
        found = found[-1:]
    return [(identify_checkpoint(p), p) for _, p in found]


def is_run_dir(path: Path) -> bool:
    """A training run's folder: its config.yaml beside a training record or checkpoints."""
    return (path / "config.yaml").is_file() and ((path / "metrics.jsonl").exists() or (path / "checkpoints").is_dir())


def find_run_dirs(runs_dir: str | Path) -> list[Path]:
    """Run folders ``runs_dir/<run_id>/``, and one level deeper ``runs_dir/<arm>/<run_id>/`` (the DVC
    pipeline keeps each arm's runs in a folder of its own)."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    found = []
    for p in sorted(root.iterdir()):
        if not p.is_dir():
            continue
        if is_run_dir(p):
            found.append(p)
        else:
            found += [q for q in sorted(p.iterdir()) if q.is_dir() and is_run_dir(q)]
    return found


def iter_run_dirs(runs_dir: str | Path) -> Iterable[Path]:
    """Every run folder under ``runs_dir`` (see :func:`find_run_dirs`) with at least one complete checkpoint."""
    for p in find_run_dirs(runs_dir):
        if list_checkpoints(p):
            yield p
