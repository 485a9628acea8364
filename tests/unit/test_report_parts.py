"""The report's pieces: what differs between arms, example completions (evaluation samples and the step
record's ``examples`` field), provenance and wall times, number formats."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from fade_core.report import arms, examples, provenance, tables

RUNS = pd.DataFrame({
    "run_id": ["base", "power2-s0-aaaaaaaa", "power2-s1-bbbbbbbb", "fade-s0-cccccccc", "grpo-s0-dddddddd"],
    "method": ["base", "power2", "power2", "fade", "grpo"],
    "seed": [0, 0, 1, 0, 0],
    "advantage": ["base", "power", "power", "fade", "grpo"],
    "is_fade": [False, False, False, True, False],
    "trained": [False, True, True, True, True],
})


def _config(method: str, params: dict, seed: int, label: str, **train: object) -> dict:
    return {"train": {"method": method, "params": params, "seed": seed, "label": label, "runs_dir": f"runs/{label}",
                      "lr": 1e-3, **train}, "rollout": {"temperature": 1.0}}


CONFIGS = {
    "power2-s0-aaaaaaaa": _config("power", {"alpha": 2}, 0, "power2"),
    "power2-s1-bbbbbbbb": _config("power", {"alpha": 2}, 1, "power2"),
    "fade-s0-cccccccc": _config("fade", {}, 0, "fade"),
    "grpo-s0-dddddddd": _config("grpo", {}, 0, "grpo", lr=3e-3),
}


def test_arms_show_every_parameter_and_which_the_config_set() -> None:
    summary = {a.label: a for a in arms.summarize_arms(RUNS, CONFIGS)}
    assert list(summary) == ["base", "fade", "grpo", "power2"]
    power = summary["power2"]
    assert power.method == "power" and power.seeds == [0, 1] and ("alpha", 2.0, True) in power.params
    assert all(not given for _, _, given in summary["fade"].params)  # FADE at its defaults: nothing set
    assert {name for name, _, _ in summary["fade"].params} >= {"alpha_max", "delta_min", "beta"}
    assert not summary["base"].trained and summary["base"].params == []
    assert arms.params_text(power).startswith("alpha=2 (set)")
    assert arms.group_size(CONFIGS) is None and arms.group_size({"r": {"train": {"group_size": 8}}, **CONFIGS}) == 8


def test_differing_keys_name_what_else_differs_between_arms() -> None:
    diff = arms.differing_keys(RUNS, CONFIGS)
    assert diff["config key"].tolist() == ["train.lr"]  # seeds, labels, folders, methods and params left out
    assert diff.iloc[0].to_dict() == {"config key": "train.lr", "fade": "0.001", "grpo": "0.003", "power2": "0.001"}
    same = {k: v for k, v in CONFIGS.items() if not k.startswith("grpo")}
    assert arms.differing_keys(RUNS[RUNS.method != "grpo"], same).empty


def test_arms_read_the_run_folders(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "power2" / "power2-s0-aaaaaaaa"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("train:\n  method: power\n  params: {alpha: 2}\n")
    (run / "metrics.jsonl").write_text("")
    assert arms.read_run_configs(tmp_path / "runs") == {"power2-s0-aaaaaaaa": {"train": {"method": "power",
                                                                                          "params": {"alpha": 2}}}}
    assert arms.read_run_configs(None) == {} and arms.read_run_configs(tmp_path / "nothing") == {}


def _samples_db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    rows = []
    for step in (0, 10, 20, 30):
        for p in range(3):
            for i in range(4):
                ok = (p == 1 and i < 2) or (p == 2 and step == 30)  # problem 1 is mixed at every step
                rows.append(dict(method="grpo", seed=0, step=step, benchmark="countdown", problem_id=f"countdown/test/{p}",
                                 sample_index=i, completion=f"answer {p}.{i}" + ("x" * 900 if i == 3 else ""),
                                 passed=ok, reward=float(ok), status="passed" if ok else "wrong"))
    con.register("rows", pd.DataFrame(rows))
    con.execute("CREATE TABLE samples AS SELECT * FROM rows")
    return con


def test_evaluation_examples_show_passed_and_failed_on_a_mixed_problem() -> None:
    con = _samples_db()
    got = examples.evaluation_examples(con, per_kind=2, steps_per_method=3,
                                       prompts={"countdown/test/1": "Reach 10 with 2, 5."})
    assert sorted({x.step for x in got}) == [0, 20, 30]  # first, middle, last of 4 steps
    at0 = [x for x in got if x.step == 0]
    assert [x.passed for x in at0] == [True, True, False, False]
    assert {x.problem_id for x in at0} == {"countdown/test/1"}  # both kinds from the problem that had both
    assert at0[0].prompt == "Reach 10 with 2, 5." and at0[2].status == "wrong"
    assert all(len(x.completion) <= examples.MAX_CHARS + 40 for x in got)
    assert examples.evaluation_examples(duckdb.connect()) == []  # no samples table: nothing, no error


def test_training_examples_come_from_the_record_field() -> None:
    def rec(step: int, items: list[dict]) -> dict:
        return {"method": "fade", "seed": 0, "step": step, "examples": items}

    good = {"problem_id": "countdown/train/1", "prompt": "p1", "completion": "2*5", "reward": 1.0, "passed": True}
    bad = {"problem_id": "countdown/train/1", "prompt": "p1", "completion": "2+5", "reward": 0.0, "passed": False,
           "status": "wrong"}
    records = pd.DataFrame([rec(1, [good, bad]), rec(2, []), {**rec(3, [bad]), "examples": json.dumps([bad])},
                            {**rec(1, [good]), "seed": 1}])
    got = examples.examples_from_records(records, steps_per_method=3)
    assert [(x.step, x.passed, x.seed) for x in got] == [(1, True, 0), (1, False, 0), (3, False, 0)]
    assert got[0].source == "training" and got[0].completion == "2*5" and got[1].status == "wrong"
    assert examples.parse_examples(None) == [] and examples.parse_examples("not json") == []
    assert examples.pick_steps([5, 1, 3, 9, 7], 3) == [1, 5, 9] and examples.pick_steps([4], 3) == [4]


def test_training_example_labels_follow_the_trainers_verdict() -> None:
    """The trainer's examples carry a verdict, not a passed flag: a reward-1 rollout is "passed" (the report
    once labelled every training example "failed")."""
    from fade_core.train.rewards import Reward, pick_examples

    items = pick_examples(["countdown/train/01236", "countdown/train/7"], ["p", "q"], ["(2*5)+3", "2+"],
                          [Reward(1.0, True, "passed", "passed"), Reward(0.0, False, "no_answer", "no_answer")])
    records = pd.DataFrame([{"method": "fade", "seed": 0, "step": 4, "examples": json.dumps(items)}])
    got = {(x.problem_id, x.passed, x.status, x.reward) for x in examples.examples_from_records(records)}
    assert got == {("countdown/train/01236", True, "passed", 1.0), ("countdown/train/7", False, "no_answer", 0.0)}
    assert examples.example_outcome({"reward": 1.0}) == (True, "")  # neither verdict nor flag: the full reward
    assert examples.example_outcome({"reward": 0.5, "passed": False, "status": "wrong"}) == (False, "wrong")


def test_training_examples_read_train_steps_when_the_field_is_there() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE train_steps (method VARCHAR, seed BIGINT, step BIGINT, reward_mean DOUBLE)")
    assert examples.training_examples(con) == []  # the field is not in these records
    con.execute("ALTER TABLE train_steps ADD COLUMN examples VARCHAR")
    item = {"problem_id": "a", "completion": "c", "reward": 1.0, "passed": True}
    con.execute("INSERT INTO train_steps VALUES ('grpo', 0, 1, 0.5, ?)", [json.dumps([item])])
    got = examples.training_examples(con)
    assert len(got) == 1 and got[0].problem_id == "a" and math.isclose(got[0].reward, 1.0)


def test_provenance_names_commit_command_machine_and_packages(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (repo / "f.txt").write_text("1")
    subprocess.run(git + ["add", "f.txt"], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert provenance.git_state(repo)[:2] == (head, False)
    (repo / "f.txt").write_text("2")
    assert provenance.git_state(repo)[:2] == (head, True)
    assert provenance.git_state(tmp_path / "not-a-repo") == (None, None, None)
    p = provenance.collect(repo, argv=["/usr/bin/fade", "run", "--quick", "--set", "x=a b"],
                           links=[("Prefect flow run", "http://127.0.0.1:4200/runs/flow-run/1")])
    assert p.git_commit == head and p.git_dirty and p.command == "fade run --quick --set 'x=a b'"
    assert {"torch", "numpy", "duckdb"} <= set(p.packages) and "cpus" in p.machine and "os" in p.machine
    rows = dict(provenance.as_rows(p, {"training wall time": "1 min"}))
    assert rows["git commit"].startswith(head) and "uncommitted" in rows["git commit"]
    assert rows["training wall time"] == "1 min" and "torch " in rows["packages"]
    assert provenance.command_line(["/x/lib/pytest/__main__.py", "-q"]) == "python -m pytest -q"
    assert "runs trained at" not in rows  # no run recorded its code: nothing claimed


def test_provenance_names_the_commits_the_runs_trained_at(tmp_path: Path) -> None:
    """A report built after more commits must still say what code trained its runs (each run's code.jsonl, one line
    per training session): the SmolLM2 run's report named only the commit at report time."""
    from fade_core import runs

    a, b, old = tmp_path / "a", tmp_path / "b", tmp_path / "old"
    for d in (a, b, old):
        d.mkdir()
    runs.record_code_version(a, ("c1", False, "main"), 0)
    runs.record_code_version(b, ("c1", False, "main"), 0)
    runs.record_code_version(b, ("c2", True, "main"), 4)  # resumed at step 4 from a changed checkout
    with open(b / runs.CODE_FILE, "a") as f:
        f.write('{"git_commit": "c3", "git_di')  # a session killed while writing its line
    assert [r["from_step"] for r in runs.read_code_versions(b)] == [0, 4] and runs.read_code_versions(old) == []
    assert provenance.trained_at([a, b, old]) == {"c1": 2, "c2 (uncommitted changes)": 1}
    same = provenance.Provenance(git_commit="c1", git_dirty=False, trained_at={"c1": 2})
    assert dict(provenance.as_rows(same))["runs trained at"] == "c1 (2 runs)"
    later = provenance.Provenance(git_commit="c9", git_dirty=False, trained_at=provenance.trained_at([a, b]))
    row = dict(provenance.as_rows(later))["runs trained at"]
    assert row.startswith("c1 (2 runs); c2 (uncommitted changes) (1 run)") and "not the report's commit" in row


