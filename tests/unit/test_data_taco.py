"""TACO loader: native fixtures (stdio, call-based, list-of-lines, special judge) and bad rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fade_core import data
from fade_core.data import taco
from fade_core.data.schema import DataError, records
from fade_core.sandbox import compare

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def by_id(df: pd.DataFrame) -> dict[str, dict]:
    return {r["problem_id"]: r for r in records(df)}


def test_fixture_folder_loads_both_splits() -> None:
    res = data.load_result("taco", str(FIX / "taco"))
    rows = by_id(res.table)
    # test/2 is a special-judge row (any valid answer) with no checker: left out by default, counted
    assert sorted(rows) == [
        "taco/test/0",
        "taco/test/1",
        "taco/test/3",
        "taco/test/4",
        "taco/train/0",
        "taco/train/1",
        "taco/train/2",
        "taco/train/3",
    ]
    assert res.table["split"].value_counts().to_dict() == {"train": 4, "test": 4}
    assert res.dropped == [] and res.filtered == {taco.EXCLUDED: 1} and res.notes == []
    assert {json.loads(m)["prelude"] for m in res.table["metadata"]} == {"taco"}


def test_stdio_rows_with_strings_and_lists_of_lines() -> None:
    rows = by_id(data.load("taco", str(FIX / "taco")))
    r0 = rows["taco/train/0"]
    assert r0["kind"] == "code_stdio" and r0["fn_name"] is None
    assert json.loads(r0["tests"]) == [
        {"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
        {"input": "10 -4\n", "output": "6\n", "testtype": "stdin"},
    ]
    r1 = rows["taco/train/1"]  # inputs/outputs given as lists of lines
    assert json.loads(r1["tests"])[0] == {"input": "3\n1 2 3\n", "output": "6", "testtype": "stdin"}
    assert r1["difficulty"] == "MEDIUM_HARD" and r1["difficulty_level"] == "medium"
    meta = json.loads(r1["metadata"])
    assert meta["skill_types"] == ["Sorting", "Greedy algorithms"] and meta["tags"] == ["Sorting", "Greedy"]
    assert meta["time_limit_s"] == 1.0 and meta["memory_limit_mb"] == 256.0
    assert meta["file"].endswith("taco/train.jsonl") and meta["row"] == 1


def test_call_based_rows_unwrap_only_consistently_wrapped_outputs() -> None:
    rows = by_id(data.load("taco", str(FIX / "taco")))
    add = rows["taco/train/2"]
    assert (
        add["kind"] == "code_call" and add["fn_name"] == "add" and add["starter_code"].startswith("def add")
    )
    assert json.loads(add["tests"]) == [
        {"input": [1, 2], "output": 3, "testtype": "functional"},
        {"input": [3, 4], "output": 7, "testtype": "functional"},
    ]
    meta = json.loads(add["metadata"])
    assert meta["outputs_unwrapped"] is True and meta["num_solutions"] == 2 and len(meta["solutions"]) == 1
    srt = rows["taco/train/3"]
    assert [t["output"] for t in json.loads(srt["tests"])] == [[1, 2, 3], [4, 5]]
    assert json.loads(srt["metadata"])["outputs_unwrapped"] is False
    assert srt["difficulty_level"] == "unknown"


def test_special_judge_flags_from_the_sidecar_file_and_how_each_is_judged() -> None:
    res = data.load_result("taco", str(FIX / "taco"), special_judge_without_checker="lenient")
    meta = {pid: json.loads(r["metadata"]) for pid, r in by_id(res.table).items()}
    assert res.filtered == {}
    got = {
        pid: (m.get("special_judge"), m.get("special_judge_case")) for pid, m in meta.items() if "test" in pid
    }
    assert got == {
        "taco/test/0": (False, 0),
        "taco/test/1": (True, 1),
        "taco/test/2": (True, 1),
        "taco/test/3": (True, 2),
        "taco/test/4": (True, 3),
    }
    judges = {pid: compare.judge_from_metadata(m)[0] for pid, m in meta.items() if "test" in pid}
    assert judges == {
        "taco/test/0": "lines",
        "taco/test/1": "checker",  # case 1 with a checker program on the row
        "taco/test/2": "special_lenient",  # case 1 without one, kept only because asked, labelled
        "taco/test/3": "casefold",
        "taco/test/4": "numeric",
    }
    assert meta["taco/test/1"]["checker"].startswith("def check(input, output, expected)")
    assert "special_judge" not in meta["taco/train/0"]  # the sidecar covers the test split only


def test_single_file_and_split_selection() -> None:
    df = data.load("taco", str(FIX / "taco" / "test.jsonl"))
    assert df["split"].unique().tolist() == ["test"]
    assert json.loads(by_id(df)["taco/test/1"]["metadata"])["special_judge"] is True
    res = data.load_result("taco", str(FIX / "taco"), splits=["train"])
    assert set(res.table["split"]) == {"train"}


def test_hub_parquet_layout_with_empty_fields_loads_every_row() -> None:
    """Issue: the hub's parquet (every column a string, empty fields null) lost nearly every row: the
    nulls came in as NaN and the error blamed input_output. One file, as the hub ships a split."""
    hub = FIX / "taco_hub"
    assert pd.read_parquet(hub / "ALL" / "train-00000-of-00001.parquet")["url"].isna().all()  # the wart
    res = data.load_result("taco", str(hub))
    ref = data.load("taco", str(FIX / "taco"), splits=["train"])
    assert res.table["problem_id"].tolist() == ref["problem_id"].tolist() and res.dropped == []
    assert res.table["tests"].tolist() == ref["tests"].tolist()
    meta = json.loads(res.table["metadata"].iloc[0])
    assert meta["url"] is None and meta["time_limit_s"] is None


def test_pandas_written_parquet_one_file(tmp_path: Path) -> None:
    """Issue: fade's own 4-row fixture written as one parquet file lost 2 rows (missing text -> NaN)."""
    rows = [json.loads(line) for line in (FIX / "taco" / "train.jsonl").read_text().splitlines()]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    res = data.load_result("taco", str(tmp_path))
    assert len(res.table) == 4 and res.dropped == []


