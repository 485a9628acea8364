"""`fade study`: the FADE paper's claims checked on fade's own runs, as one Prefect flow and four commands.

    fade study run            # lr sweep, then 11 arms x 5 seeds, n >= 128 samples: ~2.5 h on 2 cores (STUDY.md)
    fade study run --quick    # the same machinery on a smoke budget
    fade study run --arms asym_d0_5,asym_d2 --set pipeline.seeds=[0,1]
    fade study params --write study/params.yaml   # the study's resolved params, for the DVC stage group
    fade study claims --params study/params.yaml  # STUDY.md from runs already there (the DVC group's last stage)
    fade study publish STUDY.md                   # copy results/study/STUDY.md here, its figures to docs/study/

The same study as a DVC stage group: study/dvc.yaml runs the pipeline's stages inside study/ with
study/params.yaml (written by ``fade study params --write``, so it is params.yaml plus the study's
defaults), and its last stage, ``claims``, is ``fade study claims``: `dvc repro study/dvc.yaml`. The DVC
group has no sweep stage (not built yet): it trains each arm at the ``lr`` study/params.yaml gives it (null:
train.lr); copy the chosen rates from a flow run's results/study/config.yaml to reproduce that study.

The study is the comparison of `fade run` (flows/pipeline.py) run with the study's arms
(:func:`fade_core.study.study_arms`) under ``results/study/``, followed by the claims
(:mod:`fade_core.claims`) written to ``results/study/STUDY.md`` and ``results/study/claims.json`` (with the
study's own figure in ``results/study/figures/``; STUDY.md links the report's figures under
``results/study/reports/``) by :func:`fade_core.study.write_study`.

Defaults on top of params.yaml (``--set`` overrides win over all of them): ``pipeline.name=study``, the
study's arms (fade_core.study.DEFAULT_ARMS, or --arms), at least 5 seeds (params.yaml's seeds, extended),
``train.steps=600`` (STUDY_STEPS), ``train.prompts_per_step=8`` (STUDY_PROMPTS_PER_STEP), RL on the easy level only
(``train.levels``, STUDY_TRAIN_LEVELS; validation and test keep every level) and on a fixed pool of its first
50 problems (``train.problem_pool``, STUDY_PROBLEM_POOL), a rollout budget ``train.max_rollouts`` = steps x prompts x G (so dapo and codapo
stop at the same rollouts as the rest), the periodic validation pass@1 every 10 steps (``train.eval_every``,
the sweep's criterion and the time-to-threshold curves), ``eval.checkpoints=last``, ``eval.n_samples`` at
least 128, ``eval.ks=[1, 10, 100]`` (the k of the claims) and ``eval.skip_existing=true``. Before the
comparison, the learning-rate sweep (:func:`lr_sweep_phase`, fade_core.lr_sweep) trains every arm at every
rate of ``--lrs`` for one seed and chooses each arm's rate on the validation split (an arm whose choice is
its grid's edge is trained one grid step further and chooses again, ``--lr-extensions`` times at most);
rloo takes asym_d1's
(fade_core.study.LR_TIED).
It resumes where it stopped: a training run restarts from its last
checkpoint (same config, same run directory) and checkpoints already evaluated with the same
``n_samples`` are not evaluated again. The run time of every sitting, one stopped by Ctrl-C, SIGTERM or a
failure included, is added to ``results/study/runtime.json`` (fade_core.study_runtime.record_sitting) and STUDY.md
states the total.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from prefect import flow, get_run_logger

from fade_core import config as fconfig
from fade_core import lr_sweep, plan, study_runtime
from fade_core import study as study_lib
from fade_core.params_yaml import render_yaml
from flows.options import ParamsOpt, SetOpt, fail, load_config
from flows.pipeline import QUICK_OVERRIDES, task_runner

STUDY_NAME = "study"
MIN_SEEDS = 5
STUDY_STEPS = 600  # the study's steps (and so, with STUDY_PROMPTS_PER_STEP, its rollout budget: 600 x 8 x 16 =
# 76,800 rollouts). 400 steps (the 2026-12-05 pool study) left FADE's entropy at ~0.24 nats at the chosen rate and
# delta >= 0.945: the schedule check failed. 600 steps with H_target = 0.65 x H_0 (fade_core.study.
# FADE_TARGET_FRACTION, which gives the probes) is the cheapest design where delta covered half its range at
# 3.33e-5 in the probes; 800 steps at the default target would have doubled the study's cost. Probes at 8 prompts
# x 800 steps: validation pass@1 (the sweep's criterion) of fade 0.139 at step 600 and 0.122 at 800 at 3.33e-5,
# 0.086 / 0.094 at 1e-4, which overfits the pool after ~400 steps.
STUDY_PROMPTS_PER_STEP = 8  # prompts per RL step (x group_size 16 = 128 rollouts). A quarter of params.yaml's 32:
# a step costs ~0.31 s per worker with the periodic validation (measured 2026-12-05, two runs side by side on 2
# cores; ~0.45 s at 16 prompts; ~0.3 s at 4 prompts too, so halving the prompts does not halve a step)
MIN_SAMPLES = 128
STUDY_KS = (1, 10, 100)  # the k of the claims (pass@1 against pass@100); n >= MIN_SAMPLES estimates each
QUICK_SEEDS = [0, 1]  # two seeds, so the smoke run still has a seed-to-seed spread
STUDY_QUICK_OVERRIDES = [s for s in QUICK_OVERRIDES if not s.startswith("pipeline.seeds=")] + [
    f"pipeline.seeds={QUICK_SEEDS}"
]
STUDY_TRAIN_LEVELS = ["easy"]  # RL trains on the easy level (3 numbers), where the solve rate can rise within the
# budget; on all three levels the batch solve rate stayed ~0.1 and FADE was Power(alpha=3) throughout. Validation
# and test keep every level (headroom).
STUDY_PROBLEM_POOL = 50  # ... and on a fixed pool of its first 50 easy training problems (train.problem_pool),
# revisited ~96 times each in 600 steps, so that the training solve rate and the entropy move far enough for FADE's schedule.
# Without a pool (all ~680 easy problems) p_hat stayed below 1/3 for 200-300 steps at every swept rate and FADE's
# alpha never left 3 (FADE = Power(alpha=3): the 2026-12-04 study). Single-seed probes (fade, 8 prompts, pool 50,
# 2026-12-05): lr 1e-4: alpha 3 -> 1 by step ~170, delta 0.86 at step 300 and 0.81 at 400 (67% of its reachable
# range [0.72, 1]); lr 3.33e-5: alpha 1 by step ~400, delta 0.95 at 400; lr 3e-4: delta 0.77 at 300. Validation
# pass@1 (the sweep's criterion) at 400 steps: 0.114 at 3.33e-5, 0.110 at 1e-4 (0.084 at 3e-4 after 300 steps).
# At 16 prompts x 300 steps (the same cost) 1e-4 peaked at step ~150 and fell to 0.095 while 3.33e-5 rose to
# 0.134, a rate at which delta stayed 1: hence 8 prompts a step (the horizon and the entropy target: STUDY_STEPS);
# whether the schedule engages at the rate the sweep chooses is the study's check.
STUDY_EVAL_EVERY = 10  # periodic validation pass@1 (eval_pass1): the sweep's criterion, time-to-threshold
QUICK_EVAL_EVERY = 5


def _flow_yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=100_000, sort_keys=False).strip()


def study_overrides(params_path: str, overrides: list[str] | None, quick: bool = False,
                    arms: list[str] | None = None) -> list[str]:
    """The --set list that turns params.yaml into the study: study defaults, then --quick, then the user's.
    The rollout budget (train.max_rollouts) is steps x prompts x G of the resolved train section, so every
    arm samples what a one-round-per-step method samples in train.steps steps."""
    quick_sets = STUDY_QUICK_OVERRIDES if quick else []
    base = fconfig.load(params_path, [f"train.steps={STUDY_STEPS}", f"train.prompts_per_step={STUDY_PROMPTS_PER_STEP}"]
                        + quick_sets + list(overrides or []))
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
        f"train.steps={STUDY_STEPS}",
        f"train.prompts_per_step={STUDY_PROMPTS_PER_STEP}",
        f"train.levels={_flow_yaml(STUDY_TRAIN_LEVELS)}",
        f"train.problem_pool={STUDY_PROBLEM_POOL}",
        f"eval.n_samples={max(base.eval.n_samples, MIN_SAMPLES)}",
        f"eval.ks={_flow_yaml(list(STUDY_KS))}",
        "eval.skip_existing=true",
        "eval.checkpoints=last",
        f"train.eval_every={QUICK_EVAL_EVERY if quick else STUDY_EVAL_EVERY}",
        "train.eval_split=validation",
        f"train.max_rollouts={base.train.steps * base.train.prompts_per_step * base.train.group_size}",
        "report.title=fade study",
        "report.study=true",
    ]
    return defaults + quick_sets + list(overrides or [])


def study_command(params: str, overrides: list[str] | None, quick: bool, arms: list[str] | None,
                  results: str, lrs: list[float] | None = None, lr_extensions: int | None = None) -> str:
    """The command line that reproduces this study, as STUDY.md states it."""
    parts = ["fade", "study", "run"] + (["--quick"] if quick else []) + (["--arms", ",".join(arms)] if arms else [])
    parts += ["--lrs", ",".join(f"{x:g}" for x in lrs)] if lrs else []
    parts += ["--lr-extensions", str(lr_extensions)] if lr_extensions is not None else []
    if results != "results":
        parts += ["--results", results]
    if params != "params.yaml":
        parts += ["--params", params]
    for s in overrides or []:
        parts += ["--set", s]
    return shlex.join(parts)


def claims_only(params_path: Path, overrides: list[str] | None = None) -> dict[str, str]:
    """STUDY.md and claims.json beside ``params_path`` (a study's resolved params: study/params.yaml of the DVC
    stage group, or results/study/config.yaml of a flow run) from the runs and tables its paths point at.
    Nothing is trained or evaluated and no sitting is recorded. In the folder of a `fade study run` (its
    runtime.json and claims.json are there) STUDY.md keeps that run's command, run time and sittings and names
    this recomputation; otherwise the run time is "not measured" (the stages ran elsewhere, e.g. dvc repro)."""
    cfg = fconfig.load(params_path, list(overrides or []))
    root = params_path.resolve().parent
    if not Path(cfg.eval.results_dir, "results.duckdb").exists():
        raise FileNotFoundError(f"{Path(cfg.eval.results_dir, 'results.duckdb')}: no aggregated results; run the "
                                "study's stages first (dvc repro study/dvc.yaml, or fade study run)")
    if (root / "dvc.yaml").exists():  # the DVC stage group (run from the folder above it)
        command = f"dvc repro {root.name}/dvc.yaml"
    else:
        parts = ["fade", "study", "claims"] + (["--params", str(params_path)] if str(params_path) != "params.yaml" else [])
        command = shlex.join(parts + [a for s in overrides or [] for a in ("--set", s)])
        kept = study_lib.rewrite_study(root, cfg, recomputed_by=command)  # a `fade study run` folder
        if kept is not None:
            return kept
    return study_lib.write_study(root, cfg, command=command, runtime_s=float("nan"), sittings=0, timings=None,
                                 quick=False)


@flow(name="lr-sweep", log_prints=True)
def lr_sweep_phase(config: fconfig.Config, root: str, lrs: list[float],
                   max_extensions: int = lr_sweep.MAX_EXTENSIONS) -> dict[str, Any]:
    """The study's learning-rate sweep (fade_core.lr_sweep): prepare and warm start as the pipeline does,
    train every arm at every rate of ``lrs`` for the sweep seed under <root>/sweep/runs/, choose a rate per
    arm by the fixed rule (with its edge extensions: an arm whose choice is the smallest or largest of its
    rates is trained one grid step further, up to ``max_extensions`` times), and write <root>/sweep/lr_choice.json and the sensitivity figure. Resumable like
    any training: finished sweep runs are not trained again."""
    from fade_core.runs import load_training_records
    from flows.pipeline import StageClock, prepare_base, train_all

    placed = plan.place_outputs(config, root)
    tied = {a: b for a, b in study_lib.LR_TIED.items() if a in config.pipeline.arms and b in config.pipeline.arms}
    folder = Path(root) / "sweep"
    rates = {a: [float(x) for x in lrs] for a in config.pipeline.arms if a not in tied}
    sweep = lr_sweep.sweep_config(placed, rates, folder, tied)
    clock = StageClock()
    prepare_base(placed, clock)
    train_all(sweep, what="lr sweep")
    records, _ = load_training_records(sweep.train.runs_dir)
    choices = lr_sweep.choose(records, list(config.pipeline.arms), rates, tied)
    for extension in range(1, max_extensions + 1):  # the edge rule: one grid step past an edge choice
        more = lr_sweep.extensions(choices)
        if not more:
            break
        get_run_logger().info("lr sweep: extension %d: %s", extension,
                              ", ".join(f"{a} at {lr:g}" for a, lr in more.items()))
        for arm, lr in more.items():
            rates[arm].append(lr)
        train_all(lr_sweep.sweep_config(placed, {a: [lr] for a, lr in more.items()}, folder, tied),
                  what=f"lr sweep, extension {extension}")
        records, _ = load_training_records(sweep.train.runs_dir)
        choices = lr_sweep.choose(records, list(config.pipeline.arms), rates, tied)
    (folder / "lr_choice.json").write_text(json.dumps(
        {"rule": lr_sweep.RULE, "seed": lr_sweep.SWEEP_SEED, "lrs": [float(x) for x in lrs],
         "rates": {a: sorted(r) for a, r in rates.items()}, "tied": tied,
         "arms": {a: c.to_dict() for a, c in choices.items()}}, indent=2) + "\n")
    fig = lr_sweep.fig_sensitivity(choices)
    if fig is not None:
        study_lib.save_figure(fig, Path(root) / "figures" / "lr_sensitivity", list(config.report.formats) or ["png"])
    for arm, c in choices.items():
        get_run_logger().info("lr sweep: %s -> %s (%s)", arm, c.lr, c.reason)
    return {"choices": choices, "timings": clock.timings}


@flow(name="study", log_prints=True)
def study(config: fconfig.Config | None = None, results: str = "results", quick: bool = False,
          command: str | None = None, lrs: list[float] | None = None,
          lr_extensions: int = lr_sweep.MAX_EXTENSIONS) -> dict[str, Any]:
    """The learning-rate sweep (:func:`lr_sweep_phase`), then the comparison of the study config ``config``
    (None: params.yaml with the study's defaults) with every arm at its chosen rate, both as subflows on
    the Dask runner; record the sitting, then write the claims. ``quick``: the config is the smoke budget
    (STUDY.md says so); ``command``: the command line STUDY.md states; ``lrs``: the sweep's rates (default
    fade_core.lr_sweep.SWEEP_LRS; one rate: no choice, every arm runs at it); ``lr_extensions``: the edge
    rule's limit (lr_sweep.MAX_EXTENSIONS; 0: the grid as given)."""
    from flows.pipeline import pipeline

    log = get_run_logger()
    start = time.perf_counter()
    cfg = config if config is not None else fconfig.load("params.yaml", study_overrides("params.yaml", None))
    rates = [float(x) for x in (lrs or lr_sweep.SWEEP_LRS)]
    log.info("study: %d arms x %d rates (sweep), then x %d seeds, %d samples per problem", len(cfg.pipeline.arms),
             len(rates), len(cfg.pipeline.seeds), cfg.eval.n_samples)
    root = plan.results_root(cfg, results)
    known: dict[str, float] = {}  # the stages this sitting finished, for the record of an interrupted sitting
    try:
        t_sweep = time.perf_counter()
        swept = lr_sweep_phase.with_options(task_runner=task_runner(cfg))(cfg, str(root), rates, lr_extensions)
        sweep_s = time.perf_counter() - t_sweep - sum(swept["timings"].values())
        known = {"lr sweep": sweep_s, **swept["timings"]}
        final = cfg.model_copy(deep=True)
        final.pipeline.arms = lr_sweep.with_chosen_lrs(cfg.pipeline.arms, swept["choices"])
        out = pipeline.with_options(task_runner=task_runner(final))(final, results)
    except BaseException:  # a failure, Ctrl-C or SIGTERM (flows.cli): the sitting's time still counts
        elapsed = time.perf_counter() - start
        rest = max(elapsed - sum(known.values()), 0.0)
        try:
            study_runtime.record_sitting(root, elapsed, quick, {**known, study_runtime.INTERRUPTED_STAGE: rest},
                                         interrupted=True)
            log.info("study stopped after %.0f s; this sitting is recorded in %s (a rerun resumes)", elapsed,
                     root / "runtime.json")
        except Exception as e:  # never hide why the study stopped behind a failure to record it
            log.warning("study stopped after %.0f s; its time could not be recorded in %s: %s", elapsed,
                        root / "runtime.json", e)
        raise
    root = Path(out["root"])
    placed = plan.place_outputs(final, root)
    stages = {"lr sweep": round(sweep_s, 1), **out.get("timings", {})}
    for k, v in swept["timings"].items():  # the sweep's prepare / warm start count with the pipeline's
        stages[k] = round(stages.get(k, 0.0) + v, 1)
    total, sittings = study_runtime.record_sitting(root, time.perf_counter() - start, quick, stages)
    stages, all_sittings = study_runtime.stage_seconds(root)
    written = study_lib.write_study(root, placed, command=command or "fade study run", runtime_s=total,
                                    sittings=sittings, timings=stages, quick=quick, timings_all=all_sittings)
    log.info("study written: %s", written["study_md"])
    return {**out, **written, "runtime_s": total, "sittings": sittings}


