"""fade_core.verifiers: dispatch, code extraction, math (math-verify in workers), countdown, batches."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from fade_core import countdown_task as countdown
from fade_core import verifiers
from fade_core.verifiers import programs


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    verifiers.shutdown()


def math_problem(answer: str) -> dict:
    return {"problem_id": "m1", "kind": "math", "answer": answer, "metadata": "{}"}


def cd_problem(numbers, target, with_meta=True) -> dict:
    md = {"numbers": list(numbers), "target": target} if with_meta else {}
    return {"problem_id": "c1", "kind": "expression", "prompt": countdown.format_prompt(numbers, target),
            "answer": str(target), "metadata": json.dumps(md), "tests": "[]"}  # fmt: skip


# -------------------------------------------------------------------------------------- extraction
def test_extract_code():
    assert verifiers.extract_code("x = 1") == "x = 1"
    text = "Here:\n```python\nprint(1)\n```\nand better:\n```py\nprint(2)\n```\n"
    assert verifiers.extract_code(text).strip() == "print(2)"
    assert verifiers.extract_code("```\nprint(3)\n```").strip() == "print(3)"
    assert verifiers.extract_code("```python\nprint(4)\n").strip() == "print(4)"  # unterminated block


def test_last_boxed():
    assert verifiers.last_boxed(r"a \boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert verifiers.last_boxed("none") is None
    assert verifiers.last_boxed(r"\boxed{unclosed") is None
    assert verifiers.last_boxed(r"$\framebox{204}$ minutes") == "204"  # issue: \framebox was not read
    assert verifiers.last_boxed(r"\boxed{1} and finally \fbox{2}") == "2"


# -------------------------------------------------------------------------------------------- math
@pytest.mark.parametrize(
    "gold,completion,passed",
    [
        ("042", r"The answer is \boxed{42}.", True),  # AIME leading zeros, fast path
        ("42", r"\boxed{042}", True),
        ("7", r"\boxed{8}", False),
        ("1,000", r"\boxed{1000}", True),
        (r"\frac{1}{2}", r"so we get $\boxed{0.5}$", True),
        (r"\frac{1}{2}", "The answer is 1/2.", True),  # plain answer
        ("x^2+2x+1", r"\boxed{(x+1)^2}", True),
        (r"\sqrt{2}", r"\boxed{\sqrt 2}", True),
        ("3", "The answer is 4.", False),
        ("204", r"or $\framebox{204}$ minutes", True),  # the Qwen2.5-Math AIME 2024 reference writes this
        ("204", r"so \fbox{204}.", True),
        ("204", r"so \framebox{205}.", False),
        (r"\frac{1}{2}", r"so $\framebox{\frac{2}{4}}$", True),  # through math-verify
        (r"\frac{1}{2}", r"so $\fbox{\frac{1}{3}}$", False),
    ],
)
def test_math(gold, completion, passed):
    s = verifiers.score(math_problem(gold), completion)
    assert s.passed is passed, s
    assert s.reward == (1.0 if passed else 0.0)


def test_math_no_answer_and_missing_gold():
    assert verifiers.score(math_problem(r"\frac{1}{3}"), "I do not know").status in ("no_answer", "wrong_answer")
    with pytest.raises(ValueError, match="without an answer"):
        verifiers.score({"problem_id": "x", "kind": "math", "answer": None}, "1")


def test_math_from_threads():
    """math-verify's signal timeouts only work on a main thread; score() is safe from threads."""
    cases = [(r"\frac{2}{4}", r"\boxed{\frac{1}{2}}", True), (r"2\sqrt{2}", r"\boxed{\sqrt{8}}", True),
             (r"\pi", r"\boxed{3}", False)] * 3  # fmt: skip
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda c: verifiers.score(math_problem(c[0]), c[1]).passed, cases))
    assert got == [c[2] for c in cases]


# ---------------------------------------------------------------------------------------- countdown
def test_countdown():
    p = cd_problem((3, 5, 7), 22)
    assert verifiers.score(p, "3*5+7").passed
    assert verifiers.score(p, " (7+3*5)\nexplanation").passed
    s = verifiers.score(p, "3+5+7")
    assert not s.passed and s.status == "wrong_answer"
    assert not verifiers.score(p, "3*5+7+0").passed  # extra number
    assert not verifiers.score(p, "__import__('os')").passed
    assert verifiers.score(p, "").status == "no_answer"
    assert verifiers.score(cd_problem((3, 5, 7), 22, with_meta=False), "3*5+7").passed  # from the prompt


def test_countdown_is_fast():
    import time

    p = cd_problem((3, 5, 7), 22)
    t = time.perf_counter()
    for _ in range(500):
        verifiers.score(p, "3*5+7")
    assert (time.perf_counter() - t) / 500 < 2e-3


