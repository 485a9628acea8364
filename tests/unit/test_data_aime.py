"""AIME loader: every common layout, answer normalization, year filter, bad rows."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fade_core import data
from fade_core.data import aime
from fade_core.data.schema import BadField, DataError, records

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"
AIME = FIX / "aime"


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("aime_2024.jsonl", {"aime/2024-I-1": "24", "aime/2024-I-13": "16"}),  # problem/answer/id/url/year
        ("AIME_2024_ID.jsonl", {"aime/2024-II-4": "1", "aime/2024-II-9": "33"}),  # ID/Problem/Answer (int)
        ("aime2025-I.jsonl", {"aime/aime2025-I/0": "70", "aime/aime2025-I/1": "117"}),  # question/answer
        ("aimo_validation.jsonl", {"aime/2019-I-1": "342"}),  # id/problem/answer/url
    ],
)
def test_each_layout(file: str, expected: dict[str, str]) -> None:
    df = data.load("aime", str(AIME / file))
    assert dict(zip(df["problem_id"], df["answer"], strict=True)) == expected
    assert set(df["kind"]) == {"math"} and set(df["tests"]) == {"[]"}


def test_year_exam_and_number_and_difficulty() -> None:
    rows = {r["problem_id"]: r for r in records(data.load("aime", str(AIME)))}
    assert len(rows) == 7
    r = rows["aime/2024-I-13"]
    meta = json.loads(r["metadata"])
    assert (meta["year"], meta["exam"], meta["number"]) == (2024, "I", 13)
    assert (
        r["difficulty"] == "problem 13"
        and r["difficulty_level"] == "hard"
        and r["contest_date"] == "2024-01-01"
    )
    assert rows["aime/2024-II-9"]["difficulty_level"] == "medium"
    assert rows["aime/2024-II-4"]["difficulty_level"] == "easy"
    q = json.loads(rows["aime/aime2025-I/0"]["metadata"])
    assert (q["year"], q["exam"], q["number"]) == (2025, "I", None)
    assert rows["aime/aime2025-I/0"]["difficulty_level"] == "unknown"


def test_year_filter_counts_what_it_leaves_out() -> None:
    res = data.load_result("aime", str(AIME), years=[2024])
    assert sorted(res.table["problem_id"]) == [
        "aime/2024-I-1",
        "aime/2024-I-13",
        "aime/2024-II-4",
        "aime/2024-II-9",
    ]
    assert res.filtered == {"year not selected": 3}
    assert len(data.load("aime", str(AIME), years=[2024, 2025])) == 6


def test_year_filter_on_a_file_without_years(tmp_path: Path) -> None:
    f = tmp_path / "aime.jsonl"
    f.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n")
    with pytest.raises(DataError, match="field 'year': unknown"):
        data.load("aime", str(f), years=[2025])
    df = data.load("aime", str(f), years=[2025], year=2025)
    assert json.loads(df["metadata"].iloc[0])["year"] == 2025


def test_parquet_layout(tmp_path: Path) -> None:
    rows = [json.loads(x) for x in (AIME / "AIME_2024_ID.jsonl").read_text().splitlines()]
    pd.DataFrame(rows).to_parquet(tmp_path / "aime_2024.parquet")
    df = data.load("aime", str(tmp_path / "aime_2024.parquet"))
    assert sorted(df["problem_id"]) == ["aime/2024-II-4", "aime/2024-II-9"]


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("033", "33"),
        (33, "33"),
        ("0", "0"),
        ("999", "999"),
        (" 7 ", "7"),
        ("$204$", "204"),
        ("\\boxed{070}", "70"),
        (5.0, "5"),
    ],
)
def test_answer_normalization(raw, norm) -> None:
    assert aime.normalize_answer(raw) == norm


@pytest.mark.parametrize("raw", ["12.5", 1000, -1, "1,000", "abc", None, True, "", 3.5, "1e2"])
def test_answer_rejected(raw) -> None:
    with pytest.raises(BadField) as ei:
        aime.normalize_answer(raw)
    assert ei.value.field == "answer"


def test_bad_rows() -> None:
    src = str(FIX / "bad" / "aime.jsonl")
    with pytest.raises(DataError) as ei:
        data.load("aime", src)
    assert [(i.row, i.field) for i in ei.value.issues] == [(1, "answer"), (2, "answer"), (3, "problem")]
    res = data.load_result("aime", src, on_bad_rows="drop")
    assert res.table["problem_id"].tolist() == ["aime/2024-I-1"] and res.dropped_rows == 3
