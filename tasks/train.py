"""Prefect task of the `train` stage: one RL run (in-process, or torchrun over compute.ranks processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from prefect import task

from fade_core import config as fconfig
from fade_core import runs
from fade_core.train import Trainer, load_problems
from tasks.naming import train_run_name


@task(name="train-rl-run", task_run_name=train_run_name)
def train_run(config: fconfig.Config, problems_path: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Train the run of ``config`` (validated); returns run id, run dir, checkpoints, last metrics.

    compute.ranks > 1 launches ``torchrun --nproc_per_node=<ranks> -m fade_core.train`` (DeepSpeed when
    compute.deepspeed_config is set) on this node and waits for it; otherwise, or when this process is
    already one rank of a launch (env RANK set: infra/cluster/launch_*.sh run `fade train` per rank), it
    trains in this process.
    """
    cfg = config
    if cfg.compute.ranks > 1 and "RANK" not in os.environ:  # not yet inside a torchrun/deepspeed launch
        return _launch(cfg, problems_path)
    problems = load_problems(cfg, problems_path) if problems_path else None
    res = Trainer(cfg, problems=problems, progress=progress).train()
    return {
        "run_id": res.run_id,
        "run_dir": str(res.run_dir),
        "checkpoints": [str(p) for p in res.checkpoints],
        "resumed_from": res.resumed_from,
        "seconds": res.seconds,
        "last_metrics": {k: v for k, v in res.last_metrics.items() if not isinstance(v, list)},
    }


def _launch(cfg: fconfig.Config, problems_path: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = fconfig.save(cfg, Path(tmp) / "config.yaml")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={cfg.compute.ranks}",
               "-m", "fade_core.train", "--config", str(cfg_path)]
        if problems_path:
            cmd += ["--problems", problems_path]
        proc = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if proc.returncode != 0:
        raise RuntimeError(f"distributed training exited with code {proc.returncode}: {' '.join(cmd)}")
    run_dir = runs.run_dir(cfg, runs.problems_digest(load_problems(cfg, problems_path)))
    ckpts = [p for _, p in runs.list_checkpoints(run_dir)]
    return {"run_id": run_dir.name, "run_dir": str(run_dir), "checkpoints": [str(p) for p in ckpts],
            "resumed_from": None, "seconds": None, "last_metrics": {}}