def test_wall_times_sum_each_runs_step_times() -> None:
    curves = pd.DataFrame({"run_id": ["a", "a", "a", "b"], "method": ["m", "m", "m", "n"], "seed": [0, 0, 0, 0],
                           "step": [1, 2, 2, 1], "metric": ["time_step", "time_step", "loss", "time_step"],
                           "value": [1.5, 2.5, 9.0, 4.0]})
    wall = provenance.wall_times(curves)
    assert wall.to_dict("records") == [{"run_id": "a", "method": "m", "seed": 0, "steps": 2, "train_seconds": 4.0},
                                       {"run_id": "b", "method": "n", "seed": 0, "steps": 1, "train_seconds": 4.0}]
    assert provenance.wall_times(pd.DataFrame()).empty
    assert [provenance.duration(s) for s in (12.34, 600, 9000)] == ["12.3 s", "10.0 min", "2.5 h"]


def test_formats_are_one_per_column_and_single_seed_statistics_read_na() -> None:
    assert tables.fmt_steps([100.0, 200.0]) == ["100", "200"]
    assert tables.fmt_steps([100.0, 212.5, math.nan]) == ["100.0", "212.5", "n/a"]
    assert [tables.fmt_p(p) for p in (0.0004, 0.01234, None)] == ["<0.001", "0.012", "n/a"]
    assert tables.fmt_pct(0.1234) == "12.3" and tables.fmt_pct(math.nan) == "n/a"
    assert tables.fmt_ci(None) == "n/a"



