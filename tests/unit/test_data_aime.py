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
        ("aime25.jsonl", {"aime/aime25/0": "16"}),  # a two-digit year in the name only
        ("opencompass_aime2023.jsonl", {"aime/2023-I-2": "4", "aime/2023-I-3": "6"}),  # a JSON array
        ("AIME2022-II.parquet", {"aime/AIME2022-II/0": "10"}),  # parquet
        ("aime24/test.jsonl", {"aime/test/0": "70"}),  # the year in the folder name only
    ],
)
def test_each_layout(file: str, expected: dict[str, str]) -> None:
    df = data.load("aime", str(AIME / file))
    assert dict(zip(df["problem_id"], df["answer"], strict=True)) == expected
    assert set(df["kind"]) == {"math"} and set(df["tests"]) == {"[]"}


@pytest.mark.parametrize(
    ("file", "year", "exam"),
    [
        ("aime25.jsonl", 2025, None),
        ("aime2025-I.jsonl", 2025, "I"),
        ("AIME2022-II.parquet", 2022, "II"),
        ("aime24/test.jsonl", 2024, None),
        ("opencompass_aime2023.jsonl", 2023, "I"),
    ],
)
def test_year_from_file_and_folder_names(file: str, year: int, exam: str | None) -> None:
    """Issue: files named like aime25 got no year, so aime_years: [2025] rejected every row."""
    df = data.load("aime", str(AIME / file), years=[year])
    metas = [json.loads(m) for m in df["metadata"]]
    assert metas and {(m["year"], m["exam"]) for m in metas} == {(year, exam)}


@pytest.mark.parametrize(
    ("names", "year"),
    [
        (["gkv_aime25"], 2025),
        (["qwen25math_aime24_test"], 2024),  # the 25 of qwen25 is not a year
        (["maxwelljia_aime_2024_problems"], 2024),
        (["AIME2025-I"], 2025),
        (["test", "aime25", "data"], 2025),
        (["test", "run2019x"], None),  # a bare year counts in the file's own name only
        (["aimo_validation"], None),
        (["results_2021"], 2021),
    ],
)
def test_name_year(names: list[str], year: int | None) -> None:
    m = aime.name_year(names)
    got = None if m is None else (2000 + int(m["year"]) if len(m["year"]) == 2 else int(m["year"]))
    assert got == year


def test_json_array_named_jsonl_is_read_with_a_note() -> None:
    """Issue: a JSON array saved as .jsonl gave one error per line and no hint."""
    res = data.load_result("aime", str(AIME / "opencompass_aime2023.jsonl"))
    assert len(res.table) == 2 and res.dropped == []
    assert len(res.notes) == 1 and "a JSON array, not JSON lines" in res.notes[0]


def test_broken_json_array_is_one_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "aime25.jsonl"
    f.write_text((AIME / "opencompass_aime2023.jsonl").read_text()[:-10])
    with pytest.raises(DataError, match="starts with '\\[' like a JSON array but is not valid JSON"):
        data.load("aime", str(f))


def test_year_exam_and_number_and_difficulty() -> None:
    rows = {r["problem_id"]: r for r in records(data.load("aime", str(AIME)))}
    assert len(rows) == 12
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
        "aime/test/0",
    ]
    assert res.filtered == {"year not selected": 7}
    assert len(data.load("aime", str(AIME), years=[2024, 2025])) == 8


def test_year_filter_on_a_file_without_years(tmp_path: Path) -> None:
    f = tmp_path / "aime.jsonl"
    f.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n")
    with pytest.raises(DataError, match="field 'year': unknown.*data.aime_year"):
        data.load("aime", str(f), years=[2025])
    df = data.load("aime", str(f), years=[2025], year=2025)
    assert json.loads(df["metadata"].iloc[0])["year"] == 2025
    with pytest.raises(ValueError, match="not an AIME year"):
        data.load("aime", str(f), year=25)


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
        ("\\fbox{070}", "70"),
        ("$\\framebox{204}$", "204"),
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
