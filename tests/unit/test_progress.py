"""`fade run`'s per-stage progress lines (flows/progress.py): counted from the files a stage writes, with an
ETA from the rate since the stage started, a line every few seconds when the output is not a terminal."""

from __future__ import annotations

import io
import json
import time

from flows import progress


def test_progress_line_and_eta_from_the_rate_since_the_stage_started():
    assert progress.progress_line("train", "steps", 30, 100, 10, 40.0) == \
        "fade run: train 30/100 steps (30%), 40s elapsed, ETA 2m20s"  # 20 steps in 40 s, 70 to go
    assert progress.progress_line("train", "steps", 10, 100, 10, 5.0) == "fade run: train 10/100 steps (10%), 5s elapsed"
    assert progress.progress_line("evaluate", "parts", 9, 6, 0, 3700.0).startswith("fade run: evaluate 6/6 parts (100%), 1h01m")


def test_training_steps_are_read_from_each_runs_metrics(tmp_path):
    for run, steps in (("a-s0-1", 3), ("b-s0-2", 7)):
        (tmp_path / "arm" / run).mkdir(parents=True)
        lines = [json.dumps({"step": s, "reward_mean": 0.5}) for s in range(1, steps + 1)]
        (tmp_path / "arm" / run / "metrics.jsonl").write_text("\n".join(lines) + "\n{\"step\": 8, \"rew")  # torn
    assert progress.training_steps([tmp_path / "arm"], steps=5) == 3 + 5
    assert progress.jsonl_last_step(tmp_path / "missing.jsonl") == 0


def test_watch_prints_a_line_every_interval_when_not_a_terminal():
    out = io.StringIO()
    ticks = iter(range(100))
    with progress.watch("train", "steps", 50, lambda: next(ticks), stream=out, interval=0.05):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("fade run: train ") for line in lines)
    assert "\r" not in out.getvalue() and "ETA" in lines[-2]