def test_flags_match_a_subset_by_its_row_key_not_its_position() -> None:
    """Issue: next to a subset, the upstream flag file gave rows the flags of other rows."""
    res = data.load_result("taco", str(FIX / "taco_subset"), special_judge_without_checker="lenient")
    meta = {pid: json.loads(r["metadata"]) for pid, r in by_id(res.table).items()}
    assert sorted(meta) == ["taco/test/1", "taco/test/4", "taco/test/7"]  # ids keep the upstream rows
    assert {pid: m["special_judge"] for pid, m in meta.items()} == {
        "taco/test/1": False,
        "taco/test/4": True,
        "taco/test/7": True,
    }
    assert meta["taco/test/7"]["special_judge_case"] == 3
    # the stray notes.jsonl is ignored, and said so
    assert len(res.notes) == 1 and "notes.jsonl: ignored" in res.notes[0]


def test_subset_without_row_keys_is_a_clear_error(tmp_path: Path) -> None:
    rows = [json.loads(x) for x in (FIX / "taco_subset" / "test.jsonl").read_text().splitlines()]
    (tmp_path / "test.jsonl").write_text(
        "".join(json.dumps({**r, "taco_test_row": None}) + "\n" for r in rows)
    )
    shutil.copy(FIX / "taco_subset" / "output_spj.jsonl", tmp_path)
    with pytest.raises(DataError, match="10 special-judge flags but 3 test rows.*taco_test_row"):
        data.load("taco", str(tmp_path))
    # the complete split (as many rows as flags) is matched by position
    shutil.copy(FIX / "taco" / "test.jsonl", tmp_path / "test.jsonl")
    shutil.copy(FIX / "taco" / "output_spj.jsonl", tmp_path)
    assert len(data.load("taco", str(tmp_path), special_judge_without_checker="lenient")) == 5


