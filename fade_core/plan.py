"""The plan: what a validated Config asks for, as paths and work lists (pure; nothing is read or run here).

Every stage, flow and the trainer derive the same locations from the config through these functions,
so a formula such as "where is benchmark X's problem table" exists once:

    problem_path(cfg, bench)    <data.out_dir>/problems/<bench>.parquet  (written by `fade prepare`)
    needs_warmstart(cfg)        the base model is the built-in tiny model, which `fade warmstart` trains
    base_model_path(cfg)        where the policy starts (train.base_checkpoint / warmstart.out_dir / a local HF folder)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fade_core.config import BUILTIN_TINY


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


def base_model_path(cfg: Any) -> str:
    """Where the policy starts: train.base_checkpoint, else the warm-started built-in model
    (warmstart.out_dir) for ``builtin:tiny``, else model.name_or_path (a local HF folder). Raises
    FileNotFoundError naming what to run or set when the folder is not there."""
    if cfg.train.base_checkpoint:
        path = Path(cfg.train.base_checkpoint)
    elif needs_warmstart(cfg):
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
