"""Generic math and code files (fade_core.data.generic_math / generic_code), their splits, and AIME rows
assigned to a split, so that math can be trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fade_core import config, data
from fade_core.data.schema import DataError


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_generic_math_reads_gsm8k_math_and_plain_answers(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "mine.jsonl", [
        {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},           # GSM8K
        {"problem": "Simplify 2/4.", "solution": "It is $\\boxed{\\frac{1}{2}}$.", "level": "Level 5",   # MATH
         "type": "Algebra", "unique_id": "alg/1"},
        {"prompt": "Give sqrt(12).", "final_answer": "$2\\sqrt{3}$", "split": "test", "difficulty": "easy"},
        {"query": "A thousand?", "answer": 1000},
    ])
    t = data.load("math-mine", str(f))
    assert t.benchmark.unique().tolist() == ["math-mine"] and set(t.kind) == {"math"}
    assert t.answer.tolist() == ["7", "\\frac{1}{2}", "2\\sqrt{3}", "1000"]
    assert t.problem_id.tolist() == ["math-mine/mine/0", "math-mine/alg/1", "math-mine/mine/2", "math-mine/mine/3"]
    assert t.split.tolist() == ["train", "train", "test", "train"]  # own split kept, the rest train
    assert t.difficulty_level.tolist() == ["unknown", "hard", "easy", "unknown"]
    assert json.loads(t.metadata[1])["solution"].startswith("It is") and "boxed" not in t.prompt[1]


def test_generic_math_bad_rows_name_the_field(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "bad.jsonl", [{"question": "No answer here."}, {"answer": "3"}])
    with pytest.raises(DataError) as err:
        data.load("math", str(f))
    msg = str(err.value)
    assert "row 0" in msg and "'answer'" in msg and "row 1" in msg and "'problem'" in msg
    with pytest.raises(DataError, match="data.sources.math"):
        data.load("math")


def test_test_fraction_is_a_stable_hash_split(tmp_path: Path) -> None:
    rows = [{"id": i, "question": f"q{i}", "answer": str(i)} for i in range(200)]
    a = data.load("math", str(_jsonl(tmp_path / "a.jsonl", rows)), test_fraction=0.25)
    b = data.load("math", str(_jsonl(tmp_path / "b.jsonl", rows[::-1])), test_fraction=0.25)
    test_a = set(a.problem_id[a.split == "test"])
    assert test_a == set(b.problem_id[b.split == "test"])  # the same rows whatever the order
    assert 30 <= len(test_a) <= 70 and set(a.split) == {"train", "test"}


def test_generic_code_stdin_and_call_problems(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "code.jsonl", [
        {"id": "sum", "question": "Print a+b.", "tests": [{"input": "1 2\n", "output": "3\n"}]},
        {"id": "add", "prompt": "Write add(a, b).", "fn_name": "add", "starter_code": "def add(a, b):",
         "tests": json.dumps([{"input": [1, 2], "output": 3}])},
        {"id": "apps", "question": "Double it.", "input_output": json.dumps({"inputs": ["2\n"], "outputs": ["4\n"]}),
         "split": "test", "metadata": {"judge": "tokens"}},
        {"id": "io", "description": "Square.", "fn_name": "sq", "inputs": [[3]], "outputs": [9]},
    ])
    t = data.load("code-mine", str(f))
    assert t.kind.tolist() == ["code_stdio", "code_call", "code_stdio", "code_call"]
    assert t.fn_name.tolist()[1] == "add" and t.starter_code[1] == "def add(a, b):"
    assert json.loads(t.tests[0]) == [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    assert json.loads(t.tests[3]) == [{"input": [3], "output": 9, "testtype": "functional"}]
    assert t.split.tolist() == ["train", "train", "test", "train"]
    md = json.loads(t.metadata[2])
    assert md["judge"] == "tokens" and md["prelude"] is None


def test_generic_code_judged_in_the_sandbox(tmp_path: Path) -> None:
    from fade_core import verifiers
    from fade_core.data.schema import records

    f = _jsonl(tmp_path / "code.jsonl", [
        {"id": "sum", "question": "Print a+b.", "tests": [{"input": "1 2\n", "output": "3\n"}]},
        {"id": "add", "prompt": "Write add(a, b).", "fn_name": "add", "tests": [{"input": [1, 2], "output": 3}]},
    ])
    rows = records(data.load("code", str(f)))
    scores = verifiers.score_batch(
        [rows[0], rows[0], rows[1], rows[1]],
        ["```python\na, b = map(int, input().split())\nprint(a + b)\n```", "```python\nprint(4)\n```",
         "```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(a, b):\n    return a * b\n```"],
        workers=1)
    assert [s.passed for s in scores] == [True, False, True, False]


def test_generic_code_bad_tests_name_the_field(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "bad.jsonl", [
        {"question": "No tests."},
        {"question": "Call without list args.", "fn_name": "f", "tests": [{"input": 3, "output": 9}]},
        {"question": "Stdin with numbers.", "tests": [{"input": 3, "output": 9}]},
        {"question": "Bad name.", "fn_name": "not a name", "tests": [{"input": [1], "output": 1}]},
    ])
    res = data.load_result("code", str(f), on_bad_rows="drop")
    assert res.table.empty and [(i.row, i.field) for i in res.dropped] == [
        (0, "tests"), (1, "tests"), (2, "tests"), (3, "fn_name")]


def test_aime_rows_take_the_configured_split_and_generic_names_are_known() -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "aime" / "aime25.jsonl"
    assert set(data.load("aime", str(fixture)).split) == {"test"}
    cfg = config.load(None, ["data.aime_split=train", "data.math.test_fraction=0.2"])
    opts = data.options_from_config("aime", cfg.data)
    assert set(data.load("aime", str(fixture), **opts).split) == {"train"}
    assert data.options_from_config("math-gsm8k", cfg.data)["test_fraction"] == 0.2
    assert data.is_known("math") and data.is_known("code-lcb") and not data.is_known("maths") and not data.is_known("code-")
