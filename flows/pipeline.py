"""The whole comparison as one Prefect flow, and `fade run`.

    prepare -> warmstart -> train (every arm x seed, fanned out) -> evaluate (the base model and the
    checkpoints eval.checkpoints keeps, fanned out) -> aggregate -> report

This module only composes: each stage is the flow of its own command (`fade prepare`, `fade warmstart`,
`fade aggregate`, `fade report`) or the fan-out of one (flows.train.train_runs, flows.evaluate.evaluate_shards),
on the work lists of fade_core.plan. The training runs and evaluations are submitted to a Dask task runner
(prefect-dask): a local cluster of ``pipeline.workers`` processes by default, or the cluster at
``pipeline.scheduler_address``.

`fade run` places every output under one folder, ``results/<pipeline.name>/``::

    config.yaml  data/  models/base/  runs/<arm>/<run_id>/  eval/  reports/<report.name>/index.html
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow, get_run_logger

from fade_core import config as fconfig
from fade_core import plan
from flows import progress
from flows.options import QUICK_HELP, QUICK_OVERRIDES, ParamsOpt, SetOpt, config_or_params, load_config

DASK_MALLOC_TRIM_DEFAULT = 65536
"""Dask's ``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_``: the value its nannies give workers."""


def keep_glibc_malloc_trim() -> None:
    """Stop Dask's nannies from setting MALLOC_TRIM_THRESHOLD_=65536 in the local cluster's workers.

    With that setting glibc hands freed memory back to the OS whenever 64 KiB are free at the top of the
    heap, so torch's many short-lived CPU tensors page-fault back in on every allocation: measured on 2
    cores (BENCHMARKS.md), two 30-step training runs in the workers took 62-68 s
    each instead of 36 s, with 3.7x the system time. glibc's own threshold adapts to the program instead.
    A threshold the user chose (Dask config other than Dask's default, or the variable in the environment,
    which Dask passes on) is kept.
    """
    import dask

    key = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ and dask.config.get(key, None) == DASK_MALLOC_TRIM_DEFAULT:
        dask.config.set({key: None})  # None: the nanny sets nothing (distributed.nanny._get_env_variables)


def task_runner(cfg: fconfig.Config):
    """The Dask task runner of the fan-out: a scheduler address, or a local cluster of worker processes
    (whose environment keeps glibc's malloc trimming: :func:`keep_glibc_malloc_trim`)."""
    from prefect_dask import DaskTaskRunner

    if cfg.pipeline.scheduler_address:
        return DaskTaskRunner(address=cfg.pipeline.scheduler_address)
    keep_glibc_malloc_trim()
    return DaskTaskRunner(
        cluster_kwargs={"n_workers": cfg.pipeline.workers, "threads_per_worker": 1, "processes": True,
                        "dashboard_address": None, "host": "127.0.0.1"}
    )


