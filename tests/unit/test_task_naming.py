"""Prefect names (tasks/naming.py): task runs say arm, seed and step; artifact keys carry the pipeline's name;
the report artifact links the page."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fade_core import config as fconfig
from fade_core import plan
from tasks import naming
from tasks.report import report_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_artifact_keys_are_per_pipeline_and_valid_prefect_keys() -> None:
    assert naming.artifact_key("default", "pass-at-k") == "default-pass-at-k"
    assert naming.artifact_key("My_Study.v2", "figure-peak_step") == "my-study-v2-figure-peak-step"
    assert naming.artifact_key("a", "report") != naming.artifact_key("b", "report")


def test_training_runs_are_named_by_arm_seed_and_steps() -> None:
    cfg = fconfig.load(ROOT / "params.yaml", [
        "pipeline.arms={grpo: {method: grpo}, power2: {method: power, params: {alpha: 2}}}",
        "pipeline.seeds=[0, 3]", "train.steps=7"])
    names = [naming.train_run_name({"config": p.config}) for p in plan.run_plans(cfg)]
    assert names == ["train-grpo-s0-to-step7", "train-grpo-s3-to-step7", "train-power2-s0-to-step7",
                     "train-power2-s3-to-step7"]


def test_evaluations_are_named_by_arm_seed_and_checkpoint_step(tmp_path: Path) -> None:
    ckpt = tmp_path / "runs" / "power2" / "power2-s1-0123abcd" / "checkpoints" / "step-12"
    ckpt.mkdir(parents=True)
    assert naming.evaluate_run_name({"checkpoint": str(ckpt)}) == "evaluate-power2-s1-step12"
    assert naming.evaluate_run_name({"checkpoint": "Qwen/Qwen2.5-0.5B", "foreign": True}) == \
        "evaluate-Qwen--Qwen2.5-0.5B"
    assert naming.evaluate_run_name({"checkpoint": str(tmp_path / "models" / "base")}) == "evaluate-base-s0-step0"


def test_the_report_artifact_links_the_page(tmp_path: Path) -> None:
    html = tmp_path / "reports" / "default" / "index.html"
    md = report_markdown({"html": str(html), "headline_table": pd.DataFrame(), "lead_table": pd.DataFrame(),
                          "missing": {}})
    assert f"[default/index.html]({html.as_uri()})" in md and "`" not in md
