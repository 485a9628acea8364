"""LiveCodeBench loader: release selection, date window, plain and compressed private tests."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fade_core import data
from fade_core.data import livecodebench as lcb
from fade_core.data.schema import BadField, DataError, records

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"
LCB = str(FIX / "livecodebench")
# problems the fixture releases add: v1 two, v2..v6 one each
ADDED = {
    1: ["abc301_a", "two-sum"],
    2: ["1850_b"],
    3: ["abc335_b"],
    4: ["find-mex"],
    5: ["abc372_c"],
    6: ["2060_a"],
}


def ids(df) -> list[str]:
    return sorted(p.split("/", 1)[1] for p in df["problem_id"])


@pytest.mark.parametrize(
    ("version", "releases"),
    [
        ("release_v1", [1]),
        ("release_v2", [1, 2]),
        ("release_v5", [1, 2, 3, 4, 5]),
        ("release_v6", [1, 2, 3, 4, 5, 6]),
        ("release_latest", [1, 2, 3, 4, 5, 6]),
        ("v5", [5]),
        ("v1", [1]),
        ("v2..v5", [2, 3, 4, 5]),
        ("v3..v3", [3]),
    ],
)
def test_version_selection(version: str, releases: list[int]) -> None:
    assert lcb.select_versions(version) == releases
    df = data.load("livecodebench", LCB, version=version)
    assert ids(df) == sorted(q for r in releases for q in ADDED[r])
    assert sorted({json.loads(m)["release"] for m in df["metadata"]}) == releases


@pytest.mark.parametrize("version", ["release_v7", "v0", "v5..v2", "latest", "v1..v9"])
def test_bad_version(version: str) -> None:
    with pytest.raises(ValueError, match="livecodebench version"):
        lcb.select_versions(version)


def test_date_window_counts_what_it_leaves_out() -> None:
    res = data.load_result("livecodebench", LCB, date_from="2023-09-01", date_to="2024-09-28")
    assert ids(res.table) == sorted(["1850_b", "abc335_b", "find-mex", "abc372_c"])
    assert res.filtered == {"contest_date before date_from": 2, "contest_date after date_to": 1}
    assert all("2023-09-01" <= d[:10] <= "2024-09-28" for d in res.table["contest_date"])
    with pytest.raises(ValueError, match="after date_to"):
        data.load("livecodebench", LCB, date_from="2025-01-01", date_to="2024-01-01")
    with pytest.raises(ValueError, match="not an ISO date"):
        data.load("livecodebench", LCB, date_from="soon")


def test_functional_and_stdin_problems() -> None:
    rows = {r["problem_id"]: r for r in records(data.load("livecodebench", LCB))}
    two = rows["livecodebench/two-sum"]  # functional, private tests compressed
    assert (
        two["kind"] == "code_call" and two["fn_name"] == "twoSum" and "class Solution" in two["starter_code"]
    )
    assert json.loads(two["tests"]) == [
        {"input": [[2, 7, 11, 15], 9], "output": [0, 1], "testtype": "functional"},
        {"input": [[3, 2, 4], 6], "output": [1, 2], "testtype": "functional"},
        {"input": [[3, 3], 6], "output": [0, 1], "testtype": "functional"},
    ]
    mex = rows["livecodebench/find-mex"]
    assert json.loads(mex["tests"])[1] == {"input": [[]], "output": 0, "testtype": "functional"}
    a = rows["livecodebench/abc301_a"]  # stdin, private tests plain JSON
    assert a["kind"] == "code_stdio" and a["fn_name"] is None and a["source"] == "atcoder"
    assert json.loads(a["tests"]) == [
        {"input": "banana\n", "output": "3\n", "testtype": "stdin"},
        {"input": "aaa\n", "output": "3\n", "testtype": "stdin"},
    ]
    cf = rows["livecodebench/1850_b"]  # stdin, private tests compressed
    assert len(json.loads(cf["tests"])) == 2 and cf["contest_date"] == "2023-09-02T00:00:00"
    meta = json.loads(cf["metadata"])
    assert (meta["num_public_tests"], meta["num_private_tests"], meta["release"]) == (1, 1, 2)
    assert rows["livecodebench/abc335_b"]["difficulty_level"] == "hard"


def test_compressed_private_tests_round_trip_exactly() -> None:
    tests = [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
    blob = lcb.encode_private_tests(tests)
    assert not blob.startswith("[")
    assert lcb.decode_private_tests(blob) == tests
    assert lcb.decode_private_tests(json.dumps(tests)) == tests


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "input": st.text(max_size=30),
                "output": st.text(max_size=30),
                "testtype": st.sampled_from(["stdin", "functional"]),
            }
        ),
        max_size=5,
    )
)
def test_decode_inverts_encode(tests) -> None:
    assert lcb.decode_private_tests(lcb.encode_private_tests(tests)) == tests


def test_compressed_blob_with_code_is_refused() -> None:
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(BadField, match="refusing to load builtins.print"):
        lcb.decode_private_tests(blob)


def test_bad_rows_error_names_file_row_and_field() -> None:
    src = str(FIX / "bad" / "livecodebench" / "test.jsonl")
    with pytest.raises(DataError) as ei:
        data.load("livecodebench", src)
    got = [(i.row, i.field) for i in ei.value.issues]
    assert got == [
        (1, "private_test_cases"),
        (2, "metadata"),
        (3, "contest_date"),
        (4, "problem_id"),
        (5, "public_test_cases"),
    ]
    res = data.load_result("livecodebench", src, on_bad_rows="drop")
    assert ids(res.table) == ["abc301_a"] and res.dropped_rows == 5


def test_missing_release_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "test.jsonl").write_text((FIX / "livecodebench" / "test.jsonl").read_text())
    assert len(data.load("livecodebench", str(tmp_path), version="release_v1")) == 2
    with pytest.raises(DataError, match=r"test2\.jsonl: missing; release v2"):
        data.load("livecodebench", str(tmp_path), version="release_v2")


def test_single_release_file_respects_version() -> None:
    f = str(FIX / "livecodebench" / "test3.jsonl")
    assert ids(data.load("livecodebench", f)) == ["abc335_b"]
    assert data.load("livecodebench", f, version="v5").empty