def test_prefect_links_name_the_report_and_the_pipeline_flow_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime, timedelta

    from prefect.runtime import flow_run

    from tasks import report as report_task

    assert report_task.prefect_links() == ([], [])  # outside a flow run: nothing to link
    monkeypatch.setattr(flow_run, "id", "1111", raising=False)
    monkeypatch.setattr(flow_run, "name", "brave-fox", raising=False)
    monkeypatch.setattr(flow_run, "ui_url", "http://127.0.0.1:4200/runs/flow-run/1111", raising=False)
    monkeypatch.setattr(flow_run, "root_flow_run_id", "2222", raising=False)
    monkeypatch.setattr(report_task, "_flow_run_start", lambda run_id: datetime.now(UTC) - timedelta(minutes=30))
    links, notes = report_task.prefect_links()
    assert links == [("Prefect flow run 'brave-fox' (report)", "http://127.0.0.1:4200/runs/flow-run/1111"),
                     ("Prefect flow run (the whole pipeline)", "http://127.0.0.1:4200/runs/flow-run/2222")]
    assert len(notes) == 1 and "30.0 min" in notes[0]
    monkeypatch.setattr(flow_run, "ui_url", None, raising=False)  # a server without a UI: the ids
    assert report_task.prefect_links()[0][1] == ("Prefect flow run (the whole pipeline)", "flow run id 2222")


