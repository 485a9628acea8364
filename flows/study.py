"""`fade study`: the FADE paper's claims checked on fade's own runs, as one Prefect flow.

    fade study            # every study arm x >= 3 seeds, n >= 128 samples per problem: hours on 2 cores
    fade study --quick    # the same machinery on a smoke budget
    fade study --arms asym_d0_5,asym_d2 --set pipeline.seeds=[0,1]
    fade study --write-params study/params.yaml   # the study's resolved params, for the DVC stage group
    fade study --claims-only --params study/params.yaml   # STUDY.md from runs already there (its last stage)

The same study as a DVC stage group: study/dvc.yaml runs the pipeline's stages inside study/ with
study/params.yaml (written by ``--write-params``, so it is params.yaml plus the study's defaults), and
its last stage, ``claims``, is ``fade study --claims-only``: `dvc repro study/dvc.yaml`.

The study is the pipeline of `fade run` (flows/pipeline.py: prepare, warmstart, train every arm x seed,
evaluate, aggregate, report) run with the study's arms (:func:`fade_core.study.study_arms`) under
``results/study/``, followed by the claims (:func:`fade_core.study.compute_claims`) written to
``results/study/STUDY.md`` and ``results/study/claims.json`` (with the study's own figure in
``results/study/figures/``; STUDY.md links the report's figures under ``results/study/reports/``).

Defaults on top of params.yaml (``--set`` overrides win over all of them): ``pipeline.name=study``, the
study's arms, at least 3 seeds (params.yaml's seeds, extended), ``eval.n_samples`` at least 128 and
``eval.skip_existing=true``. It resumes where it stopped: a training run restarts from its last
checkpoint (same config, same run directory) and checkpoints already evaluated with the same
``n_samples`` are not evaluated again. The run time of every sitting is added to
``results/study/runtime.json`` and STUDY.md states the total.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from prefect import flow, get_run_logger

from fade_core import config as fconfig
from fade_core import study as study_lib
from flows.options import ParamsOpt, SetOpt, load_config
from flows.pipeline import QUICK_OVERRIDES, task_runner

STUDY_NAME = "study"
MIN_SEEDS = 3
MIN_SAMPLES = 128
QUICK_SEEDS = [0, 1]  # two seeds, so the smoke run still has a seed-to-seed spread
STUDY_QUICK_OVERRIDES = [s for s in QUICK_OVERRIDES if not s.startswith("pipeline.seeds=")] + [
    f"pipeline.seeds={QUICK_SEEDS}"
]


def _flow_yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=100_000, sort_keys=False).strip()


def study_overrides(params_path: str, overrides: list[str] | None, quick: bool = False,
                    arms: list[str] | None = None) -> list[str]:
    """The --set list that turns params.yaml into the study: study defaults, then --quick, then the user's."""
    base = fconfig.load(params_path, list(overrides or []))
    seeds = list(base.pipeline.seeds)
    for s in range(max(seeds) + 1 if seeds else 0, 10_000):
        if len(seeds) >= MIN_SEEDS:
            break
        seeds.append(s)
    selected = {k: a.model_dump(mode="json") for k, a in study_lib.select_arms(arms).items()}
    defaults = [
        f"pipeline.name={STUDY_NAME}",
        f"pipeline.arms={_flow_yaml(selected)}",
        f"pipeline.seeds={_flow_yaml(seeds)}",
        f"eval.n_samples={max(base.eval.n_samples, MIN_SAMPLES)}",
        "eval.skip_existing=true",
        "report.title=fade study",
        "report.study=true",
    ]
    return defaults + (STUDY_QUICK_OVERRIDES if quick else []) + list(overrides or [])


def study_command(params: str, overrides: list[str] | None, quick: bool, arms: list[str] | None,
                  results: str) -> str:
    """The command line that reproduces this study, as STUDY.md states it."""
    parts = ["fade", "study"] + (["--quick"] if quick else []) + (["--arms", ",".join(arms)] if arms else [])
    if results != "results":
        parts += ["--results", results]
    if params != "params.yaml":
        parts += ["--params", params]
    for s in overrides or []:
        parts += ["--set", s]
    return shlex.join(parts)


def read_sittings(path: Path) -> list[dict[str, Any]]:
    """The sittings recorded in a study's runtime.json (none when it does not exist yet)."""
    if not path.exists():
        return []
    try:
        return list(json.loads(path.read_text()).get("sittings", []))
    except (ValueError, AttributeError) as e:
        raise ValueError(f"{path}: not a study runtime record ({e}); move it away to start the count anew") from e