# -------------------------------------------------------------------------------------------- code
STDIO = {"problem_id": "s1", "kind": "code_stdio", "prompt": "add", "fn_name": None, "metadata": "{}",
         "tests": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
                              {"input": "4 5\n", "output": "9\n", "testtype": "stdin"}])}  # fmt: skip
CALL = {"problem_id": "c2", "kind": "code_call", "prompt": "", "fn_name": "maxi", "metadata": "{}",
        "tests": json.dumps([{"input": [[1, 5, 2]], "output": 5, "testtype": "functional"}])}  # fmt: skip
HE = {"problem_id": "he", "kind": "code_call", "fn_name": "inc", "metadata": "{}",
      "prompt": 'def inc(x: int) -> int:\n    """x + 1"""\n',
      "tests": json.dumps([{"input": "def check(candidate):\n    assert candidate(1) == 2\n", "output": None,
                            "testtype": "humaneval"}])}  # fmt: skip


def test_code_kinds():
    assert verifiers.score(STDIO, "```python\na, b = map(int, input().split())\nprint(a + b)\n```").passed
    s = verifiers.score(STDIO, "print(3)")
    assert not s.passed and s.status == "wrong_answer" and "1/2 tests" in s.detail
    assert verifiers.score(CALL, "class Solution:\n    def maxi(self, xs):\n        return max(xs)\n").passed
    assert verifiers.score(HE, "    return x + 1\n").passed
    assert verifiers.score(HE, "Sure:\n```python\ndef inc(x):\n    return x + 1\n```").passed
    assert not verifiers.score(HE, "    return x\n").passed
    assert verifiers.score(STDIO, "print(").status == "compile_error"


def test_humaneval_runs_the_last_block_that_defines_the_entry_point():
    """A chat model's answer as SmolLM2-135M-Instruct writes it: the function in one block, a usage example (cut by
    the token budget) in the next. The function's block is the program; which block is chosen gives no second try
    (only one program runs), so a wrong function in the chosen block still fails."""
    answer = ("```python\ndef inc(x: int) -> int:\n    return x + 1\n```\n\nTo use it:\n```python\nprint(inc(")
    assert programs.code_job(HE, answer).code == HE["prompt"] + "\ndef inc(x: int) -> int:\n    return x + 1\n"
    assert verifiers.score(HE, answer).passed
    wrong_then_right_usage = "```python\ndef inc(x):\n    return x\n```\n```python\nassert inc(1) == 2\n```"
    assert not verifiers.score(HE, wrong_then_right_usage).passed
    # two definitions: the later one is the program, as Python itself would keep it
    assert not verifiers.score(HE, "```python\ndef inc(x):\n    return x + 1\n```\n```python\ndef inc(x):\n    return x\n```").passed


def test_special_judge_metadata():
    """Special-judge rows are never passed by an unordered-token match unless the row asks for the
    labelled lenient rule (see test_judge_special.py for checkers and TACO's cases)."""
    p = dict(STDIO, tests=json.dumps([{"input": "", "output": "1 2 3", "testtype": "stdin"}]),
             metadata=json.dumps({"special_judge": True}))  # fmt: skip
    s = verifiers.score(p, "print('3 2 1')")
    assert (s.passed, s.status) == (False, "undecidable")
    lenient = dict(p, metadata=json.dumps({"special_judge": True, "judge": "special_lenient"}))
    assert verifiers.score(lenient, "print('3 2 1')").status == "passed_lenient"
    assert not verifiers.score(dict(p, metadata="{}"), "print('3 2 1')").passed


def test_missing_values_as_pandas_reads_them():
    """`fade verify` reads problems with pandas: a null fn_name or metadata is NaN, not None."""
    nan = float("nan")
    assert verifiers.score(dict(STDIO, fn_name=nan, metadata=nan), "a, b = map(int, input().split())\nprint(a + b)").passed
    assert verifiers.score(dict(math_problem("042"), metadata=nan), r"\boxed{42}").passed


def test_score_batch_mixed_in_order():
    probs = [cd_problem((3, 5, 7), 22), math_problem("042"), STDIO, math_problem(r"\frac{1}{2}"), CALL, HE]
    comps = ["3*5+7", r"\boxed{41}", "a,b=map(int,input().split());print(a+b)", r"\boxed{0.5}",
             "def maxi(xs): return min(xs)", "    return x + 1\n"]  # fmt: skip
    got = verifiers.score_batch(probs, comps, workers=2)
    assert [s.passed for s in got] == [True, False, True, True, False, True]
    with pytest.raises(ValueError, match="completions"):
        verifiers.score_batch(probs, comps[:2])


def test_bad_rows_name_the_problem():
    with pytest.raises(ValueError, match="'q'.*kind"):
        verifiers.score({"problem_id": "q", "kind": "poetry"}, "x")
    with pytest.raises(ValueError, match="'q'.*tests"):
        verifiers.score({"problem_id": "q", "kind": "code_stdio", "tests": "{nope"}, "x")