class StageClock:
    """Seconds per stage, logged as each finishes."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def lap(self, stage: str) -> None:
        self.timings[stage] = round(time.perf_counter() - self._t0, 1)
        get_run_logger().info("stage %s done in %.1f s", stage, self.timings[stage])
        self._t0 = time.perf_counter()


WARMSTART_INPUTS = ("warmstart", "model.tiny", "data.countdown", "rollout.max_new_tokens")
"""The config keys the warm start's result depends on (fade_core.warmstart.run_warmstart's inputs)."""


def warmstart_is_current(cfg: fconfig.Config) -> bool:
    """Whether ``warmstart.out_dir`` holds a finished warm start of the same inputs: its config.yaml (written
    last) agrees on :data:`WARMSTART_INPUTS` and its model files match their checksums. A rerun of `fade run`
    then keeps it (and its log) instead of training it again."""
    from fade_core.integrity import DamagedFile, verify_manifest

    base = Path(cfg.warmstart.out_dir)
    try:
        previous = fconfig.load(base / "config.yaml").to_dict()
    except (fconfig.ConfigError, OSError):
        return False
    now = cfg.to_dict()

    def pick(d: dict[str, Any], key: str) -> Any:
        for part in key.split("."):
            d = d.get(part) if isinstance(d, dict) else None
        return d

    if any(pick(previous, k) != pick(now, k) for k in WARMSTART_INPUTS):
        return False
    try:
        return verify_manifest(base)
    except DamagedFile:
        return False


def prepare_base(cfg: fconfig.Config, clock: StageClock) -> Path:
    """The stages before training, for the placed config ``cfg``: the problem tables, then the warm start
    unless the one there is current. Returns the base model's folder."""
    from flows.prepare import prepare
    from flows.warmstart import warmstart

    prepare(cfg.to_dict())
    clock.lap("prepare")
    if cfg.model.source:
        from fade_core.model_source import describe
        from flows.import_model import import_model

        progress.note(f"model: checking the import of {cfg.model.source} into {cfg.model.name_or_path}")
        folder, record, written = import_model(cfg)
        msg = f"model: {folder} {'imported' if written else 'is current: not redone'} ({describe(record)})"
        get_run_logger().info(msg)
        progress.note(msg)
        clock.lap("import_model")
    if plan.needs_warmstart(cfg):
        if warmstart_is_current(cfg):
            msg = f"warm start: {cfg.warmstart.out_dir} is current (same inputs, checksums verify): not redone"
            get_run_logger().info(msg)
            progress.note(msg)
        else:
            ws_log = Path(cfg.warmstart.out_dir) / "warmstart.jsonl"
            with progress.watch("warm start", "steps", cfg.warmstart.steps, lambda: progress.jsonl_last_step(ws_log)):
                warmstart(cfg, progress=False)
        clock.lap("warmstart")
    return plan.base_model_path(cfg)


def train_all(cfg: fconfig.Config, *, cached: bool = False, extra_tags: tuple[str, ...] = (),
              what: str = "train") -> tuple[list[plan.RunPlan], list[dict[str, Any]]]:
    """Train every arm x seed of the placed config ``cfg`` on the flow's task runner, with a progress line
    named ``what``: (the run plans, the training tasks' results in plan order)."""
    from flows.train import train_runs

    plans = plan.run_plans(cfg)
    get_run_logger().info("%s: %d runs (%d arms x %d seeds) on %d workers", what, len(plans),
                          len(cfg.pipeline.arms), len(cfg.pipeline.seeds), cfg.pipeline.workers)
    run_dirs = planned_run_dirs(plans)
    if run_dirs is not None:
        def done() -> int:
            return progress.planned_steps(run_dirs, cfg.train.steps)
    else:  # the problems cannot be read here (the runs will say why): count every run in the arms' folders
        runs_dirs = sorted({Path(p.config.train.runs_dir) for p in plans})

        def done() -> int:
            return progress.training_steps(runs_dirs, cfg.train.steps)
    with progress.watch(what, "steps", len(plans) * cfg.train.steps, done):
        return plans, train_runs(plans, cached=cached, extra_tags=extra_tags)


def planned_run_dirs(plans: list[plan.RunPlan]) -> list[Path] | None:
    """The run folder each plan trains in (its run id hashes its config and its training problems, read as the
    trainer reads them), or None when they cannot be read for any reason (the progress line then counts every run in
    the arms' folders, and the training task itself raises the error)."""
    from fade_core import runs
    from fade_core.train import load_problems

    digests: dict[str, str] = {}
    out = []
    try:
        for p in plans:
            t = p.config.train
            key = json.dumps([p.config.data.model_dump(mode="json"), t.benchmark, t.levels, t.problem_pool],
                             sort_keys=True)
            if key not in digests:
                digests[key] = runs.problems_digest(load_problems(p.config))
            out.append(runs.run_dir(p.config, digests[key]))
    except Exception:  # noqa: BLE001 - a progress line must never stop a run; the training task reports the error
        return None
    return out


