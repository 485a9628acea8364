"""The `train` stage: base model + training problems + advantage method -> runs/<run_id>/.

Reads config sections train (method, params, steps, batch, loss, optimiser, checkpoints), rollout
(engine, temperature, top_p, max_new_tokens), model (name_or_path, dtype), warmstart (out_dir: the
built-in base model), data (out_dir: problems/<train.benchmark>.parquet) and compute (device, ranks,
deepspeed_config, workers, torch_threads). Writes ``runs/<run_id>/{config.yaml, metrics.jsonl,
metrics.duckdb, checkpoints/step-N/}`` (fade_core.runs); a rerun of the same config resumes from its last
checkpoint.

`fade train --set train.method=power --set train.params.alpha=3` trains the config's own run; `fade train
--arm power2` trains one pipeline arm for every pipeline seed into runs/power2/ (the DVC stage's command).
:func:`train_runs` is the training fan-out, the one that `fade run` (flows/pipeline.py) and `fade sweep` use
too: a task per run, submitted to the flow's task runner (Dask there; one at a time here).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow, get_run_logger, tags
from prefect.task_runners import ThreadPoolTaskRunner

from fade_core import config as fconfig
from fade_core import models, plan
from fade_core import runs as runs_lib
from flows import progress as progress_lines
from flows.options import ParamsOpt, SetOpt, config_or_params, fail, load_config
from tasks import train as tasks


def train_runs(plans: Sequence[plan.RunPlan], *, problems_path: str | None = None, progress: bool = False,
               cached: bool = False, extra_tags: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Train every run of ``plans`` (one task each, submitted to the current flow's task runner) and return
    the tasks' results in plan order. ``cached``: the sweep's task, cached on the run's config and the code
    (tasks/sweep.py). Each run is tagged with its arm, method and seed (and ``extra_tags``)."""
    from prefect.artifacts import create_progress_artifact, update_progress_artifact

    from tasks.naming import artifact_key

    log = get_run_logger()
    if cached:
        from tasks.sweep import code_version, train_cached

        code = code_version()
    futures = []
    for p in plans:
        with tags(*extra_tags, f"arm:{p.arm or p.config.train.label or p.config.train.method}",
                  f"method:{p.config.train.method}", f"seed:{p.seed}"):
            futures.append(train_cached.submit(p.config, code) if cached
                           else tasks.train_run.submit(p.config, problems_path, progress))
    pipeline = plans[0].config.pipeline.name if plans else "fade"
    artifact = create_progress_artifact(progress=0.0, key=artifact_key(pipeline, "train"),
                                        description="Training runs finished")
    results = []
    for i, (p, fut) in enumerate(zip(plans, futures, strict=True), 1):
        res = fut.result()
        results.append(res)
        update_progress_artifact(artifact, progress=100.0 * i / len(plans))
        last = res.get("last_metrics") or runs_lib.last_record(Path(res["run_dir"]))  # a finished run resumed
        log.info("trained %s seed %d -> %s (final reward %.3f)", p.arm or p.config.train.method, p.seed,
                 res["run_dir"], last.get("reward_mean", float("nan")))
    if cached:
        reused = sum(1 for fut in futures if _state_name(fut) == "Cached")
        progress_lines.note(f"train: {reused} of {len(plans)} runs found in the sweep's cache (same config, same code): "
                            "not redone")
    return results


def _state_name(future: Any) -> str:
    """The final state's name of a finished task future ("Cached" when Prefect reused a result), "" when unknown."""
    try:
        return str(future.state.name)
    except Exception:  # noqa: BLE001 - a count on the terminal must never fail a finished stage
        return ""


@flow(name="train", task_runner=ThreadPoolTaskRunner(max_workers=1))
def train(config: fconfig.Config | None = None, arm: str | None = None, problems_path: str | None = None,
          progress: bool = False) -> dict[str, Any]:
    """Train the config's own run, or (``arm``) that pipeline arm for every pipeline seed, one run at a time;
    return {"runs": [{run_id, run_dir, checkpoints, last_metrics, ...}]}."""
    cfg = config_or_params(config)
    plan.base_model_path(cfg)  # fail early, naming what is missing
    plans = plan.run_plans(cfg, [arm]) if arm else [plan.single_run(cfg)]
    return {"runs": train_runs(plans, problems_path=problems_path, progress=progress)}


def register(app: typer.Typer) -> None:
    """Add `fade train` to the CLI."""

    @app.command("train")
    def train_command(
        method: Annotated[str | None, typer.Option("--method", "-m", help="Shortcut for --set train.method=NAME.")] = None,
        arm: Annotated[str | None, typer.Option("--arm", help="Train this pipeline arm for every pipeline seed (runs/<arm>/), as `fade run` and `dvc repro` do.")] = None,
        problems: Annotated[str | None, typer.Option("--problems", help="Problem table (default: data/problems/<train.benchmark>.parquet).")] = None,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Live progress bar.")] = True,
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """RL-train the base model with an advantage method; records metrics and checkpoints under runs/<run_id>/."""
        cfg = load_config(params, ([f"train.method={method}"] if method else []) + list(overrides or []))
        try:
            starts = [p.config for p in plan.run_plans(cfg, [arm])] if arm else [cfg]
            for base in dict.fromkeys(plan.base_model_path(c) for c in starts):  # there and loadable: one line now
                models.load_tokenizer(models.resolve_model_path(base), trust_remote_code=cfg.model.trust_remote_code)
        except (ValueError, FileNotFoundError) as e:
            raise fail("train", e) from None
        out = train(cfg, arm=arm, problems_path=problems, progress=progress)
        for res in out["runs"]:
            typer.echo(f"run: {res['run_dir']}")
            for ck in res["checkpoints"]:
                typer.echo(f"checkpoint: {ck}")
            last = res["last_metrics"]
            if last:
                typer.echo(f"last step {last.get('step')}: reward {last.get('reward_mean', float('nan')):.3f}, "
                           f"entropy {last.get('entropy', float('nan')):.3f}")
