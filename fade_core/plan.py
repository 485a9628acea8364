"""The plan: what a validated Config asks for, as paths and work lists (pure; nothing is read or run here).

Every stage, flow and the trainer derive the same locations from the config through these functions,
so a formula such as "where is benchmark X's problem table" exists once:

    problem_path(cfg, bench)    <data.out_dir>/problems/<bench>.parquet  (written by `fade prepare`)
    needs_warmstart(cfg)        the base model is the built-in tiny model, which `fade warmstart` trains
    base_model_path(cfg)        where the policy starts (train.base_checkpoint / warmstart.out_dir / an HF folder or hub id)
    base_checkpoints(cfg)       the warm-start sweep's checkpoint folders (pipeline.base_checkpoints, globs expanded)
    place_outputs(cfg, root)    every stage's outputs under one folder (`fade run`: results/<pipeline.name>/)
    tensorboard_root(cfg)       the folder of every run's live TensorBoard logs (tracking_dir: one run's)
    run_plans(cfg)              the training work list: pipeline.arms x base checkpoints x pipeline.seeds
    evaluation_shards(...)      the evaluation work list: the base model and the checkpoints eval.checkpoints keeps
    sampling_options(cfg)       how evaluation samples
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fade_core import runs
from fade_core.config import BUILTIN_TINY, HUB_ID_RE


def problem_path(cfg: Any, benchmark: str) -> Path:
    """The prepared problem table of ``benchmark``: ``<data.out_dir>/problems/<benchmark>.parquet``."""
    return Path(cfg.data.out_dir) / "problems" / f"{benchmark}.parquet"


def problem_paths(cfg: Any, benchmarks: list[str] | None = None) -> dict[str, str]:
    """{benchmark: problem table path} of ``benchmarks`` (default: the evaluated ones, eval.benchmarks)."""
    return {b: str(problem_path(cfg, b)) for b in (cfg.eval.benchmarks if benchmarks is None else benchmarks)}


def needs_warmstart(cfg: Any) -> bool:
    """Whether the base model is the built-in tiny model (pre-trained by `fade warmstart`); a local HF
    checkpoint is a base model as it is."""
    return cfg.model.name_or_path == BUILTIN_TINY


def is_hub_id(name: str) -> bool:
    """``org/name`` that is not a local path: a Hugging Face hub id (fade_core.models resolves it)."""
    return not Path(name).expanduser().exists() and not name.startswith((".", "/", "~")) and bool(re.match(HUB_ID_RE, name))


def base_model_path(cfg: Any) -> str:
    """Where the policy starts: train.base_checkpoint, else the warm-started built-in model
    (warmstart.out_dir) for ``builtin:tiny``, else model.name_or_path (a local HF folder, or a hub id
    returned as it is: :func:`fade_core.models.resolve_model_path` finds or fetches it). Raises
    FileNotFoundError naming what to run or set when a folder is not there."""
    if cfg.train.base_checkpoint:
        path = Path(cfg.train.base_checkpoint)
    elif needs_warmstart(cfg):
        path = Path(cfg.warmstart.out_dir)
        if not (path / "config.json").exists():
            raise FileNotFoundError(
                f"the built-in base model {path}/ does not exist: run `fade warmstart` first "
                "(or set train.base_checkpoint / model.name_or_path)"
            )
    elif not getattr(cfg.model, "source", None) and is_hub_id(cfg.model.name_or_path):  # an import's folder is local
        return cfg.model.name_or_path
    else:
        path = Path(cfg.model.name_or_path)
    if not (path / "config.json").exists() and getattr(cfg.model, "source", None):
        raise FileNotFoundError(f"base model {path}: not imported yet from model.source {cfg.model.source} "
                                "(run `fade import-model`)")
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"base model {path}: no config.json (not a Hugging Face model folder)")
    return str(path)


# ============================================================================ where a pipeline writes
def results_root(cfg: Any, results: str | Path = "results") -> Path:
    """The folder of a whole pipeline's outputs: ``<results>/<pipeline.name>``."""
    return Path(results) / cfg.pipeline.name


