"""``python -m fade_core.train --config run.yaml``: one run from a resolved config file, on every rank that
torchrun / deepspeed launches (tasks/train.py launches it for ``compute.ranks > 1``). Rank 0 prints one
JSON line: run_id, run_dir, steps, final_checkpoint."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import torch

from fade_core.train.trainer import Trainer, load_problems


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from fade_core import config as fconfig

    ap = argparse.ArgumentParser(prog="python -m fade_core.train",
                                 description="Train one fade RL run from a resolved config file.")
    ap.add_argument("--config", required=True, help="config.yaml (a resolved fade config)")
    ap.add_argument("--problems", default=None, help="problem table parquet (default: from the config)")
    ap.add_argument("--base-model", default=None, help="base model folder (default: from the config)")
    ap.add_argument("--run-dir", default=None, help="run folder (default: <train.runs_dir>/<run_id>)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="dotted override KEY=VALUE")
    ap.add_argument("--progress", action="store_true", help="live progress bar on rank 0")
    ap.add_argument("--stop-after", type=int, default=None, help="stop after this many steps (tests)")
    args = ap.parse_args(argv)
    cfg = fconfig.load(args.config, args.overrides)
    problems = load_problems(cfg, args.problems) if args.problems else None
    res = Trainer(cfg, problems=problems, base_model=args.base_model, run_dir=args.run_dir, progress=args.progress,
                  stop_after=args.stop_after).train()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({"run_id": res.run_id, "run_dir": str(res.run_dir), "steps": res.steps,
                          "final_checkpoint": str(res.final_checkpoint) if res.final_checkpoint else None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
