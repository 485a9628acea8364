"""`fade sweep` on a micro config: methods x grid x seeds train, evaluate and report; a second sweep
finds every training run in Prefect's cache and repeats none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.integration.test_pipeline import MICRO, _env, _run

BIN = Path(sys.executable).parent


@pytest.mark.slow
def test_sweep_grid_and_cache(tmp_path, prefect_api):
    env = _env(tmp_path, prefect_api)
    params = tmp_path / "params.yaml"
    _run([str(BIN / "fade"), "params", "--params", "/dev/null", "--write", str(params),
          *sum((["--set", s] for s in MICRO + ["pipeline.name=micro", "pipeline.workers=1"]), [])], tmp_path, env)
    cmd = [str(BIN / "fade"), "sweep", "--methods", "grpo,power", "--grid", "power.alpha=3", "--seeds", "0",
           "--params", str(params)]
    first = _run(cmd, tmp_path, env)
    assert "sweep of 2 runs finished" in first
    root = tmp_path / "results" / "micro-sweep"
    arms = sorted(p.name for p in (root / "runs").iterdir())
    assert arms == ["grpo", "power_alpha3"]
    assert (root / "reports" / "default" / "index.html").exists()
    second = _run(cmd, tmp_path, env)
    assert "train: 2 of 2 runs found in the sweep's cache (same config, same code): not redone" in second, second[-4000:]


def test_grid_parsing_and_bad_grids():
    from fade_core.config import ConfigError
    from flows.sweep import parse_grid, sweep_arms

    grid = parse_grid(["power.alpha=1,2", "asym_grpo.delta=0.5"])
    assert grid == {"power.alpha": [1, 2], "asym_grpo.delta": [0.5]}
    arms = sweep_arms(["grpo", "power", "asym_grpo"], grid)
    assert list(arms) == ["grpo", "power_alpha1", "power_alpha2", "asym_grpo_delta0.5"]
    assert arms["power_alpha2"].params == {"alpha": 2}
    with pytest.raises(ConfigError, match="METHOD.PARAM"):
        parse_grid(["alpha=1"])
    with pytest.raises(ConfigError, match="not in the sweep"):
        sweep_arms(["grpo"], {"power.alpha": [2]})
