"""`sweep`: methods x seeds x a parameter grid over the static baselines, as one Prefect flow.

    fade sweep --methods grpo,power --seeds 0,1 --grid power.alpha=1,2,3

Every (method, grid point, seed) is one arm x seed of a comparison run by the pipeline's stages
(flows.pipeline.compare): each training run is tagged with the sweep's name and the method, submitted to
the task runner (Dask under `fade sweep`), cached on its config and the code (a finished run is never
repeated) and retried a bounded number of times when it fails; the base model and the checkpoints
``eval.checkpoints`` keeps (a sweep's default: the last, :data:`SWEEP_DEFAULTS`) are evaluated, and the
results aggregated and reported under ``results/<pipeline.name>-sweep/``. The scheduled deployment
`nightly-baselines` (prefect.yaml) runs this flow.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any

import typer
from prefect import flow

from fade_core import config as fconfig
from fade_core import plan
from flows.options import SWEEP_DEFAULTS, ParamsOpt, SetOpt, config_or_params, fail, load_config
from flows.pipeline import compare

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




def sweep_config(cfg: fconfig.Config, methods: list[str] | None, seeds: list[int] | None,
                 grid: dict[str, list[Any]] | None, results: str = "results") -> fconfig.Config:
    """The sweep as a comparison config: its arms and seeds, named <pipeline.name>-sweep, outputs placed under
    results/<name>-sweep/. The arms are new input, so the result is validated (every method and parameter)."""
    arms = sweep_arms(list(methods or STATIC_BASELINES), dict(grid or {}))
    d = cfg.to_dict()
    d["pipeline"]["arms"] = {k: a.model_dump(mode="json") for k, a in arms.items()}
    d["pipeline"]["seeds"] = list(seeds) if seeds else cfg.pipeline.seeds
    d["pipeline"]["name"] = f"{cfg.pipeline.name}-sweep"
    swept = fconfig.from_dict(d)
    return plan.place_outputs(swept, plan.results_root(swept, results))


@flow(name="sweep", log_prints=True)
def sweep(config: fconfig.Config | None = None, methods: list[str] | None = None, seeds: list[int] | None = None,
          grid: dict[str, list] | None = None, results: str = "results") -> dict[str, Any]:
    """Train (cached, retried), evaluate, aggregate and report every arm x seed of the sweep of ``config``
    (None: params.yaml with :data:`SWEEP_DEFAULTS`)."""
    cfg = sweep_config(config_or_params(config, SWEEP_DEFAULTS), methods, seeds, grid, results)
    out = compare(cfg, cached=True, extra_tags=("fade-sweep", cfg.pipeline.name))
    return {**out, "arms": list(cfg.pipeline.arms), "run_dirs": out["runs"], "runs": len(out["runs"])}


def register(app: typer.Typer) -> None:
    """Add `fade sweep` to the CLI."""
    @app.command("sweep")
    def sweep_command(
        methods: Annotated[str, typer.Option("--methods", help="Comma-separated methods.")] = ",".join(STATIC_BASELINES),
        seeds: Annotated[str | None, typer.Option("--seeds", help="Comma-separated seeds (default: pipeline.seeds).")] = None,
        grid: Annotated[list[str] | None, typer.Option("--grid", help="METHOD.PARAM=V1,V2,... (repeatable).")] = None,
        results: Annotated[str, typer.Option("--results", help="Parent folder of results/<pipeline.name>-sweep/.")] = "results",
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """Sweep the static baselines: methods x seeds x grid, cached and retried; then evaluate and report."""
        from flows.pipeline import task_runner

        cfg = load_config(params, SWEEP_DEFAULTS + list(overrides or []))
        try:
            method_list = [m.strip() for m in methods.split(",") if m.strip()]
            seed_list = [int(s) for s in seeds.split(",")] if seeds else None
            grid_d = parse_grid(grid)
            swept = sweep_config(cfg, method_list, seed_list, grid_d, results)
        except (fconfig.ConfigError, ValueError) as e:
            raise fail("sweep", e) from None
        out = sweep.with_options(task_runner=task_runner(swept))(cfg, method_list, seed_list, grid_d, results)
        typer.echo(f"sweep of {out['runs']} runs finished; report: {out['report']}")
