"""The study as a DVC stage group (study/dvc.yaml + study/params.yaml): the committed params are what
`fade study params --write` writes today, and `dvc repro --dry study/dvc.yaml` on a fresh copy of the
repository plans every study arm's training and evaluation and ends with the claims stage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pipeline import BIN, MICRO, ROOT, _env, _fresh_copy, _ran, _run  # noqa: E402

from fade_core import config, study  # noqa: E402


def test_committed_study_params_are_current(tmp_path):
    """study/params.yaml is regenerated, not hand-edited: stale params would run another study than `fade study run`."""
    out = tmp_path / "params.yaml"
    _run([str(BIN / "fade"), "study", "params", "--write", str(out)], ROOT, _env(tmp_path))
    committed = (ROOT / "study" / "params.yaml").read_text()
    assert out.read_text().split("\n", 2)[2] == committed.split("\n", 2)[2], (
        "study/params.yaml is stale: run `fade study params --write study/params.yaml`")
    cfg = config.load(ROOT / "study" / "params.yaml")
    assert list(cfg.pipeline.arms) == list(study.DEFAULT_ARMS)
    assert len(cfg.pipeline.seeds) >= 5 and cfg.eval.n_samples >= 128 and cfg.report.study
    assert cfg.train.max_rollouts == cfg.train.steps * cfg.train.prompts_per_step * cfg.train.group_size


def test_study_dvc_group_has_every_arm(tmp_path):
    """The committed group, as DVC reads it: a train and an evaluate stage per study arm, then `claims`."""
    env = _env(tmp_path)
    names = _run([str(BIN / "dvc"), "stage", "list", "--name-only", "study/dvc.yaml"], ROOT, env).split()
    arms = list(study.DEFAULT_ARMS)
    expected = {f"study/dvc.yaml:{s}" for s in ("prepare", "warmstart", "evaluate_base", "aggregate", "report",
                                                 "claims")}
    expected |= {f"study/dvc.yaml:{s}@{a}" for s in ("train", "evaluate") for a in arms}
    assert set(names) == expected
    # the group's stages are the root pipeline's plus `claims`, with the code dependencies re-rooted
    root_stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    group = yaml.safe_load((ROOT / "study" / "dvc.yaml").read_text())["stages"]
    assert set(group) == set(root_stages) | {"claims"}
    for name, stage in root_stages.items():
        body, theirs = stage.get("do", stage), group[name].get("do", group[name])
        assert body["cmd"] == theirs["cmd"], name
        code = {d for d in body.get("deps", []) if d.startswith("fade_core")}
        assert {f"../{d}" for d in code} <= set(theirs.get("deps", [])), name


@pytest.mark.slow
def test_dvc_repro_of_the_study_group_on_a_micro_budget(tmp_path, prefect_api):
    """`dvc repro study/dvc.yaml` on a fresh copy, with the group's params rewritten to a micro budget and
    two sign-axis arms: every stage runs inside study/, and the claims stage writes STUDY.md, claims.json and
    the figure; the report has the study section; a second repro has nothing to do."""
    repo = _fresh_copy(tmp_path / "repo")
    env = _env(tmp_path, prefect_api)
    sets = sum((["--set", s] for s in MICRO + ["pipeline.seeds=[0]", "eval.ks=[1, 2, 4]", "train.problem_pool=8"]), [])
    _run([str(BIN / "fade"), "study", "params", "--quick", "--arms", "asym_d0_5,asym_d2", *sets,
          "--write", "study/params.yaml"], repo, env)
    out = _run([str(BIN / "dvc"), "repro", "study/dvc.yaml"], repo, env, timeout=1200)
    ran = _ran(out)
    assert {"study/dvc.yaml:claims", "study/dvc.yaml:train@asym_d0_5", "study/dvc.yaml:train@asym_d2"} <= ran
    root = repo / "study"
    claims = json.loads((root / "claims.json").read_text())
    assert [c["id"] for c in claims["claims"]][:4] == ["testbed_headroom", "sign_entropy", "sign_rank1", "sign_drift"]
    assert len(next(c for c in claims["claims"] if c["id"] == "sign_entropy")["values"]["slopes"]["asym_d2"]) == 1
    md = (root / "STUDY.md").read_text()
    assert "dvc repro study/dvc.yaml" in md and "not measured" in md
    assert (root / "figures" / "study_sign_axis.png").exists()
    assert "<h2 id='study'>" in (root / "reports" / "default" / "index.html").read_text()
    assert not (repo / "runs").exists() and not (repo / "eval").exists()  # everything stayed inside study/
    assert _ran(_run([str(BIN / "dvc"), "repro", "study/dvc.yaml"], repo, env)) == set()