def place_outputs(cfg: Any, root: str | Path) -> Any:
    """A copy of ``cfg`` with every stage's output folder under ``root``::

        data/  models/base/  runs/  eval/  reports/  tensorboard/

    (only those six fields change, each validated on assignment: the rest of the config was validated
    when it was loaded)."""
    root = Path(root)
    placed = cfg.model_copy(deep=True)
    placed.data.out_dir = str(root / "data")
    placed.warmstart.out_dir = str(root / "models" / "base")
    placed.train.runs_dir = str(root / "runs")
    placed.eval.results_dir = str(root / "eval")
    placed.report.out_dir = str(root / "reports")
    placed.tracking.tensorboard_dir = str(root / "tensorboard")
    return placed


def tensorboard_root(cfg: Any) -> Path:
    """The folder of every run's live TensorBoard logs: tracking.tensorboard_dir, or (null) ``tensorboard/``
    beside train.runs_dir (``runs`` -> ``tensorboard``), so ``tensorboard --logdir`` on it shows every run."""
    folder = cfg.tracking.tensorboard_dir
    return Path(folder) if folder else Path(cfg.train.runs_dir).parent / "tensorboard"


def tracking_dir(cfg: Any, run_id: str) -> Path:
    """Where run ``run_id`` writes its live TensorBoard events (and W&B offline files):
    ``<tensorboard_root(cfg)>/<run_id>``."""
    return tensorboard_root(cfg) / run_id


# ============================================================================ the training work list
@dataclass(frozen=True)
class RunPlan:
    """One training run of a comparison: its arm (None for the config's own train section), its seed and
    its complete config (train.method / params / label / seed / runs_dir set for the arm)."""

    arm: str | None
    seed: int
    config: Any


def base_checkpoints(cfg: Any) -> list[str]:
    """The checkpoint folders of a warm-start sweep: ``pipeline.base_checkpoints`` with glob patterns expanded
    (matches in natural order, so checkpoint-900 comes before checkpoint-1000); every one must be an HF
    folder (config.json). Empty: no sweep. Raises FileNotFoundError naming a pattern or folder that is not."""
    import glob

    def natural(p: str) -> list[Any]:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p)]

    out: list[str] = []
    for entry in cfg.pipeline.base_checkpoints:
        found = sorted(glob.glob(entry), key=natural) if glob.has_magic(entry) else [entry]
        found = [f for f in found if Path(f).is_dir()]
        if not found:
            raise FileNotFoundError(f"pipeline.base_checkpoints: {entry!r} matches no folder")
        for folder in found:
            if not (Path(folder) / "config.json").exists():
                raise FileNotFoundError(f"pipeline.base_checkpoints: {folder}: no config.json (not a Hugging Face model folder)")
            out.append(folder)
    return list(dict.fromkeys(out))


def checkpoint_label(folder: str) -> str:
    """The short name of a base checkpoint in labels: its folder's name (``checkpoint-1000``)."""
    return Path(folder).name


