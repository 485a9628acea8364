"""dvc.yaml's and study/dvc.yaml's code deps are each stage's imports (flows/dvc_yaml.py): the committed
files match the walk, and a stage that imports a module it does not list is named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from flows import dvc_yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("rel", sorted(dvc_yaml.DVC_FILES))
def test_committed_dvc_files_list_what_each_stage_imports(rel: str) -> None:
    text = (ROOT / rel).read_text()
    prefix = dvc_yaml.DVC_FILES[rel]
    assert dvc_yaml.drift(yaml.safe_load(text)["stages"], prefix) == [], "run `python -m flows.dvc_yaml --write`"
    assert dvc_yaml.render(text, prefix) == text, f"{rel} is not as generated: run `python -m flows.dvc_yaml --write`"
    stages = yaml.safe_load(text)["stages"]
    if rel == "presets/dvc.yaml":  # the import stage alone: see test_the_preset_import_stage_tracks_the_folder
        assert dvc_yaml.entry_module(stages["import_smollm2"]["cmd"]) == "flows.import_model"
        assert {"fade_core/model_source.py", "flows/import_model.py"} <= set(stages["import_smollm2"]["deps"])
        return
    # the reward (verifiers, sandbox, countdown) and the prompt (evaluate.build_prompt) of the report
    train = set(stages["train"]["do"]["deps"])
    assert {prefix + d for d in ("fade_core/verifiers", "fade_core/sandbox", "fade_core/countdown_task.py",
                                 "fade_core/evaluate.py", "tasks/train.py", "flows/train.py")} <= train
    evaluate = set(stages["evaluate"]["do"]["deps"])
    assert {prefix + d for d in ("fade_core/rollout", "fade_core/models.py", "fade_core/sandbox")} <= evaluate


def test_a_stage_missing_one_of_its_imports_is_named() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    stages["train"]["do"]["deps"].remove("fade_core/verifiers")
    stages["aggregate"]["deps"].append("fade_core/warmstart.py")
    assert dvc_yaml.drift(stages, "") == [
        "stage train: imports fade_core/verifiers, not in its deps",
        "stage aggregate: lists fade_core/warmstart.py, which it does not import",
    ]
    fixed = dvc_yaml.with_code_deps(stages, "")
    assert "fade_core/verifiers" in fixed["train"]["do"]["deps"] and dvc_yaml.drift(fixed, "") == []
    assert fixed["train"]["do"]["deps"][:2] == ["models/base", "data/problems"]  # data deps kept, first


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, src in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(src)


def test_the_walk_follows_deferred_relative_and_package_imports(tmp_path: Path) -> None:
    _write(tmp_path, {
        "fade_core/__init__.py": "",
        "fade_core/plain.py": "",
        "fade_core/unused.py": "",
        "fade_core/sub/__init__.py": "",
        "fade_core/sub/inner.py": "from .. import plain\n",
        "tasks/__init__.py": "",
        "tasks/stage.py": "def run():\n    from fade_core.sub import inner\n",
        "flows/__init__.py": "",
        "flows/stage.py": "from tasks import stage as tasks\n",
    })
    files = dvc_yaml.module_files(tmp_path)
    closure = dvc_yaml.import_closure("flows.stage", files)
    assert dvc_yaml.dep_paths(closure, files, tmp_path) == [
        "fade_core/__init__.py", "fade_core/plain.py", "fade_core/sub", "flows/__init__.py", "flows/stage.py",
        "tasks/__init__.py", "tasks/stage.py"]
    stages = {"s": {"cmd": "fade stage --x", "deps": ["data/in", "fade_core/plain.py"]}}
    assert dvc_yaml.stage_code_deps(stages, "../", tmp_path)["s"][0] == "../fade_core/__init__.py"


def test_a_stage_command_names_its_flow_module() -> None:
    assert dvc_yaml.entry_module("fade train --arm ${key} --no-progress") == "flows.train"
    assert dvc_yaml.entry_module("python -m flows.cli study claims") == "flows.study"
    assert dvc_yaml.entry_module('sh "$DVC_ROOT/infra/dvc/run-stage.sh" import-model --params p.yaml') == \
        "flows.import_model"
    with pytest.raises(ValueError, match="no `fade <stage>`"):
        dvc_yaml.entry_module("echo hi")


def test_the_preset_import_stage_tracks_the_folder_the_preset_loads() -> None:
    """presets/dvc.yaml runs `fade import-model` on the preset at the repository root, depends on the preset's model
    section and outputs exactly the folder the preset's stages load (model.name_or_path), which git ignores."""
    from fade_core import config

    stage = yaml.safe_load((ROOT / "presets" / "dvc.yaml").read_text())["stages"]["import_smollm2"]
    preset = "presets/smollm2-code.yaml"
    cfg = config.load(ROOT / preset)
    assert stage["wdir"] == ".." and stage["cmd"].endswith(f"import-model --params {preset}")
    assert stage["params"] == [{preset: ["model"]}]
    assert stage["outs"] == [cfg.model.name_or_path] and cfg.model.source
    ignored = subprocess.run(["git", "check-ignore", "-q", cfg.model.name_or_path], cwd=ROOT)
    assert ignored.returncode == 0, f"{cfg.model.name_or_path} must be gitignored (a DVC output, never committed)"


def _fake(path: Path, word: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho {word} "$@"\n')
    path.chmod(0o755)
    return path


def test_stage_commands_find_fade_without_an_activated_venv(tmp_path: Path) -> None:
    """Every stage runs infra/dvc/run-stage.sh, which finds fade as FADE_PYTHON, else the checkout's .venv,
    else PATH, and otherwise says what to do (exit 127, as a shell does)."""
    for rel in dvc_yaml.DVC_FILES:
        for name, stage in yaml.safe_load((ROOT / rel).read_text())["stages"].items():
            assert stage.get("do", stage)["cmd"].startswith('sh "$DVC_ROOT/infra/dvc/run-stage.sh" '), (rel, name)
    script = tmp_path / "infra" / "dvc" / "run-stage.sh"
    script.parent.mkdir(parents=True)
    script.write_text((ROOT / "infra" / "dvc" / "run-stage.sh").read_text())
    env = {"PATH": "/usr/bin:/bin"}

    def run(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", str(script), "train", "--arm", "a"], env={**env, **extra}, capture_output=True,
                              text=True, cwd=tmp_path)

    missing = run()
    assert missing.returncode == 127 and "set FADE_PYTHON" in missing.stderr
    _fake(tmp_path / ".venv" / "bin" / "fade", "venv")
    assert run().stdout == "venv train --arm a\n"
    python = _fake(tmp_path / "elsewhere" / "python", "python")
    assert run(FADE_PYTHON=str(python)).stdout == "python -m flows.cli train --arm a\n"
