"""The whole pipeline on a micro config through DVC: `dvc repro` on a fresh copy of the repository (second
repro skips everything; a parameter change reruns only what it touches; queued experiments compare). `fade
run` on the same micro config is tests/integration/test_interrupt.py (under load, interrupted, rerun)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

MICRO = [
    "data.benchmarks=[countdown]",
    "data.countdown.num_train=64",
    "data.countdown.num_test=16",
    "warmstart.steps=20",
    "warmstart.batch_size=16",
    "warmstart.checkpoint_every=20",
    "train.steps=2",
    "train.prompts_per_step=4",
    "train.group_size=4",
    "train.checkpoint_every=1",
    "train.rank1_every=1",
    "eval.n_samples=4",
    "eval.ks=[1, 2, 4]",
    "eval.max_problems=4",
    "eval.flag_n_per_k=1.0",
    "pipeline.seeds=[0]",
]


EXP_SHOW_COLUMNS = ["--only-changed", "--keep", r".*pass@\d+$", "--drop", "(data|models|runs|eval)/.*"]
"""`dvc exp show` options of the README's comparison table."""


def _env(tmp: Path, api_url: str | None = None) -> dict[str, str]:
    """Environment of a `fade`/`dvc` subprocess: telemetry off, its own PREFECT_HOME, and the session's
    Prefect server (``api_url``, the prefect_api fixture) or, without one, a temporary server per command."""
    env = dict(os.environ)
    env.update(DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false", DVC_NO_ANALYTICS="1",
               PREFECT_HOME=str(tmp / "prefect-home"), PATH=f"{BIN}:{env.get('PATH', '')}",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180", OMP_NUM_THREADS="1")
    env.pop("PREFECT_API_URL", None)
    if api_url is not None:
        env["PREFECT_API_URL"] = api_url
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-6000:]}"
    return out


def _fresh_copy(dest: Path) -> Path:
    """The repository as committed + the working tree's tracked and untracked (not ignored) files."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copy"], cwd=dest, check=True)
    return dest


def _ran(out: str) -> set[str]:
    return {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage '")}


@pytest.mark.slow
def test_dvc_repro_on_fresh_copy(tmp_path, prefect_api):
    repo = _fresh_copy(tmp_path / "repo")
    env = _env(tmp_path, prefect_api)
    sets = MICRO + ["pipeline.arms={grpo: {method: grpo}, power2: {method: power, params: {alpha: 2}}}"]
    _run([str(BIN / "fade"), "params", "--write", "params.yaml", *sum((["--set", s] for s in sets), [])], repo, env)
    first = _run([str(BIN / "dvc"), "repro"], repo, env, timeout=1500)
    assert _ran(first) == {"prepare", "warmstart", "train@grpo", "train@power2", "evaluate@grpo", "evaluate@power2",
                           "evaluate_base", "aggregate", "report"}
    assert (repo / "reports" / "default" / "index.html").exists()
    second = _run([str(BIN / "dvc"), "repro"], repo, env)
    assert _ran(second) == set(), second
    metrics = subprocess.run([str(BIN / "dvc"), "metrics", "show", "--json"], cwd=repo, env=env, capture_output=True,
                             text=True, check=True).stdout
    assert "power2" in json.dumps(json.loads(metrics))
    # one arm's parameter changes: only that arm's stages and the summaries downstream rerun
    _run([str(BIN / "fade"), "params", "--write", "params.yaml", "--set", "pipeline.arms.power2.params.alpha=3"], repo, env)
    third = _run([str(BIN / "dvc"), "repro"], repo, env, timeout=1500)
    assert _ran(third) == {"train@power2", "evaluate@power2", "aggregate", "report"}, third
    # a queued experiment (dvc exp run --queue -S ...) runs and lands in `dvc exp show`
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "alpha 3"], cwd=repo, check=True)
    # (two cheap ones, the report stage only: the arm-parameter change above already showed what reruns)
    _run([str(BIN / "dvc"), "exp", "run", "--queue", "-S", "report.title=first", "-n", "titled"], repo, env)
    _run([str(BIN / "dvc"), "exp", "run", "--queue", "-S", "report.title=second", "-n", "retitled"], repo, env)
    _run([str(BIN / "dvc"), "queue", "start"], repo, env)
    import time

    deadline = time.time() + 1200
    while time.time() < deadline:
        status = _run([str(BIN / "dvc"), "queue", "status"], repo, env)
        if "Queued" not in status and "Running" not in status:
            break
        time.sleep(5)
    assert "Success" in status, status
    subprocess.run([str(BIN / "dvc"), "queue", "stop"], cwd=repo, env=env, capture_output=True)
    shown = subprocess.run([str(BIN / "dvc"), "exp", "show", "--json"], cwd=repo, env=env, capture_output=True,
                           text=True, check=True).stdout
    # the metrics are cached outputs, so each experiment's commit has them (not only the workspace row)
    experiments = {rev["name"]: rev["data"] for base in json.loads(shown) for exp in base.get("experiments") or []
                   for rev in exp.get("revs") or []}
    assert {"titled", "retitled"} <= set(experiments), experiments.keys()
    for name in ("titled", "retitled"):
        metrics = experiments[name]["metrics"]["eval/metrics.json"]
        assert "error" not in metrics and {"grpo", "power2"} <= set(metrics["data"]["countdown"]), (name, metrics)
    # the README's readable table: the params that differ and the pass@k metrics, not every key of params.yaml
    table = _run([str(BIN / "dvc"), "exp", "show", "--csv", *EXP_SHOW_COLUMNS], repo, env).splitlines()
    header = table[0].split(",")
    assert "params.yaml:report.title" in header and "countdown.power2.pass@1" in header and len(header) < 40, header
