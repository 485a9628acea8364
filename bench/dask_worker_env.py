"""Training runs in fade's Dask workers: Dask's worker environment against the one fade sets, in one run.

`fade run`, `fade sweep` and `fade study run` fan training runs out to a local Dask cluster
(flows.pipeline.task_runner). Dask's nannies give every worker ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``), so glibc returns freed memory to the OS whenever 64 KiB are
free at the top of the heap and torch's short-lived CPU tensors page-fault back in. fade unsets it
(flows.pipeline.keep_glibc_malloc_trim). The sides, each in a fresh process (the nanny writes its
environment into the process that starts it, so two sides cannot share one):

    dask-default   flows.pipeline.task_runner with keep_glibc_malloc_trim switched off (Dask's environment)
    fade           flows.pipeline.task_runner as fade runs it
    plain          the same runs as two plain ``python`` processes, no Dask (the floor)

Each side runs two RL runs at once (``pipeline.workers`` = 2, one per core), each ``--steps`` steps of the
default config (grpo, 32 prompts x 16 rollouts, built-in tiny model fresh from its config, the countdown
task generated in memory); it reports each run's wall seconds (first step to last; building the Trainer is not timed) and the
system CPU seconds of the process that ran it. Rounds alternate the sides.

    python bench/dask_worker_env.py [--steps 30] [--rounds 2] [--out bench/dask_worker_env.json]

The CPU must be otherwise idle: both runs of a side share the machine's 2 cores by design.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SIDES = ("dask-default", "fade", "plain")


def one_run(tmp: str, seed: int, steps: int) -> dict:
    """One RL run of ``steps`` steps; wall and system CPU seconds of this process over it."""
    import torch

    from fade_core import config as fconfig
    from fade_core import models
    from fade_core.train import Trainer

    cfg = fconfig.load(None, [
        "train.method=grpo", f"train.steps={steps}", "train.checkpoint_every=100000", f"train.seed={seed}",
        f"train.runs_dir={Path(tmp) / f'runs-{seed}'}", f"data.out_dir={Path(tmp) / 'nodata'}", "train.eval_every=0",
    ])
    model, tok = models.build_tiny(cfg.model.tiny, seed=0)
    base = str(models.save(model, tok, Path(tmp) / f"tiny-{seed}"))
    trainer = Trainer(cfg, base_model=base)  # builds the problems and the model: not timed
    sys0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime, time.perf_counter()
    trainer.train()
    return {"seconds": time.perf_counter() - t0, "sys_seconds": resource.getrusage(resource.RUSAGE_SELF).ru_stime - sys0,
            "torch_threads": torch.get_num_threads(), "malloc_trim_env": os.environ.get("MALLOC_TRIM_THRESHOLD_")}


def run_side(side: str, steps: int) -> list[dict]:
    """Two runs at once on ``side``; called in a fresh process."""
    from prefect import flow, task

    import flows.pipeline as pipeline
    from fade_core import config as fconfig

    with tempfile.TemporaryDirectory() as tmp:
        if side == "plain":
            code = (f"import json, sys; sys.path[:0] = [{str(REPO)!r}, {str(REPO / 'bench')!r}]; "
                    f"from dask_worker_env import one_run; print(json.dumps(one_run({tmp!r}, int(sys.argv[1]), {steps})))")
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            procs = [subprocess.Popen([sys.executable, "-c", code, str(s)], stdout=subprocess.PIPE, text=True, env=env)
                     for s in (1, 2)]
            return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        if side == "dask-default":
            pipeline.keep_glibc_malloc_trim = lambda: None
        cfg = fconfig.load(None, ["pipeline.workers=2"])

        @task
        def train_task(seed: int) -> dict:
            return one_run(tmp, seed, steps)

        @flow(task_runner=pipeline.task_runner(cfg))
        def two_runs() -> list[dict]:
            futures = [train_task.submit(s) for s in (1, 2)]
            return [f.result() for f in futures]

        from flows import prefect_api

        prefect_api.start()  # one API for this process and its workers, as every `fade` command has
        try:
            return two_runs()
        finally:
            prefect_api.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "bench" / "dask_worker_env.json"))
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # internal: run one side here
    args = ap.parse_args()
    if args.side:
        print("RESULT " + json.dumps(run_side(args.side, args.steps)))
        return 0
    results: dict[str, list[dict]] = {s: [] for s in SIDES}
    for r in range(args.rounds):
        for side in SIDES:
            out = subprocess.run([sys.executable, __file__, "--side", side, "--steps", str(args.steps)],
                                 capture_output=True, text=True, cwd=REPO)
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
            if out.returncode or not lines:
                sys.stderr.write(out.stderr[-4000:])
                raise SystemExit(f"side {side} failed (exit {out.returncode})")
            runs = json.loads(lines[-1][len("RESULT "):])
            results[side].extend(runs)
            print(f"round {r + 1} {side:>12}: " + ", ".join(f"{x['seconds']:.1f} s (sys {x['sys_seconds']:.1f} s)"
                                                            for x in runs), flush=True)
    med = {s: statistics.median(x["seconds"] for x in results[s]) for s in SIDES}
    summary = {
        "command": " ".join(["python", "bench/dask_worker_env.py", f"--steps {args.steps}", f"--rounds {args.rounds}"]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_average": os.getloadavg(),
        "median_seconds_per_run": med,
        "median_sys_seconds_per_run": {s: statistics.median(x["sys_seconds"] for x in results[s]) for s in SIDES},
        "dask_default_over_fade": med["dask-default"] / med["fade"], "fade_over_plain": med["fade"] / med["plain"],
        "runs": results,
    }
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
