"""The whole study as one Prefect flow, and `fade run`.

    prepare -> warmstart -> train (every arm x seed, fanned out) -> evaluate (the base model and every
    kept checkpoint, fanned out) -> aggregate -> report

Each stage is the same flow or task that its own command (`fade prepare`, `fade train`, ...) and its DVC
stage run; this module only composes them. Independent training runs and evaluation shards are submitted
to a Dask task runner (prefect-dask): a local cluster of ``pipeline.workers`` processes by default, or the
cluster at ``pipeline.scheduler_address``.

`fade run` places every output of the study under one folder, ``results/<pipeline.name>/``::

    data/  models/base/  runs/<arm>/<run_id>/  eval/  reports/<report.name>/index.html
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow, get_run_logger

from fade_core import config as fconfig
from fade_core import runs as runs_lib
from flows.options import ParamsOpt, SetOpt, load_config

# `--quick`: the same pipeline on a smaller budget (a few minutes on 2 cores), for a first look.
QUICK_OVERRIDES = [
    "warmstart.steps=300",
    "train.steps=20",
    "train.checkpoint_every=10",
    "eval.n_samples=16",
    "eval.ks=[1, 4, 16]",
    "eval.max_problems=40",
    "pipeline.seeds=[0]",
]


def study_root(cfg: fconfig.Config, results: str = "results") -> Path:
    return Path(results) / cfg.pipeline.name


def place_outputs(cfg: fconfig.Config, root: Path) -> fconfig.Config:
    """The config with every stage's output folder moved under ``root``."""
    return fconfig.from_dict(
        cfg.to_dict(),
        [
            f"data.out_dir={root / 'data'}",
            f"warmstart.out_dir={root / 'models' / 'base'}",
            f"train.runs_dir={root / 'runs'}",
            f"eval.results_dir={root / 'eval'}",
            f"report.out_dir={root / 'reports'}",
        ],
    )