def run_plans(cfg: Any, arms: Sequence[str] | None = None) -> list[RunPlan]:
    """One run per (arm, seed) of ``pipeline.arms`` x ``pipeline.seeds`` (``arms``: only those, in that order),
    each in ``<train.runs_dir>/<arm>/`` with the arm's name as its label, its TensorBoard logs in the
    comparison's one :func:`tensorboard_root`. With ``pipeline.base_checkpoints``
    (a warm-start sweep) one run per (arm, checkpoint, seed): train.base_checkpoint is the checkpoint and
    the label ``<arm>@<checkpoint folder name>``, so each checkpoint is a line of its own in tables.

    When several runs share the machine (pipeline.workers > 1) and compute.torch_threads is 0, each run
    gets an equal share of the cores, so parallel runs don't oversubscribe them.
    """
    names = list(cfg.pipeline.arms) if arms is None else list(arms)
    unknown = [a for a in names if a not in cfg.pipeline.arms]
    if unknown:
        raise ValueError(f"arm(s) {', '.join(unknown)} not in pipeline.arms ({', '.join(cfg.pipeline.arms)})")
    threads = cfg.compute.torch_threads or max(1, (os.cpu_count() or 1) // cfg.pipeline.workers)
    starts: list[str | None] = list(base_checkpoints(cfg)) or [None]
    out = []
    for arm in names:
        spec = cfg.pipeline.arms[arm]
        for start in starts:
            for seed in cfg.pipeline.seeds:
                run = cfg.model_copy(deep=True)
                run.train.method = spec.method
                run.train.params = dict(spec.params)
                if spec.lr is not None:
                    run.train.lr = spec.lr
                run.train.label = arm if start is None else f"{arm}@{checkpoint_label(start)}"
                run.train.seed = seed
                run.tracking.tensorboard_dir = str(tensorboard_root(cfg))  # one root for every arm, not per arm folder
                run.train.runs_dir = str(Path(cfg.train.runs_dir) / arm)
                if start is not None:
                    run.train.base_checkpoint = start
                run.compute.torch_threads = threads
                out.append(RunPlan(arm, seed, run))
    return out


def single_run(cfg: Any) -> RunPlan:
    """The run of the config's own ``train`` section (``fade train`` without --arm)."""
    return RunPlan(None, cfg.train.seed, cfg)


# ============================================================================ the evaluation work list
def evaluation_shards(cfg: Any, run_dirs: Sequence[tuple[str | Path, str | None]],
                      base_model: str | Path | None = None) -> list[tuple[str, str | None]]:
    """(checkpoint folder, results group) to evaluate: ``base_model`` first (group None: its samples go to
    ``samples/base/``), then each run's checkpoints that ``eval.checkpoints`` selects ('all' or 'last'), in
    the run's group (the arm: ``samples/<arm>/<run_id>/``). Runs without a complete checkpoint raise."""
    shards: list[tuple[str, str | None]] = [(str(base_model), None)] if base_model is not None else []
    for run, group in run_dirs:
        shards += [(str(p), group) for _, p in runs.run_checkpoints(run, cfg.eval.checkpoints)]
    return shards


def sampling_options(cfg: Any) -> Any:
    """How evaluation samples (fade_core.evaluate.SamplingOptions) from the eval, rollout, model, compute sections
    (a null budget: each benchmark's prompt template's)."""
    from fade_core.data.prompts import PromptStyle
    from fade_core.evaluate import SamplingOptions

    r = cfg.rollout
    return SamplingOptions(
        engine=r.engine, temperature=cfg.eval.temperature, top_p=r.top_p,
        max_new_tokens=cfg.eval.max_new_tokens or r.max_new_tokens, seed=cfg.eval.seed,
        prompts_per_batch=cfg.eval.prompts_per_batch, dtype=cfg.model.dtype, engine_opts=engine_options(cfg, cfg.eval.seed),
        workers=cfg.compute.workers or None, model_opts=models_load_options(cfg),
        prompt_style=PromptStyle.from_model_config(cfg.model),
    )


def engine_options(cfg: Any, seed: int = 0) -> dict[str, Any]:
    """The rollout engine's constructor options (fade_core.rollout.build_engine) from the rollout and model
    sections: none for "hf"; for "vllm" the GPU options, its dtype, context length, CPU KV cache and a seed."""
    r = cfg.rollout
    if r.engine != "vllm":
        return {}
    return {"tensor_parallel_size": r.tensor_parallel_size, "gpu_memory_utilization": r.gpu_memory_utilization,
            "dtype": r.vllm_dtype or cfg.model.dtype, "max_model_len": r.vllm_max_model_len,
            "cpu_kvcache_gb": r.vllm_cpu_kvcache_gb, "enforce_eager": r.vllm_enforce_eager, "seed": seed}


def models_load_options(cfg: Any) -> dict[str, Any]:
    """How checkpoints are loaded for evaluation: fade_core.models.load's options from the model section."""
    from fade_core.models import load_options

    return load_options(cfg.model)
