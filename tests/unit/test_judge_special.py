"""Special-judge problems: a verdict the judge cannot decide is never a pass.

Issue: special-judge rows were accepted when the output had the same tokens in any order, so an
identity permutation passed a derangement problem. Now a row is decided by its checker program (run
in a sandbox of its own), by a rule for TACO's cases 2 and 3, or not at all (status undecidable,
reward 0; `fade prepare` leaves such rows out unless the user opts into the labelled lenient rule).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fade_core import data, verifiers

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    verifiers.shutdown()


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    """The fixture's TACO test rows, the undecidable one kept with the lenient rule."""
    res = data.load_result("taco", str(FIX / "taco" / "test.jsonl"), special_judge_without_checker="lenient")
    return {r["problem_id"]: r for r in data.records(res.table)}


def undecidable(row: dict) -> dict:
    meta = json.loads(row["metadata"])
    meta.pop("judge")
    return {**row, "metadata": json.dumps(meta)}


DERANGE = "n = int(input())\nprint(*[i % n + 1 for i in range(1, n + 1)])"
IDENTITY = "n = int(input())\nprint(*range(1, n + 1))"
REVERSED = "n = int(input())\nprint(*range(n, 0, -1))"  # a derangement for n = 2, not for n = 3


def test_checker_decides_and_rejects_invalid_answers(rows: dict[str, dict]) -> None:
    row = rows["taco/test/1"]
    scores = verifiers.score_batch([row] * 4, [DERANGE, IDENTITY, REVERSED, "print('2 1')"])
    assert [s.passed for s in scores] == [True, False, False, False]
    assert [s.status for s in scores[1:]] == ["wrong_answer"] * 3
    assert "rejected by the checker" in scores[1].detail
    assert scores[3].detail.startswith("1/2 tests")  # the hard-coded answer fits test 1 only


def test_a_broken_checker_rejects(rows: dict[str, dict]) -> None:
    meta = json.loads(rows["taco/test/1"]["metadata"])
    for checker in ("def check(input, output, expected):\n    return 1\n",  # truthy is not True
                    "def check(input, output, expected):\n    raise ValueError('bug')\n",
                    "def nope(:\n"):  # fmt: skip
        row = {**rows["taco/test/1"], "metadata": json.dumps({**meta, "checker": checker})}
        s = verifiers.score(row, DERANGE)
        assert not s.passed and s.status == "wrong_answer", (checker, s)


def test_checker_runs_in_the_sandbox_not_in_this_process(rows: dict[str, dict], tmp_path: Path) -> None:
    marker = tmp_path / "touched"
    checker = f"def check(input, output, expected):\n    open({str(marker)!r}, 'w').write('x')\n    return True\n"
    meta = json.loads(rows["taco/test/1"]["metadata"])
    row = {**rows["taco/test/1"], "metadata": json.dumps({**meta, "checker": checker})}
    s = verifiers.score(row, DERANGE)
    assert not marker.exists()  # the checker could not write to the host
    assert not s.passed  # and its failure is a rejection


def test_without_a_checker_nothing_passes(rows: dict[str, dict]) -> None:
    row = undecidable(rows["taco/test/2"])
    scores = verifiers.score_batch([row, row], ["n = int(input())\nprint(2, n - 2)", "print('anything')"])
    assert [(s.passed, s.status, s.reward) for s in scores] == [(False, "undecidable", 0.0)] * 2
    assert "never a pass" in scores[0].detail


def test_lenient_rule_only_when_asked_and_labelled(rows: dict[str, dict]) -> None:
    row = rows["taco/test/2"]  # loaded with special_judge_without_checker="lenient"
    s = verifiers.score(row, "print(3, 2)")
    assert s.passed and s.status == "passed_lenient" and "not a real check" in s.detail
    assert not verifiers.score(row, "print(1, 4)").passed  # other tokens: still a fail


def test_case_2_and_3_rules(rows: dict[str, dict]) -> None:
    even, third = rows["taco/test/3"], rows["taco/test/4"]
    scores = verifiers.score_batch(
        [even, even, third, third, third],
        [
            "print('yes' if int(input()) % 2 == 0 else 'no')",  # any letter case
            "print('no' if int(input()) % 2 == 0 else 'yes')",
            "print(int(input()) / 3)",  # 0.3333333333333333 for 0.3333333333
            "print(round(int(input()) / 3, 7))",  # within 1e-6
            "print(round(int(input()) / 3, 3))",  # not within 1e-6
        ],
    )
    assert [s.passed for s in scores] == [True, False, True, True, False]


def test_call_mode_special_judge_without_checker_is_undecidable() -> None:
    row = {"problem_id": "c", "benchmark": "taco", "kind": "code_call", "fn_name": "f",
           "metadata": json.dumps({"special_judge": True, "special_judge_case": 1,
                                   "checker": "def check(i, o, e):\n    return True\n"}),
           "tests": json.dumps([{"input": [1], "output": [1, 2], "testtype": "functional"}])}  # fmt: skip
    s = verifiers.score(row, "def f(x):\n    return [1, 2]")
    assert (s.passed, s.status) == (False, "undecidable")  # a checker decides stdout, not return values
