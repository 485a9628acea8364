"""`fade study run --quick` end to end on a micro config with two arms of the sign axis: the pipeline runs
under results/study/, and STUDY.md and claims.json are written from its runs; a second sitting resumes
(nothing retrained, nothing re-evaluated) and adds to the run time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fade_core import lr_sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pipeline import MICRO, ROOT, _env  # noqa: E402

# the study's command on a local CLI (the lead registers flows.study in flows/cli.py)
CLI = ("import typer; from flows import study; app = typer.Typer(); app.callback()(lambda: None); "
       "study.register(app); from flows.cli import guard_commands; guard_commands(app); app()")


def _study(tmp: Path, api_url: str, *args: str) -> str:
    cmd = [sys.executable, "-c", CLI, "study", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(tmp, api_url), capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"fade study failed ({proc.returncode}):\n{out[-6000:]}"
    return out


@pytest.mark.slow
def test_fade_study_quick_micro(tmp_path, prefect_api):
    params = tmp_path / "params.yaml"
    params.write_text("{}\n")
    results = tmp_path / "results"
    sets = sum((["--set", s] for s in MICRO + ["pipeline.seeds=[0, 1]", "pipeline.workers=1", "train.eval_every=1",
                                                 "train.eval_problems=4", "train.eval_samples=4",
                                                 "train.problem_pool=8"]), [])  # MICRO has ~22 easy problems
    args = ["run", "--quick", "--arms", "asym_d0_5,asym_d2", "--lrs", "1e-3,3e-3", "--lr-extensions", "1",
            "--params", str(params),
            "--results", str(results), *sets]
    out = _study(tmp_path, prefect_api, *args)
    root = results / "study"
    assert f"study: {root / 'STUDY.md'}" in out
    md = (root / "STUDY.md").read_text()
    claims = json.loads((root / "claims.json").read_text())
    # the learning-rate sweep ran first: each arm at both rates (the sweep seed), a rate chosen by the rule,
    # and the final seeds ran at it
    choice = json.loads((root / "sweep" / "lr_choice.json").read_text())
    assert choice["lrs"] == [1e-3, 3e-3] and set(choice["arms"]) == {"asym_d0_5", "asym_d2"}
    sweep_runs = sorted(p.name.split("-s")[0] for p in (root / "sweep" / "runs").glob("*/*") if p.is_dir())
    # with two rates every choice is an edge: the edge rule trained each arm once more, one grid step past it
    assert len(sweep_runs) == 6
    for arm, c in choice["arms"].items():
        scores = {float(k): v for k, v in c["scores"].items()}
        assert c["lr"] == max(scores, key=lambda k: (scores[k], -k))  # the best criterion, ties to the smaller
        assert claims["arms"][arm]["lr"] == c["lr"]
        first = max((1e-3, 3e-3), key=lambda k: (scores[k], -k))  # the choice on the given grid
        extra = 3.33e-4 if first == 1e-3 else 9e-3
        assert choice["rates"][arm] == sorted([1e-3, 3e-3, extra]) and set(scores) == {1e-3, 3e-3, extra}
        assert lr_sweep.sweep_label(arm, extra) in sweep_runs
    assert "## Learning rates" in md and "(figures/lr_sensitivity.png)" in md
    assert "on a fixed pool of its first 8 training problems (train.problem_pool" in md
    assert "--lrs 0.001,0.003 --lr-extensions 1" in md and "train.max_rollouts" in md
    ids = [c["id"] for c in claims["claims"]]
    assert ids[:4] == ["testbed_headroom", "sign_entropy", "sign_rank1", "sign_drift"]
    checks = {"testbed_headroom", "aa_control", "fade_schedule_engaged"}
    assert {c["verdict"] for c in claims["claims"] if c["id"] not in checks} <= {"agrees", "disagrees", "inconclusive"}
    # the uniform sampler's rows were aggregated beside the base model's, so the headroom check had its data
    headroom = next(c for c in claims["claims"] if c["id"] == "testbed_headroom")
    assert headroom["verdict"] in {"passes", "FAILS"} and "base / uniform" in headroom["measurement"]
    assert claims["quick"] is True and claims["seeds"] == [0, 1] and claims["n_samples"] == 4
    assert set(claims["arms"]) == {"asym_d0_5", "asym_d2"}
    # the sign-axis claims were measured on the runs (two seeds each); the rest lack their arms
    by_id = {c["id"]: c for c in claims["claims"]}
    assert len(by_id["sign_entropy"]["values"]["slopes"]["asym_d2"]) == 2
    assert "no training records of arm(s) asym_d1" in by_id["difficulty_signal"]["reason"]
    assert "fade study run --quick --arms asym_d0_5,asym_d2 --lrs" in md and "Smoke run" in md
    assert md.split("## Claims")[1].count("| **") == len(ids)
    assert "(figures/study_sign_axis.png)" in md and (root / "figures" / "study_sign_axis.png").exists()
    assert "(reports/default/figures/training_curves.png)" in md
    assert (root / "reports/default/figures/training_curves.png").exists()
    # the HTML report has the study section: one row per claim, with claims.json's verdicts, and the figure
    page = (root / "reports/default/index.html").read_text()
    assert "<h2 id='study'>" in page and "<a href='#study'>" in page
    assert page.count("<td class='verdict-") == len(ids)
    verdicts = [c["verdict"] for c in claims["claims"]]
    assert [v.split("'")[0] for v in page.split("<td class='verdict-")[1:]] == verdicts
    assert "id='fig-study_sign_axis'" in page
    runs = sorted(p.name for p in (root / "runs").glob("*/*") if p.is_dir())
    assert [r.split("-s")[0] for r in runs] == ["asym_d0_5", "asym_d0_5", "asym_d2", "asym_d2"]

    # a second sitting resumes: same runs, the run time adds up
    mtimes = {p: p.stat().st_mtime for p in (root / "eval").rglob("*.parquet") if "samples" in str(p)}
    mtimes.update({p: p.stat().st_mtime for p in (root / "sweep" / "runs").rglob("model.safetensors")})
    _study(tmp_path, prefect_api, *args)
    again = json.loads((root / "claims.json").read_text())
    assert again["sittings"] == 2 and again["runtime_seconds"] > claims["runtime_seconds"]
    ledger = json.loads((root / "runtime.json").read_text())["sittings"]
    assert [set(s["stages"]) >= {"lr sweep", "train", "evaluate", "report"} for s in ledger] == [True, True]
    assert "stages (summed over the sittings): " in (root / "STUDY.md").read_text()
    assert sorted(p.name for p in (root / "runs").glob("*/*") if p.is_dir()) == runs
    assert {p: p.stat().st_mtime for p in mtimes} == mtimes

    # `claims` recomputes the same verdicts from the placed config, without a sitting: STUDY.md keeps the run's
    # command and run time (each sitting's too) and names the recomputation
    _study(tmp_path, prefect_api, "claims", "--params", str(root / "config.yaml"))
    only = json.loads((root / "claims.json").read_text())
    assert [c["verdict"] for c in only["claims"]] == [c["verdict"] for c in again["claims"]]
    assert only["sittings"] == 2 and only["runtime_seconds"] == again["runtime_seconds"]
    assert only["command"] == again["command"] and only["recomputed_by"].startswith("fade study claims --params")
    assert len(json.loads((root / "runtime.json").read_text())["sittings"]) == 2
    md_only = (root / "STUDY.md").read_text()
    assert "over 2 sitting(s) (" in md_only and "claims recomputed from the stored runs by `fade study claims" in md_only
    assert "fade study run --quick --arms asym_d0_5,asym_d2 --lrs" in md_only and "not measured" not in md_only
    # `publish` copies STUDY.md with its figures beside it, links rewritten
    dest = tmp_path / "pub" / "STUDY.md"
    dest.parent.mkdir()
    _study(tmp_path, prefect_api, "publish", str(dest), "--results", str(results))
    text = dest.read_text()
    assert "](docs/study/study_sign_axis.png)" in text and (dest.parent / "docs/study/study_sign_axis.png").exists()
    assert "](docs/study/training_curves.png)" in text and "reports/default" not in text
