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


def test_the_last_step_is_found_behind_lines_longer_than_any_tail(tmp_path):
    """A real model's step records carry example completions: lines of tens of KiB. The count must not fall
    back to 0 when the last whole line does not fit a fixed tail (it did, mid-run, with SmolLM2)."""
    path = tmp_path / "metrics.jsonl"
    long = [json.dumps({"step": s, "examples": [{"completion": "x" * 30_000, "step": 99}]}) for s in (1, 2)]
    path.write_text("\n".join(long) + "\n" + '{"step": 3, "examples": [{"completion": "' + "y" * 9000)  # torn
    assert progress.jsonl_last_step(path) == 2
    path.write_text(long[0] + "\n")
    assert progress.jsonl_last_step(path) == 1
    path.write_text('{"step": 1, "examples": [{"step": 7}')  # only a torn first line: nothing whole yet
    assert progress.jsonl_last_step(path) == 0


def test_watch_prints_a_line_every_interval_when_not_a_terminal():
    out = io.StringIO()
    ticks = iter(range(100))
    with progress.watch("train", "steps", 50, lambda: next(ticks), stream=out, interval=0.05):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("fade run: train ") for line in lines)
    assert "\r" not in out.getvalue() and "ETA" in lines[-2]


def test_planned_steps_count_only_the_planned_runs_not_older_runs_in_the_same_folder(tmp_path):
    """A study resumed after a change of config leaves the older runs in the arms' folders: the progress line
    counts the runs the stage trains, not those (issue: "lr sweep 800/800 steps" while its runs were at 88)."""
    from fade_core import config as fconfig
    from fade_core import plan, runs
    from fade_core.train import load_problems
    from flows.pipeline import planned_run_dirs

    sets = [f"data.out_dir={tmp_path / 'data'}", "data.countdown.num_train=60", "data.countdown.num_validation=12",
            "data.countdown.num_test=12", f"train.runs_dir={tmp_path / 'runs'}", "pipeline.seeds=[0, 1]",
            "pipeline.arms={a: {method: grpo}}"]
    cfg = fconfig.load(None, sets)
    pooled = fconfig.load(None, sets + ["train.problem_pool=5"])
    dirs, other = planned_run_dirs(plan.run_plans(cfg)), planned_run_dirs(plan.run_plans(pooled))
    assert dirs is not None and other is not None and len(set(dirs)) == len(dirs) == 2
    assert {d.parent for d in dirs} == {d.parent for d in other} and not set(dirs) & set(other)  # same folder
    # the trainer's own naming: run_id(config, digest of the problems it loads)
    assert [d.name for d in dirs] == [runs.run_id(p.config, runs.problems_digest(load_problems(p.config)))
                                      for p in plan.run_plans(cfg)]
    for d, n in ((dirs[0], 3), (other[0], 9), (other[1], 9)):
        d.mkdir(parents=True)
        (d / "metrics.jsonl").write_text("\n".join(json.dumps({"step": s}) for s in range(1, n + 1)) + "\n")
    assert progress.planned_steps(dirs, steps=10) == 3  # dirs[1] has not started; the pooled runs do not count
    assert progress.training_steps(sorted({d.parent for d in dirs}), steps=10) == 21  # what the old count saw
    bad = fconfig.load(None, sets + ["train.benchmark=humaneval"])
    assert planned_run_dirs(plan.run_plans(bad)) is None  # not prepared: the fallback count