def compare(cfg: fconfig.Config, *, cached: bool = False, extra_tags: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run every stage for the placed config ``cfg`` inside the current flow (whose task runner gets the
    fan-outs): the body of `fade run`, and of `fade sweep` with ``cached`` training runs."""
    from flows.aggregate import aggregate
    from flows.evaluate import evaluate_shards
    from flows.report import report

    log = get_run_logger()
    clock = StageClock()
    base_dir = prepare_base(cfg, clock)
    plans, trained = train_all(cfg, cached=cached, extra_tags=extra_tags)
    clock.lap("train")

    shards = plan.evaluation_shards(cfg, [(res["run_dir"], p.arm) for p, res in zip(plans, trained, strict=True)],
                                    base_model=base_dir)
    with progress.watch("evaluate", "parts", len(shards) * len(cfg.eval.benchmarks),
                        lambda: progress.results_parts(Path(cfg.eval.results_dir))):
        parts = evaluate_shards(cfg, shards)
    log.info("evaluated %d checkpoints (%d parts)", len(shards), len(parts))
    clock.lap("evaluate")

    aggregated = aggregate(cfg)
    clock.lap("aggregate")
    rep = report(cfg)
    clock.lap("report")
    return {"report": str(Path(cfg.report.out_dir) / cfg.report.name / "index.html"), "timings": clock.timings,
            "runs": [r["run_dir"] for r in trained], "metrics": str(aggregated.get("metrics", "")),
            "report_outputs": {k: str(v) for k, v in rep.items()}}


@flow(name="pipeline", log_prints=True)
def pipeline(config: fconfig.Config | None = None, results: str = "results") -> dict[str, Any]:
    """Run the whole comparison of ``config`` (None: params.yaml) with every output under
    ``<results>/<pipeline.name>/``; return where everything went and each stage's seconds.

    Under `fade run` the training runs and evaluations are submitted to the Dask runner that `fade run`
    attaches with ``pipeline.with_options(task_runner=...)``; called directly, Prefect's default runner is
    used.
    """
    from prefect.artifacts import create_markdown_artifact

    from tasks.naming import artifact_key

    resolved = config_or_params(config)
    root = plan.results_root(resolved, results)
    cfg = plan.place_outputs(resolved, root)
    root.mkdir(parents=True, exist_ok=True)
    fconfig.save(cfg, root / "config.yaml")
    out = compare(cfg)
    create_markdown_artifact(
        key=artifact_key(cfg.pipeline.name, "pipeline"),
        markdown=f"# fade pipeline `{cfg.pipeline.name}`\n\nreport: [{out['report']}]({Path(out['report']).resolve().as_uri()})\n\n"
        + "\n".join(f"- {k}: {v} s" for k, v in out["timings"].items()),
        description="Where the comparison's outputs are, and how long each stage took.",
    )
    return {"root": str(root), **out}


def register(app: typer.Typer) -> None:
    """Add `fade run` to the CLI."""
    @app.command("run")
    def run_command(
        quick: Annotated[bool, typer.Option("--quick", help=QUICK_HELP)] = False,
        results: Annotated[str, typer.Option("--results", help="Parent folder of results/<pipeline.name>/.")] = "results",
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """Run the whole comparison (prepare, warmstart, train every arm x seed, evaluate, aggregate, report)."""
        cfg = load_config(params, (QUICK_OVERRIDES if quick else []) + list(overrides or []))  # user's --set wins
        start = time.perf_counter()
        out = pipeline.with_options(task_runner=task_runner(cfg))(cfg, results)
        minutes = (time.perf_counter() - start) / 60
        typer.echo(f"\nfade run finished in {minutes:.1f} min; everything is under {out['root']}/")
        for stage, secs in out["timings"].items():
            typer.echo(f"  {stage:<10} {secs:8.1f} s")
        typer.echo(f"report: {out['report']}")
        from flows import errors

        typer.echo(f"log (Prefect's flow and task lines): {errors.log_path('run')}")