def _verdicts(written: dict[str, str]) -> None:
    import json

    for cid, verdict in json.loads(written["verdicts"]).items():
        typer.echo(f"  {cid:<22} {verdict}")


QuickOpt = Annotated[bool, typer.Option("--quick", help="Smoke budget: 2 seeds, 20 steps, 16 samples.")]
ArmsOpt = Annotated[str | None, typer.Option("--arms", help="Comma-separated study arms (default: all).")]
ResultsOpt = Annotated[str, typer.Option("--results", help="Parent folder of results/study/.")]
LrsOpt = Annotated[str | None, typer.Option(
    "--lrs", help="Comma-separated learning rates of the sweep (default: fade_core.lr_sweep.SWEEP_LRS).")]
LrExtOpt = Annotated[int | None, typer.Option(
    "--lr-extensions", min=0, help="Times an arm whose chosen rate is at its grid's edge is trained one grid step "
    "further (default: fade_core.lr_sweep.MAX_EXTENSIONS; 0: the grid as given).")]


def parse_lrs(text: str | None) -> list[float] | None:
    """``--lrs 3e-4,1e-3`` -> [0.0003, 0.001]; None -> None; a bad or non-positive rate fails naming it."""
    if not text:
        return None
    out = []
    for part in (x.strip() for x in text.split(",")):
        try:
            value = float(part)
        except ValueError:
            value = float("nan")
        if not value > 0:
            raise fail("study", ValueError(f"--lrs: {part!r} is not a positive learning rate"))
        out.append(value)
    return out


