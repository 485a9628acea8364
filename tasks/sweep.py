"""Prefect tasks of the `sweep` flow: cached, retried training runs.

A sweep reruns nothing that already finished: the training task is cached on its inputs (the run's full
config, hashed as its JSON) and on the code (this task's source plus a hash of every fade_core source file), so a change of
a parameter or of the science library retrains exactly the runs it affects.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

import fade_core
from fade_core import config as fconfig
from tasks.naming import train_run_name


@lru_cache(maxsize=1)
def code_version() -> str:
    """sha256 (16 hex) over every fade_core source file: part of the cache key of a training run."""
    root = Path(fade_core.__file__).parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@task(name="sweep-train-run", task_run_name=train_run_name, cache_policy=INPUTS + TASK_SOURCE, retries=2, retry_delay_seconds=5,
      persist_result=True)
def train_cached(config: fconfig.Config, code: str) -> dict[str, Any]:
    """One training run of the sweep (``code`` = :func:`code_version`, so code changes miss the cache)."""
    from tasks.train import train_run

    return train_run.fn(config, None, False)