def test_difficulty_rows_read_easy_medium_hard_and_wall_times_share_one_unit():
    con = duckdb.connect()
    seeds = pd.DataFrame([dict(benchmark="countdown", bucket=b, method="grpo", k=1, mean=0.5, num_seeds=2, step=9)
                          for b in ("all", "hard", "easy", "zeta", "medium")])
    probs = seeds.assign(num_problems=10)
    con.register("s", seeds)
    con.register("p", probs)
    con.execute("CREATE TABLE pass_at_k_seeds AS SELECT * FROM s")
    con.execute("CREATE TABLE pass_at_k AS SELECT * FROM p")
    assert tables.buckets(con).bucket.tolist() == ["easy", "medium", "hard", "zeta"]
    assert provenance.durations([111.1, 150.0, 30.0]) == ["1.9 min", "2.5 min", "0.5 min"]
    assert provenance.durations([12.0, 100.0]) == ["12.0 s", "100.0 s"] and provenance.durations([]) == []


def test_provenance_says_a_temporary_prefect_server_is_gone_and_links_what_is_saved(tmp_path, monkeypatch):
    from tasks import report as report_task

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:5555/api")
    monkeypatch.delenv("FADE_TEMPORARY_PREFECT_API", raising=False)
    assert report_task.temporary_server_note() == ""  # the user's own server keeps its runs
    monkeypatch.setenv("FADE_TEMPORARY_PREFECT_API", "http://127.0.0.1:5555/api")
    assert "do not open afterwards" in report_task.temporary_server_note()
    log = tmp_path / "run.log"
    log.write_text("x")
    monkeypatch.setenv("FADE_COMMAND_LOG", str(log))
    (tmp_path / "eval").mkdir()
    got = report_task.saved_links(str(tmp_path / "eval"), str(tmp_path / "absent"))
    assert [path for _label, path in got] == [str(log), str(tmp_path / "eval")]  # the runs folder does not exist
