"""`sweep`: methods x seeds x a parameter grid over the static baselines, as one Prefect flow.

    fade sweep --methods grpo,power --seeds 0,1 --grid power.alpha=1,2,3

Every (method, grid point, seed) is one training run, tagged with the sweep's name and the method,
submitted to the task runner (Dask under `fade sweep`), cached on its inputs and the code (a finished run
is never repeated) and retried a bounded number of times when it fails. The last checkpoint of every run
is then evaluated, and the sweep's results are aggregated and reported under
``results/<pipeline.name>-sweep/``. The scheduled deployment `nightly-baselines` (prefect.yaml) runs
this flow.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow, get_run_logger, tags

from fade_core import config as fconfig
from flows.options import ParamsOpt, SetOpt

STATIC_BASELINES = ["grpo", "dr_grpo", "rloo", "dapo", "power", "asym_grpo", "passk"]


def parse_grid(items: list[str] | None) -> dict[str, list[Any]]:
    """['power.alpha=1,2,3'] -> {'power.alpha': [1, 2, 3]} (values parsed as YAML scalars)."""
    import yaml

    grid: dict[str, list[Any]] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or "." not in key:
            raise fconfig.ConfigError(f"grid entry {item!r} is not METHOD.PARAM=V1,V2,...")
        grid[key.strip()] = [yaml.safe_load(v) for v in values.split(",") if v.strip()]
    return grid


def sweep_arms(methods: list[str], grid: dict[str, list[Any]]) -> dict[str, fconfig.Arm]:
    """Arms of the sweep: each method once per point of its own grid (the product of its parameters)."""
    unknown = sorted({k.split(".", 1)[0] for k in grid} - set(methods))
    if unknown:
        raise fconfig.ConfigError(f"grid names methods not in the sweep: {', '.join(unknown)}")
    arms: dict[str, fconfig.Arm] = {}
    for method in methods:
        axes = {k.split(".", 1)[1]: v for k, v in grid.items() if k.split(".", 1)[0] == method}
        for point in itertools.product(*axes.values()) if axes else [()]:
            params = dict(zip(axes, point, strict=True))
            label = method + "".join(f"_{k}{v}" for k, v in params.items())
            arms[label.replace("-", "m")] = fconfig.Arm(method=method, params=params)
    return arms


def sweep_config(params_path: str, overrides: list[str] | None, methods: list[str] | None, seeds: list[int] | None,
                 grid: dict[str, list[Any]] | None, results: str = "results") -> fconfig.Config:
    """The sweep as a pipeline config: its arms and seeds, outputs under results/<name>-sweep/."""
    from flows.pipeline import place_outputs

    cfg = fconfig.load(params_path, overrides)
    arms = sweep_arms(list(methods or STATIC_BASELINES), dict(grid or {}))
    d = cfg.to_dict()
    d["pipeline"]["arms"] = {k: a.model_dump(mode="json") for k, a in arms.items()}
    d["pipeline"]["seeds"] = list(seeds) if seeds else cfg.pipeline.seeds
    d["pipeline"]["name"] = f"{cfg.pipeline.name}-sweep"
    cfg = fconfig.from_dict(d)  # validates every arm's method and parameters
    return place_outputs(cfg, Path(results) / cfg.pipeline.name)


@flow(name="sweep", log_prints=True)
def sweep(methods: list[str] | None = None, seeds: list[int] | None = None, grid: dict[str, list] | None = None,
          params_path: str = "params.yaml", overrides: list[str] | None = None) -> dict[str, Any]:
    """Train (cached, retried), evaluate, aggregate and report every arm x seed of the sweep."""
    from flows.aggregate import aggregate
    from flows.evaluate import sampling_options
    from flows.pipeline import run_configs
    from flows.prepare import prepare
    from flows.report import report
    from flows.warmstart import warmstart
    from tasks import evaluate as eval_tasks
    from tasks.sweep import code_version, train_cached

    log = get_run_logger()
    cfg = sweep_config(params_path, overrides, methods, seeds, grid)
    prepare(cfg.to_dict())
    if cfg.model.name_or_path == "builtin:tiny":
        warmstart(cfg.to_dict(), progress=False)
    code = code_version()
    futures = []
    for arm, seed, rc in run_configs(cfg):
        with tags("fade-sweep", cfg.pipeline.name, f"arm:{arm}", f"method:{rc['train']['method']}", f"seed:{seed}"):
            futures.append((arm, train_cached.submit(rc, code)))
    problem_paths = {b: str(Path(cfg.data.out_dir) / "problems" / f"{b}.parquet") for b in cfg.eval.benchmarks}
    evals = []
    for arm, fut in futures:
        res = fut.result()
        log.info("run %s done: %s", arm, res["run_dir"])
        evals.append(eval_tasks.evaluate_checkpoint.submit(
            res["checkpoints"][-1], problem_paths, cfg.eval.results_dir, cfg.eval.n_samples, sampling_options(cfg),
            split=cfg.eval.split, max_problems=cfg.eval.max_problems, skip_existing=True,
            metadata={"config": cfg.to_dict()}, group=arm))
    for f in evals:
        f.result()
    aggregate(cfg.to_dict())
    rep = report(cfg.to_dict())
    index = str(Path(cfg.report.out_dir) / cfg.report.name / "index.html")
    return {"arms": list(cfg.pipeline.arms), "runs": len(futures), "report": index, "outputs": rep}


def register(app: typer.Typer) -> None:
    """Add `fade sweep` to the CLI."""
    @app.command("sweep")
    def sweep_command(
        methods: Annotated[str, typer.Option("--methods", help="Comma-separated methods.")] = ",".join(STATIC_BASELINES),
        seeds: Annotated[str | None, typer.Option("--seeds", help="Comma-separated seeds (default: pipeline.seeds).")] = None,
        grid: Annotated[list[str] | None, typer.Option("--grid", help="METHOD.PARAM=V1,V2,... (repeatable).")] = None,
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """Sweep the static baselines: methods x seeds x grid, cached and retried; then evaluate and report."""
        from flows.pipeline import task_runner

        try:
            method_list = [m.strip() for m in methods.split(",") if m.strip()]
            seed_list = [int(s) for s in seeds.split(",")] if seeds else None
            grid_d = parse_grid(grid)
            cfg = sweep_config(str(params), overrides, method_list, seed_list, grid_d)
        except (fconfig.ConfigError, ValueError) as e:
            typer.secho(f"fade sweep: {e}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        out = sweep.with_options(task_runner=task_runner(cfg))(method_list, seed_list, grid_d, str(params), overrides)
        typer.echo(f"sweep of {out['runs']} runs finished; report: {out['report']}")