def run_configs(cfg: fconfig.Config) -> list[tuple[str, int, dict[str, Any]]]:
    """(arm, seed, config of that training run) for every arm x seed; runs of an arm go to runs_dir/<arm>/.

    When several runs share the machine (pipeline.workers > 1) and compute.torch_threads is 0, each run
    gets an equal share of the cores, so parallel runs don't oversubscribe them.
    """
    threads = cfg.compute.torch_threads or max(1, (os.cpu_count() or 1) // cfg.pipeline.workers)
    out = []
    for arm, spec in cfg.pipeline.arms.items():
        for seed in cfg.pipeline.seeds:
            d = cfg.to_dict()
            d["train"].update(method=spec.method, params=dict(spec.params), label=arm, seed=seed,
                              runs_dir=str(Path(cfg.train.runs_dir) / arm))
            d["compute"]["torch_threads"] = threads
            out.append((arm, seed, fconfig.from_dict(d).to_dict()))
    return out


def task_runner(cfg: fconfig.Config):
    """The Dask task runner of the fan-out: a scheduler address, or a local cluster of worker processes."""
    from prefect_dask import DaskTaskRunner

    if cfg.pipeline.scheduler_address:
        return DaskTaskRunner(address=cfg.pipeline.scheduler_address)
    return DaskTaskRunner(
        cluster_kwargs={"n_workers": cfg.pipeline.workers, "threads_per_worker": 1, "processes": True,
                        "dashboard_address": None, "host": "127.0.0.1"}
    )


@flow(name="pipeline", log_prints=True)
def pipeline(params_path: str = "params.yaml", overrides: list[str] | None = None, quick: bool = False,
             results: str = "results") -> dict[str, Any]:
    """Run the whole study of ``params_path`` (+ overrides); return where everything went.

    Under `fade run` the training runs and evaluations are submitted to the Dask runner that `fade run`
    attaches with ``pipeline.with_options(task_runner=...)``; called directly, Prefect's default runner is
    used.
    """
    from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact

    from flows.aggregate import aggregate
    from flows.evaluate import sampling_options
    from flows.prepare import prepare
    from flows.report import report
    from flows.warmstart import warmstart
    from tasks import evaluate as eval_tasks
    from tasks import train as train_tasks

    log = get_run_logger()
    resolved = resolve(params_path, overrides, quick)
    root = study_root(resolved, results)
    cfg = place_outputs(resolved, root)
    root.mkdir(parents=True, exist_ok=True)
    fconfig.save(cfg, root / "config.yaml")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal t0
        timings[stage] = round(time.perf_counter() - t0, 1)
        log.info("stage %s done in %.1f s", stage, timings[stage])
        t0 = time.perf_counter()

    prepare(cfg.to_dict())
    lap("prepare")
    if cfg.model.name_or_path == "builtin:tiny":
        base_dir = warmstart(cfg.to_dict(), progress=False)["out_dir"]
        lap("warmstart")
    else:  # a user's local HF checkpoint is already the base model
        base_dir = cfg.model.name_or_path

    runs = run_configs(cfg)
    total = len(runs)
    progress = create_progress_artifact(progress=0.0, key="fade-pipeline-train", description="Training runs finished")
    log.info("training %d runs (%d arms x %d seeds) on %d workers", total, len(cfg.pipeline.arms),
             len(cfg.pipeline.seeds), cfg.pipeline.workers)
    train_futures = [(arm, seed, train_tasks.train_run.submit(rc, None, False)) for arm, seed, rc in runs]
    trained: list[tuple[str, dict[str, Any]]] = []
    for i, (arm, seed, fut) in enumerate(train_futures, 1):
        res = fut.result()
        trained.append((arm, res))
        update_progress_artifact(progress, progress=100.0 * i / total)
        last = res.get("last_metrics") or runs_lib.last_record(Path(res["run_dir"]))  # a finished run resumed: nothing new
        log.info("trained %s seed %d -> %s (final reward %.3f)", arm, seed, res["run_dir"], last.get("reward_mean", float("nan")))
    lap("train")

    problem_paths = {b: str(Path(cfg.data.out_dir) / "problems" / f"{b}.parquet") for b in cfg.eval.benchmarks}
    sampling = sampling_options(cfg)
    common = dict(split=cfg.eval.split, max_problems=cfg.eval.max_problems, skip_existing=cfg.eval.skip_existing,
                  metadata={"config": cfg.to_dict()})
    shards = [(base_dir, None)]
    for arm, res in trained:
        ckpts = res["checkpoints"] if cfg.eval.checkpoints == "all" else res["checkpoints"][-1:]
        shards += [(ck, arm) for ck in ckpts]
    eval_futures = [
        eval_tasks.evaluate_checkpoint.submit(ck, problem_paths, cfg.eval.results_dir, cfg.eval.n_samples, sampling,
                                              group=arm, **common)
        for ck, arm in shards
    ]
    parts = [p for f in eval_futures for p in f.result()]
    log.info("evaluated %d checkpoints (%d parts)", len(shards), len(parts))
    lap("evaluate")

    aggregated = aggregate(cfg.to_dict())
    lap("aggregate")
    rep = report(cfg.to_dict())
    lap("report")

    index = str(Path(cfg.report.out_dir) / cfg.report.name / "index.html")
    create_markdown_artifact(
        key="fade-pipeline",
        markdown=f"# fade pipeline `{cfg.pipeline.name}`\n\nreport: `{index}`\n\n"
        + "\n".join(f"- {k}: {v} s" for k, v in timings.items()),
        description="Where the study's outputs are, and how long each stage took.",
    )
    return {"root": str(root), "report": index, "timings": timings, "runs": [r["run_dir"] for _, r in trained],
            "metrics": str(aggregated.get("metrics", "")), "report_outputs": {k: str(v) for k, v in rep.items()}
            if isinstance(rep, dict) else rep}


def resolve(params_path: str, overrides: list[str] | None, quick: bool) -> fconfig.Config:
    """params + (quick budget) + user overrides, validated; user overrides win over --quick."""
    return fconfig.load(params_path, (QUICK_OVERRIDES if quick else []) + list(overrides or []))


def register(app: typer.Typer) -> None:
    """Add `fade run` to the CLI."""
    @app.command("run")
    def run_command(
        quick: Annotated[bool, typer.Option("--quick", help="A smaller budget: one seed, fewer steps and samples.")] = False,
        results: Annotated[str, typer.Option("--results", help="Parent folder of results/<pipeline.name>/.")] = "results",
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """Run the whole study (prepare, warmstart, train every arm x seed, evaluate, aggregate, report)."""
        sets = (QUICK_OVERRIDES if quick else []) + list(overrides or [])
        cfg = load_config(params, sets)  # validate everything before any work
        start = time.perf_counter()
        flow_ = pipeline.with_options(task_runner=task_runner(cfg))
        out = flow_(str(params), list(overrides or []), quick, results)
        minutes = (time.perf_counter() - start) / 60
        typer.echo(f"\nfade run finished in {minutes:.1f} min; everything is under {out['root']}/")
        for stage, secs in out["timings"].items():
            typer.echo(f"  {stage:<10} {secs:8.1f} s")
        typer.echo(f"report: {out['report']}")
