"""The problem-table schema: lazy validation, mapping failures to file/row/field, drop mode."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fade_core.data import schema
from fade_core.data.schema import BadField, DataError, Origin, build_table, fault_in_tests, records


def row(pid: str = "p/0", **kw) -> dict:
    base = {
        "problem_id": pid,
        "benchmark": "toy",
        "split": "train",
        "kind": "code_stdio",
        "prompt": "print the input",
        "starter_code": "",
        "fn_name": None,
        "tests": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
        "answer": None,
        "difficulty": "EASY",
        "difficulty_level": "easy",
        "contest_date": None,
        "source": "toy",
        "metadata": "{}",
    }
    base.update(kw)
    return base


def build(rows: list[dict], on_bad_rows: str = "error"):
    recs = [(Origin("toy.jsonl", i, i + 1), r) for i, r in enumerate(rows)]
    return build_table(recs, lambda r: r, benchmark="toy", on_bad_rows=on_bad_rows)


def test_valid_rows_of_every_kind_pass() -> None:
    rows = [
        row("a"),
        row(
            "b",
            kind="code_call",
            fn_name="f",
            tests=json.dumps([{"input": [1, 2], "output": 3, "testtype": "functional"}]),
        ),
        row(
            "c",
            kind="code_call",
            fn_name="g",
            tests=json.dumps([{"input": "def check(c): pass", "output": None, "testtype": "humaneval"}]),
        ),
        row("d", kind="math", tests="[]", answer="33", contest_date="2024-01-01"),
        row("e", kind="expression", tests="[]", answer="22", contest_date="2023-08-21T00:00:00"),
    ]
    res = build(rows)
    assert list(res.table.columns) == list(schema.COLUMNS)
    assert res.table["problem_id"].tolist() == ["a", "b", "c", "d", "e"]
    assert res.dropped == []
    recs = records(res.table)
    assert recs[0]["fn_name"] is None and recs[3]["answer"] == "33" and recs[0]["contest_date"] is None


def test_lazy_validation_reports_every_bad_row_and_field() -> None:
    rows = [
        row("ok"),
        row("k", kind="bogus"),
        row("t", tests="not json"),
        row(
            "f",
            kind="code_call",
            fn_name=None,
            tests=json.dumps([{"input": [1], "output": 1, "testtype": "functional"}]),
        ),
        row("m", kind="math", tests="[]", answer=None),
        row("d", contest_date="last tuesday"),
        row("meta", metadata="[1, 2]"),
        row("lvl", difficulty_level="trivial"),
        row("empty", tests="[]"),
        row(
            "mixed",
            kind="code_stdio",
            tests=json.dumps([{"input": [1], "output": 1, "testtype": "functional"}]),
        ),
    ]
    with pytest.raises(DataError) as ei:
        build(rows)
    got = {(i.row, i.field) for i in ei.value.issues}
    assert got == {
        (1, "kind"),
        (2, "tests"),
        (3, "fn_name"),
        (4, "answer"),
        (5, "contest_date"),
        (6, "metadata"),
        (7, "difficulty_level"),
        (8, "tests"),
        (9, "tests"),
    }
    msg = str(ei.value)
    assert "toy.jsonl, row 2 (line 3), field 'tests': not valid JSON" in msg
    assert "a code_stdio problem needs at least one test" in msg
    assert "stdin tests only" in msg


def test_drop_mode_keeps_good_rows_and_returns_issues() -> None:
    rows = [row("a"), row("b", kind="bogus"), row("c"), row("d", tests="[]")]
    res = build(rows, on_bad_rows="drop")
    assert res.table["problem_id"].tolist() == ["a", "c"]
    assert res.dropped_rows == 2
    assert {i.row for i in res.dropped} == {1, 3}


def test_duplicate_problem_id_keeps_first_and_names_both_rows() -> None:
    with pytest.raises(
        DataError,
        match=r"row 2 \(line 3\), field 'problem_id': duplicate problem_id 'a' \(first at toy.jsonl, row 0\)",
    ):
        build([row("a"), row("b"), row("a")])
    res = build([row("a"), row("b"), row("a", prompt="other")], on_bad_rows="drop")
    assert res.table["prompt"].tolist() == ["print the input", "print the input"]
    assert res.dropped_rows == 1


def test_converter_errors_and_schema_errors_are_reported_together() -> None:
    def convert(r: dict) -> dict:
        if r.get("explode"):
            raise BadField("input_output", "boom")
        return r

    recs = [(Origin("x.jsonl", 0), {"explode": True}), (Origin("x.jsonl", 1), row("z", kind="nope"))]
    with pytest.raises(DataError) as ei:
        build_table(recs, convert, benchmark="toy")
    assert [(i.row, i.field) for i in ei.value.issues] == [(0, "input_output"), (1, "kind")]


def test_convert_returning_none_is_a_selection_not_a_bad_row() -> None:
    recs = [(Origin("x", i), row(f"p{i}")) for i in range(4)]
    res = build_table(
        recs, lambda r: r if r["problem_id"] != "p2" else None, benchmark="toy", filtered={"skipped": 1}
    )
    assert len(res.table) == 3 and res.dropped == [] and res.filtered == {"skipped": 1}


def test_bad_on_bad_rows_value() -> None:
    with pytest.raises(ValueError, match="on_bad_rows"):
        build([row()], on_bad_rows="ignore")


def test_unreadable_record_is_a_bad_row() -> None:
    rec = schema.Unreadable("not valid JSON")
    with pytest.raises(BadField) as ei:
        schema.require_record(rec)
    assert ei.value.field == "<record>"


@pytest.mark.parametrize(
    ("tests", "kind", "ok"),
    [
        ('[{"input": "1", "output": "2", "testtype": "stdin"}]', "code_stdio", True),
        ('[{"input": "1", "output": 2, "testtype": "stdin"}]', "code_stdio", False),
        ('[{"input": [1], "output": [2], "testtype": "functional"}]', "code_call", True),
        ('[{"input": 1, "output": 2, "testtype": "functional"}]', "code_call", False),
        ('[{"input": "x", "output": null, "testtype": "humaneval"}]', "code_call", True),
        ('[{"input": "x", "output": null, "testtype": "other"}]', "code_call", False),
        ('[{"input": "x", "output": null}]', "code_call", False),
        ("[]", "math", True),
        ("[]", "expression", True),
        ('[{"input": "1", "output": "2", "testtype": "stdin"}]', "math", False),
        ('{"input": "1"}', "code_stdio", False),
    ],
)
def test_fault_in_tests_cases(tests: str, kind: str, ok: bool) -> None:
    assert (fault_in_tests(tests, kind) is None) is ok


def test_parquet_round_trip_validates(tmp_path) -> None:
    res = build([row("a"), row("b", kind="math", tests="[]", answer="7")])
    path = schema.write_table(res.table, tmp_path / "x" / "toy.parquet")
    back = schema.read_table(path)
    assert records(back) == records(res.table)
    bad = back.copy()
    bad.loc[1, "kind"] = "essay"
    with pytest.raises(DataError, match="problem 'b', row 1, field 'kind'"):
        schema.validate(bad)
    with pytest.raises(DataError, match="whole"):
        schema.validate(back.drop(columns=["source"]))


def test_extra_column_is_rejected() -> None:
    df = schema.to_frame([row("a")])
    df["extra"] = "x"
    with pytest.raises(DataError):
        schema.validate(df)
    assert schema.validate(schema.empty_table()).empty
    assert isinstance(schema.validate(schema.to_frame([row("a")])), pd.DataFrame)