def test_a_row_missing_from_the_flag_file_is_a_bad_row(tmp_path: Path) -> None:
    shutil.copy(FIX / "taco_subset" / "test.jsonl", tmp_path)
    flags = [json.loads(x) for x in (FIX / "taco_subset" / "output_spj.jsonl").read_text().splitlines()]
    (tmp_path / "output_spj.jsonl").write_text("".join(json.dumps(f) + "\n" for f in flags if f["idx"] != 4))
    with pytest.raises(DataError, match="field 'special_judge': no entry for test row 4"):
        data.load("taco", str(tmp_path))
    res = data.load_result("taco", str(tmp_path), on_bad_rows="drop")
    assert res.dropped_rows == 1 and len(res.table) == 2


def test_bad_special_judge_policy() -> None:
    with pytest.raises(ValueError, match="special_judge_without_checker"):
        data.load("taco", str(FIX / "taco"), special_judge_without_checker="accept")


def test_file_with_unknown_split_needs_split(tmp_path: Path) -> None:
    f = tmp_path / "problems.jsonl"
    shutil.copy(FIX / "taco" / "train.jsonl", f)
    with pytest.raises(DataError, match="cannot tell the split"):
        data.load("taco", str(f))
    assert len(data.load("taco", str(f), split="train")) == 4
    with pytest.raises(DataError, match="no TACO data files"):  # a folder of such files only
        data.load("taco", str(tmp_path))


def test_parquet_and_arrow_shards_go_through_the_same_code(tmp_path: Path) -> None:
    import datasets

    rows = [json.loads(line) for line in (FIX / "taco" / "train.jsonl").read_text().splitlines()]
    (tmp_path / "ALL").mkdir()
    pd.DataFrame(rows[:2]).to_parquet(tmp_path / "ALL" / "train-00000-of-00002.parquet")
    pd.DataFrame(rows[2:]).to_parquet(tmp_path / "ALL" / "train-00001-of-00002.parquet")
    pq = data.load("taco", str(tmp_path))
    ref = data.load("taco", str(FIX / "taco"), splits=["train"])
    assert pq["tests"].tolist() == ref["tests"].tolist()
    assert pq["problem_id"].tolist() == ref["problem_id"].tolist()  # row numbers continue across shards

    ds = datasets.Dataset.from_list(rows)
    ds.save_to_disk(str(tmp_path / "arrow" / "train"))
    ar = data.load("taco", str(tmp_path / "arrow"))
    assert ar["tests"].tolist() == ref["tests"].tolist()


def test_bad_rows_error_names_file_row_and_field() -> None:
    with pytest.raises(DataError) as ei:
        data.load("taco", str(FIX / "bad" / "taco"))
    got = [(i.row, i.field) for i in ei.value.issues]
    assert got == [
        (1, "input_output"),
        (2, "difficulty"),
        (3, "tags"),
        (4, "input_output"),
        (5, "question"),
        (6, "input_output"),
    ]
    assert all(i.file.endswith("bad/taco/train.jsonl") for i in ei.value.issues)
    assert "row 4 (line 5), field 'input_output': 2 inputs but 1 outputs" in str(ei.value)


def test_bad_rows_drop_mode_counts_them() -> None:
    res = data.load_result("taco", str(FIX / "bad" / "taco"), on_bad_rows="drop")
    assert res.table["problem_id"].tolist() == ["taco/train/0"]
    assert res.dropped_rows == 6
    df = data.load("taco", str(FIX / "bad" / "taco"), on_bad_rows="drop")
    assert len(df.attrs["dropped"]) == 6 and df.attrs["dropped"][0]["field"] == "input_output"


def test_missing_source_and_bad_split() -> None:
    with pytest.raises(DataError, match="no such file"):
        data.load("taco", "./does/not/exist")
    with pytest.raises(ValueError, match="unknown TACO split"):
        data.load("taco", str(FIX / "taco"), splits=["valid"])


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1 second", 1.0), ("2.5 seconds", 2.5), ("500 milliseconds", 0.5), (None, None), ("fast", None)],
)
def test_time_limit(text, seconds) -> None:
    assert taco.parse_time_limit(text) == seconds


@pytest.mark.parametrize(
    ("text", "mb"), [("256 megabytes", 256.0), ("1 gigabyte", 1024.0), ("512 kilobytes", 0.5), (None, None)]
)
def test_memory_limit(text, mb) -> None:
    assert taco.parse_memory_limit(text) == mb