def _study_config(params: Path, overrides: list[str] | None, quick: bool, arms: str | None
                  ) -> tuple[fconfig.Config, list[str] | None]:
    arm_list = [a.strip() for a in arms.split(",") if a.strip()] if arms else None
    load_config(params, overrides)  # the user's params and --set first, each bad key named
    try:
        return fconfig.load(params, study_overrides(str(params), overrides, quick, arm_list)), arm_list
    except (fconfig.ConfigError, ValueError) as e:
        raise fail("study", e) from None


def register(app: typer.Typer) -> None:
    """Add `fade study run|params|claims|publish` to the CLI."""
    group = typer.Typer(help="The FADE paper's claims checked on fade's own runs (see `fade study run --help`).",
                        no_args_is_help=True)
    app.add_typer(group, name="study")

    @group.command("run")
    def run_command(quick: QuickOpt = False, arms: ArmsOpt = None, lrs: LrsOpt = None,
                    lr_extensions: LrExtOpt = None, results: ResultsOpt = "results",
                    params: ParamsOpt = Path("params.yaml"), overrides: SetOpt = None) -> None:
        """The learning-rate sweep, every study arm x seed at its chosen rate through the pipeline, then
        STUDY.md and claims.json (resumes where it stopped)."""
        rates = parse_lrs(lrs)
        cfg, arm_list = _study_config(params, overrides, quick, arms)
        command = study_command(str(params), overrides, quick, arm_list, results, rates, lr_extensions)
        out = study(cfg, results, quick, command, rates,
                    lr_sweep.MAX_EXTENSIONS if lr_extensions is None else lr_extensions)
        typer.echo(f"\nfade study finished: {out['runtime_s'] / 60:.1f} min in total over {out['sittings']} sitting(s)")
        _verdicts(out)
        typer.echo(f"study: {out['study_md']}\nclaims: {out['claims']}\nreport: {out['report']}")

    @group.command("params")
    def params_command(
        write: Annotated[Path | None, typer.Option("--write", help="Write them (documented) to this file.")] = None,
        quick: QuickOpt = False, arms: ArmsOpt = None, params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """The study's resolved params (params.yaml plus the study's defaults), for the DVC stage group."""
        cfg, arm_list = _study_config(params, overrides, quick, arms)
        if write is None:
            typer.echo(render_yaml(cfg), nl=False)
            return
        made_by = shlex.join(["fade", "study", "params", *(["--quick"] if quick else []),
                              *(["--arms", ",".join(arm_list)] if arm_list else []),
                              *(["--params", str(params)] if str(params) != "params.yaml" else []),
                              *[a for s in overrides or [] for a in ("--set", s)], "--write", str(write)])
        header = (f"# The study's params, written by `{made_by}`:\n# {params} plus the study's defaults. Regenerate "
                  "it after changing those; edit it to change only the study.\n")
        write.write_text(header + render_yaml(cfg))
        typer.echo(f"wrote {write}")

    @group.command("claims")
    def claims_command(params: ParamsOpt = Path("params.yaml"), overrides: SetOpt = None) -> None:
        """Only STUDY.md and claims.json beside --params (a study's resolved params), from the runs already there."""
        load_config(params, overrides)
        try:
            written = claims_only(params, list(overrides or []))
        except FileNotFoundError as e:
            raise fail("study claims", e, code=1) from None
        _verdicts(written)
        typer.echo(f"study: {written['study_md']}\nclaims: {written['claims']}")

    @group.command("publish")
    def publish_command(
        dest: Annotated[Path, typer.Argument(help="Where STUDY.md goes; its figures go to docs/<stem>/ beside it.")],
        results: ResultsOpt = "results",
    ) -> None:
        """Copy <results>/study/STUDY.md to DEST with its figures, links rewritten: the study as committed."""
        try:
            md = study_lib.publish(Path(results) / STUDY_NAME, dest, dest.parent / "docs" / dest.stem.lower())
        except FileNotFoundError as e:
            raise fail("study publish", e, code=1) from None
        typer.echo(f"published {md}")
