"""The `evaluate` stage: checkpoints x prepared benchmarks -> one results part per (run, benchmark, step).

Reads config sections eval (benchmarks, n_samples, split, max_problems, checkpoints, temperature, seed,
max_new_tokens, prompts_per_batch, skip_existing, results_dir), rollout (engine, top_p, budget, vLLM
options), model (dtype), data (out_dir: where problems/<benchmark>.parquet are) and train (runs_dir).
Writes ``<eval.results_dir>/samples/<run_id>/<benchmark>/step-<step:08d>.parquet``; each part carries the
resolved config in its footer metadata.

`fade evaluate --run runs/<run_id>` evaluates that run's checkpoints (eval.checkpoints: all or last);
`fade evaluate --checkpoint DIR` one checkpoint folder; `--arm A` every run of that arm; `--model M` a model
fade did not train (an HF folder or a hub id: a baseline scored with the same prompts, sandbox and pass@k,
with the prompt options of params.yaml's model section); with none of them, every run under
train.runs_dir. `--benchmark B` (repeatable) replaces eval.benchmarks. :func:`evaluate_shards` is the evaluation fan-out that `fade run` and
`fade sweep` use too (which checkpoints: fade_core.plan.evaluation_shards).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from fade_core import config as fconfig
from fade_core import plan, runs
from flows.options import ParamsOpt, SetOpt, config_or_params, fail, load_config
from tasks import evaluate as tasks


def checkpoints_to_evaluate(cfg: fconfig.Config, run: str | None, checkpoint: str | None,
                            arm: str | None = None, model: str | None = None) -> list[tuple[str, str | None]]:
    """(checkpoint folder, results group) named by --checkpoint, --run, --arm (every run under
    train.runs_dir/<arm>/, in the arm's group), --model (an HF folder or hub id, found or fetched now so a
    missing one fails here in one line) or (none of them) every run under train.runs_dir."""
    if sum(x is not None for x in (run, checkpoint, arm, model)) > 1:
        raise fconfig.ConfigError("give one of --run, --checkpoint, --arm or --model")
    if model is not None:
        from fade_core import models

        try:
            models.load_tokenizer(models.resolve_model_path(model), trust_remote_code=cfg.model.trust_remote_code)
        except (FileNotFoundError, ValueError) as e:
            raise fconfig.ConfigError(f"--model: {e}") from None
        return [(model, None)]
    if arm is not None and arm not in cfg.pipeline.arms:
        raise fconfig.ConfigError(f"--arm {arm!r} is not in pipeline.arms ({', '.join(cfg.pipeline.arms)})")
    if checkpoint:
        p = Path(checkpoint)
        if not runs.is_checkpoint(p):
            raise fconfig.ConfigError(f"--checkpoint {p}: not a Hugging Face checkpoint folder (config.json + weights)")
        return [(str(p), None)]
    root = Path(cfg.train.runs_dir) / arm if arm else Path(cfg.train.runs_dir)
    run_dirs = [Path(run)] if run else list(runs.iter_run_dirs(root))
    if not run_dirs:
        raise fconfig.ConfigError(f"no run with checkpoints under {root}/ (train first, or pass --checkpoint)")
    try:
        return plan.evaluation_shards(cfg, [(d, arm) for d in run_dirs])
    except FileNotFoundError as e:
        raise fconfig.ConfigError(str(e)) from None


def evaluate_shards(cfg: fconfig.Config, shards: Sequence[tuple[str, str | None]], *,
                    foreign: bool = False) -> list[dict[str, Any]]:
    """Evaluate each (checkpoint, group) on eval.benchmarks, one task per checkpoint submitted to the current
    flow's task runner; return every written part ({run_id, benchmark, step, path, rows, pass_rate}).
    ``foreign``: the shards are models fade did not train (``--model``)."""
    sampling = plan.sampling_options(cfg)
    paths = plan.problem_paths(cfg)
    futures = [
        tasks.evaluate_checkpoint.submit(
            ck, paths, cfg.eval.results_dir, cfg.eval.n_samples, sampling, split=cfg.eval.split,
            max_problems=cfg.eval.max_problems, skip_existing=cfg.eval.skip_existing,
            metadata={"config": cfg.to_dict()}, group=group, foreign=foreign)
        for ck, group in shards
    ]
    return [part for f in futures for part in f.result()]


@flow(name="evaluate", task_runner=ThreadPoolTaskRunner(max_workers=1))
def evaluate(config: fconfig.Config | None = None, run: str | None = None, checkpoint: str | None = None,
             arm: str | None = None, model: str | None = None) -> dict[str, Any]:
    """Evaluate the selected checkpoints on eval.benchmarks, one at a time; return the written parts. With
    ``arm`` the parts go to ``<eval.results_dir>/samples/<arm>/`` (the folder DVC's evaluate@<arm> owns);
    ``model`` is a model fade did not train (an HF folder or hub id)."""
    cfg = config_or_params(config)
    parts = evaluate_shards(cfg, checkpoints_to_evaluate(cfg, run, checkpoint, arm, model), foreign=model is not None)
    _publish(parts, cfg.pipeline.name)
    return {"results_dir": cfg.eval.results_dir, "parts": parts}


def _publish(parts: list[dict[str, Any]], pipeline: str) -> None:
    from prefect.artifacts import create_table_artifact

    from tasks.naming import artifact_key

    if parts:
        rows = [{k: p[k] for k in ("run_id", "benchmark", "step", "rows", "pass_rate")} for p in parts]
        create_table_artifact(table=rows, key=artifact_key(pipeline, "evaluate"),
                              description="Evaluated checkpoints (sample pass rate).")


def register(app: typer.Typer) -> None:
    """Add `fade evaluate` to the CLI."""

    @app.command("evaluate")
    def evaluate_command(
        run: Annotated[str | None, typer.Option("--run", help="A run folder runs/<run_id>: its checkpoints (eval.checkpoints).")] = None,
        checkpoint: Annotated[str | None, typer.Option("--checkpoint", help="One checkpoint folder (HF format).")] = None,
        arm: Annotated[str | None, typer.Option("--arm", help="Every run of this pipeline arm (train.runs_dir/<arm>/).")] = None,
        model: Annotated[str | None, typer.Option("--model", help="A model fade did not train: an HF folder or a hub id (a baseline).")] = None,
        benchmark: Annotated[list[str] | None, typer.Option("--benchmark", "-b", help="Evaluate on this prepared benchmark (repeatable; replaces eval.benchmarks).")] = None,
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """Sample eval.n_samples completions per problem from checkpoints, score them, store one row per sample."""
        cfg = load_config(params, overrides)
        try:
            if benchmark:
                cfg.eval.benchmarks = list(benchmark)
            missing = [b for b, p in plan.problem_paths(cfg).items() if not Path(p).exists()]
            if missing:
                raise fconfig.ConfigError(f"benchmark(s) {', '.join(missing)} not prepared under {cfg.data.out_dir}/problems/ "
                                          "(run `fade prepare` with them in data.benchmarks)")
            checkpoints_to_evaluate(cfg, run, checkpoint, arm, model)
        except fconfig.ConfigError as e:
            raise fail("evaluate", e) from None
        out = evaluate(cfg, run=run, checkpoint=checkpoint, arm=arm, model=model)
        for p in out["parts"]:
            typer.echo(f"{p['run_id']} step {p['step']} {p['benchmark']}: {p['rows']} samples, "
                       f"pass rate {p['pass_rate']:.3f} -> {p['path']}")