def record_sitting(root: Path, seconds: float, quick: bool, stages: dict[str, float] | None = None) -> tuple[float, int]:
    """Add this sitting (its seconds and, when known, its per-stage seconds) to root/runtime.json; return
    (total seconds, sittings) of the study in that folder."""
    path = root / "runtime.json"
    sittings = read_sittings(path)
    sittings.append({"finished": datetime.now(UTC).isoformat(timespec="seconds"), "seconds": round(seconds, 1),
                     "quick": quick, **({"stages": {k: round(float(v), 1) for k, v in stages.items()}} if stages else {})})
    total = sum(float(s.get("seconds", 0.0)) for s in sittings)
    path.write_text(json.dumps({"total_seconds": round(total, 1), "sittings": sittings}, indent=2) + "\n")
    return total, len(sittings)


def stage_seconds(root: Path) -> tuple[dict[str, float] | None, bool]:
    """Per-stage seconds of the study in root, summed over its sittings: (stages, True) when every sitting
    recorded its stages; else (the last sitting's stages or None, False)."""
    sittings = read_sittings(root / "runtime.json")
    if sittings and all(isinstance(s.get("stages"), dict) for s in sittings):
        total: dict[str, float] = {}
        for s in sittings:
            for k, v in s["stages"].items():
                total[k] = total.get(k, 0.0) + float(v)
        return total, True
    last = sittings[-1].get("stages") if sittings else None
    return (dict(last) if isinstance(last, dict) else None), False


def figure_links(root: Path, cfg: fconfig.Config) -> dict[str, str]:
    """The study's figures (root/figures/) and the report's that exist, as paths relative to root (where
    STUDY.md is), PNG where there is one."""
    dirs = [root / "figures", Path(cfg.report.out_dir) / cfg.report.name / "figures"]
    out = {}
    for name, _caption in study_lib.FIGURES:
        found = [d / f"{name}.{fmt}" for fmt in ("png", "svg") for d in dirs if (d / f"{name}.{fmt}").exists()]
        if found:
            out[name] = os.path.relpath(found[0], root)
    return out


def write_study(root: Path, cfg: fconfig.Config, *, command: str, runtime_s: float, sittings: int,
                timings: dict[str, float] | None, quick: bool, timings_all: bool = False) -> dict[str, str]:
    """Compute the claims from root's runs and aggregated tables; write STUDY.md and claims.json."""
    claims, _figs = study_lib.study_from_results(
        cfg.train.runs_dir, Path(cfg.eval.results_dir) / "results.duckdb", arms=cfg.pipeline.arms,
        benchmark=cfg.train.benchmark, fig_dir=root / "figures", formats=list(cfg.report.formats) or ["png"])
    machine = f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores"
    md = study_lib.render_study_md(
        claims, command=command, runtime_s=runtime_s, sittings=sittings, timings=timings, timings_all=timings_all,
        figures=figure_links(root, cfg), arms=cfg.pipeline.arms, seeds=cfg.pipeline.seeds,
        n_samples=cfg.eval.n_samples, machine=machine, quick=quick,
    )
    md_path, json_path = root / "STUDY.md", root / "claims.json"
    md_path.write_text(md)
    json_path.write_text(study_lib.claims_json(
        claims, command=command, runtime_seconds=round(runtime_s, 1), sittings=sittings, quick=quick,
        seeds=list(cfg.pipeline.seeds), n_samples=cfg.eval.n_samples,
        arms={k: a.model_dump(mode="json") for k, a in cfg.pipeline.arms.items()}))
    return {"study_md": str(md_path), "claims": str(json_path),
            "verdicts": json.dumps({c.id: c.verdict for c in claims})}


def claims_only(params_path: Path, overrides: list[str] | None = None) -> dict[str, str]:
    """STUDY.md and claims.json beside ``params_path`` (a study's resolved params: study/params.yaml of the DVC
    stage group, or results/study/config.yaml of a flow run) from the runs and tables its paths point at.
    Nothing is trained or evaluated; the run time is not measured here (the stages ran elsewhere)."""
    cfg = fconfig.load(params_path, list(overrides or []))
    root = params_path.resolve().parent
    if not Path(cfg.eval.results_dir, "results.duckdb").exists():
        raise FileNotFoundError(f"{Path(cfg.eval.results_dir, 'results.duckdb')}: no aggregated results; run the "
                                "study's stages first (dvc repro study/dvc.yaml, or fade study)")
    if (root / "dvc.yaml").exists():  # the DVC stage group (run from the folder above it)
        command = f"dvc repro {root.name}/dvc.yaml"
    else:
        command = study_command(str(params_path), overrides, False, None, "results") + " --claims-only"
    return write_study(root, cfg, command=command, runtime_s=float("nan"), sittings=0, timings=None, quick=False)


def publish(root: Path, md_dest: Path, fig_dir: Path) -> Path:
    """Copy root/STUDY.md to ``md_dest`` with every figure it shows copied into ``fig_dir`` and its link
    rewritten to point there (relative to md_dest): the study as committed to the repository."""
    import re
    import shutil

    src = root / "STUDY.md"
    if not src.exists():
        raise FileNotFoundError(f"{src}: no study written there yet (run fade study first)")
    fig_dir.mkdir(parents=True, exist_ok=True)

    def relink(m: re.Match[str]) -> str:
        fig = (root / m.group(2)).resolve()
        if not fig.exists():
            raise FileNotFoundError(f"{src} shows {m.group(2)}, which does not exist under {root}")
        dest = fig_dir / fig.name
        shutil.copyfile(fig, dest)
        return f"![{m.group(1)}]({os.path.relpath(dest, md_dest.resolve().parent)})"

    text = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", relink, src.read_text())
    md_dest.write_text(text)
    return md_dest


