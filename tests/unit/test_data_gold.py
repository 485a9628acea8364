"""Gold validation: reference solutions run through the real judge at prepare time; failing rows are
dropped or flagged, and the gold pass rate reaches the data card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fade_core import data, verifiers
from fade_core.data import card, gold

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    verifiers.shutdown()


@pytest.fixture(scope="module")
def flagged() -> data.LoadResult:
    return data.load_result("taco", str(FIX / "taco"), gold={"on_fail": "flag", "progress": False})


def test_each_row_gets_its_gold_verdict(flagged: data.LoadResult) -> None:
    got = {
        r["problem_id"]: (r["gold_pass"], r["gold_detail"].split(";")[0]) for r in data.records(flagged.table)
    }
    assert got == {
        "taco/train/0": (True, "1/1 reference solutions pass"),
        "taco/train/1": (None, "not validated: no reference solution"),
        "taco/train/2": (True, "1/1 reference solutions pass"),  # keep_solutions=1 of its 2
        "taco/train/3": (False, "0/1 reference solutions pass"),  # the wrong reference
        "taco/test/0": (True, "1/1 reference solutions pass"),  # needs TACO's prelude (Counter)
        "taco/test/1": (True, "1/1 reference solutions pass"),  # decided by its checker
        "taco/test/3": (True, "1/1 reference solutions pass"),  # case-insensitive rule
        "taco/test/4": (True, "1/1 reference solutions pass"),  # numeric tolerance rule
    }
    assert "wrong_answer" in flagged.table.set_index("problem_id").loc["taco/train/3", "gold_detail"]
    assert flagged.gold == {
        "validated": 7,
        "passed": 6,
        "failed": 1,
        "not_validated": 1,
        "pass_rate": round(6 / 7, 4),
        "on_fail": "flag",
        "failures": [
            {"problem_id": "taco/train/3", "detail": flagged.gold["failures"][0]["detail"]},
        ],
    }


def test_drop_mode_drops_and_counts(tmp_path: Path) -> None:
    res = data.load_result(
        "taco", str(FIX / "taco"), splits=["train"], gold={"on_fail": "drop", "progress": False}
    )
    assert "taco/train/3" not in set(res.table["problem_id"]) and len(res.table) == 3
    assert res.filtered == {gold.FAILED: 1}
    path = data.write_table(res.table, tmp_path / "taco.parquet")  # the table keeps its gold columns
    back = data.read_table(path)
    assert back["gold_pass"].dtype == "boolean" and back["gold_pass"].tolist()[0] is True


def test_lenient_rows_and_humaneval_canonical_solutions() -> None:
    res = data.load_result(
        "taco", str(FIX / "taco" / "test.jsonl"), special_judge_without_checker="lenient",
        gold={"on_fail": "flag", "progress": False},
    )  # fmt: skip
    row = res.table.set_index("problem_id").loc["taco/test/2"]
    # the lenient rule wants the reference's tokens: a valid answer with others ("0 5" for "2 3") fails
    assert bool(row["gold_pass"]) is False and "lenient special judge" in row["gold_detail"]
    he = data.load_result("humaneval", str(FIX / "bad" / "humaneval.jsonl"), on_bad_rows="drop",
                          gold={"on_fail": "flag", "progress": False})  # fmt: skip
    assert he.gold["validated"] == 1 and he.gold["passed"] == 1


def test_reference_programs() -> None:
    row = {"benchmark": "taco", "metadata": json.dumps({"solutions": ["print(1)", "", 3]})}
    assert gold.reference_programs(row) == ["print(1)"]
    he = {"benchmark": "humaneval", "metadata": json.dumps({"canonical_solution": "    return 1\n"})}
    assert gold.reference_programs(he) == ["    return 1\n"]
    assert gold.reference_programs({"benchmark": "aime", "metadata": "{}"}) == []
    with pytest.raises(ValueError, match="on_fail"):
        gold.validate(data.load_result("taco", str(FIX / "taco"), splits=["train"]), on_fail="keep")


def test_card_reports_the_gold_pass_rate(flagged: data.LoadResult, tmp_path: Path) -> None:
    s = card.benchmark_summary(flagged.table, source="fixture", filtered=flagged.filtered, gold=flagged.gold)
    assert s["gold"]["pass_rate"] == round(6 / 7, 4)
    assert s["special_judge"] == {"casefold": 1, "checker": 1, "numeric": 1}
    md, js = card.write(card.build({"taco": s}), tmp_path)
    text = md.read_text()
    assert "| taco | 8 |" in text and "85.7% (6/7) |" in text
    assert "7 rows validated, 6 pass, 1 fail (kept, flagged gold_pass=false), 1 not validated" in text
    assert "| taco/train/3 | 0/1 reference solutions pass" in text
    assert "decided by the row's checker 1" in text
    assert json.loads(js.read_text())["benchmarks"]["taco"]["gold"]["failed"] == 1