@flow(name="study", log_prints=True)
def study(params_path: str = "params.yaml", overrides: list[str] | None = None, quick: bool = False,
          arms: list[str] | None = None, results: str = "results", command: str | None = None) -> dict[str, Any]:
    """Run the pipeline with the study's arms (a subflow on the Dask runner), then write the claims."""
    from flows.pipeline import pipeline

    log = get_run_logger()
    start = time.perf_counter()
    sets = study_overrides(params_path, overrides, quick, arms)
    cfg = fconfig.load(params_path, sets)
    log.info("study: %d arms x %d seeds, %d samples per problem", len(cfg.pipeline.arms), len(cfg.pipeline.seeds),
             cfg.eval.n_samples)
    out = pipeline.with_options(task_runner=task_runner(cfg))(params_path, sets, False, results)
    root = Path(out["root"])
    placed = fconfig.load(root / "config.yaml")
    total, sittings = record_sitting(root, time.perf_counter() - start, quick, out.get("timings"))
    stages, all_sittings = stage_seconds(root)
    written = write_study(root, placed, command=command or study_command(params_path, overrides, quick, arms, results),
                          runtime_s=total, sittings=sittings, timings=stages, quick=quick, timings_all=all_sittings)
    log.info("study written: %s", written["study_md"])
    return {**out, **written, "runtime_s": total, "sittings": sittings}


def register(app: typer.Typer) -> None:
    """Add `fade study` to the CLI."""

    @app.command("study")
    def study_command_(
        quick: Annotated[bool, typer.Option("--quick", help="Smoke budget: 2 seeds, 20 steps, 16 samples.")] = False,
        arms: Annotated[str | None, typer.Option("--arms", help="Comma-separated study arms (default: all).")] = None,
        results: Annotated[str, typer.Option("--results", help="Parent folder of results/study/.")] = "results",
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
        write_params: Annotated[Path | None, typer.Option(
            "--write-params", help="Write the study's resolved params (documented) to this file and stop.")] = None,
        claims_only_: Annotated[bool, typer.Option(
            "--claims-only", help="Only write STUDY.md and claims.json beside --params, from the runs already there.")] = False,
        publish_: Annotated[Path | None, typer.Option(
            "--publish", help="Copy <results>/study/STUDY.md to this file, its figures to docs/<stem>/ beside it, and stop.")] = None,
    ) -> None:
        """The paper's claims on fade's own runs: every study arm x seed, then STUDY.md and claims.json."""
        arm_list = [a.strip() for a in arms.split(",") if a.strip()] if arms else None
        load_config(params, overrides)
        if publish_ is not None:
            try:
                md = publish(Path(results) / STUDY_NAME, publish_, publish_.parent / "docs" / publish_.stem.lower())
            except FileNotFoundError as e:
                typer.secho(f"fade study: {e}", fg=typer.colors.RED, err=True)
                raise typer.Exit(1) from None
            typer.echo(f"published {md}")
            return
        if claims_only_:
            try:
                written = claims_only(params, list(overrides or []))
            except FileNotFoundError as e:
                typer.secho(f"fade study: {e}", fg=typer.colors.RED, err=True)
                raise typer.Exit(1) from None
            for cid, verdict in json.loads(written["verdicts"]).items():
                typer.echo(f"  {cid:<22} {verdict}")
            typer.echo(f"study: {written['study_md']}\nclaims: {written['claims']}")
            return
        try:
            sets = study_overrides(str(params), overrides, quick, arm_list)
            fconfig.load(params, sets)
        except (fconfig.ConfigError, ValueError) as e:
            typer.secho(f"fade study: {e}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        if write_params is not None:
            header = (f"# The study's params, written by `{study_command(str(params), overrides, quick, arm_list, results)} "
                      f"--write-params {write_params}`:\n# {params} plus the study's defaults. Regenerate it after "
                      "changing those; edit it to change only the study.\n")
            write_params.write_text(header + fconfig.render_yaml(fconfig.load(params, sets)))
            typer.echo(f"wrote {write_params}")
            return
        out = study(str(params), list(overrides or []), quick, arm_list, results,
                    study_command(str(params), overrides, quick, arm_list, results))
        typer.echo(f"\nfade study finished: {out['runtime_s'] / 60:.1f} min in total over {out['sittings']} sitting(s)")
        for cid, verdict in json.loads(out["verdicts"]).items():
            typer.echo(f"  {cid:<22} {verdict}")
        typer.echo(f"study: {out['study_md']}\nclaims: {out['claims']}\nreport: {out['report']}")
