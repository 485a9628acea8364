"""Rewards in the training loop (fade_core.train.rewards): a verdict per rollout, counts, examples."""

from __future__ import annotations

import json

from fade_core.train import rewards as rw

STDIO = {"problem_id": "c", "kind": "code_stdio", "tests": json.dumps([{"input": "", "output": "1\n", "testtype": "stdin"}])}
HUMANEVAL = {"problem_id": "h", "kind": "code_call", "tests": json.dumps([{"input": "x", "output": None, "testtype": "humaneval"}])}
MATH = {"problem_id": "m", "kind": "math", "answer": "12", "tests": "[]"}


def test_verdicts_say_why_a_reward_is_zero() -> None:
    v = rw.verdict_of
    assert v(STDIO, "```python\nprint(1)\n```", "passed", True) == "passed"
    assert v(STDIO, "```python\nprint(2)\n```", "wrong_answer", False) == "wrong_answer"
    assert v(STDIO, "```python\nprint(\n```", "compile_error", False) == "compile_error"  # a block, not Python
    assert v(STDIO, "Just print one.", "compile_error", False) == "no_code"  # prose, no block
    assert v(STDIO, "", "runtime_error", False) == "no_code"
    assert v(STDIO, "print(2)", "wrong_answer", False) == "wrong_answer"  # bare code that ran
    assert v(HUMANEVAL, "    return x +", "compile_error", False) == "compile_error"  # bodies need no block
    assert v(STDIO, "```python\nx\n```", "memory_limit", False) == "resource_limit"
    assert v(STDIO, "```python\nx\n```", "sandbox_error", False) == "other"
    assert v(MATH, "I do not know", "no_answer", False) == "no_answer"
    assert v(STDIO, "```python\nwhile 1: pass\n```", "timeout", False) == "timeout"


def test_score_rollouts_uses_the_verifiers_and_counts_every_verdict() -> None:
    problems = [MATH, MATH, MATH, {"problem_id": "cd", "kind": "expression", "prompt": "3 4 -> 12: ", "tests": "[]",
                                   "metadata": json.dumps({"numbers": [3, 4], "target": 12})}]
    out = rw.score_rollouts(problems, ["\\boxed{12}", "\\boxed{13}", "12", "3*4"])
    assert [(r.reward, r.verdict) for r in out] == [(1.0, "passed"), (0.0, "wrong_answer"), (1.0, "passed"), (1.0, "passed")]
    counts = rw.verdict_counts(r.verdict for r in out)
    assert list(counts) == [f"verdict/{name}" for name in rw.VERDICTS]  # every step: the same columns
    assert counts["verdict/passed"] == 3 and counts["verdict/wrong_answer"] == 1 and sum(counts.values()) == 4


def test_examples_show_different_verdicts_clipped() -> None:
    rewards = [rw.Reward(0.0, False, "wrong_answer", "wrong_answer"), rw.Reward(0.0, False, "wrong_answer", "wrong_answer"),
               rw.Reward(1.0, True, "passed", "passed")]
    ex = rw.pick_examples(["a", "b", "c"], ["p" * 3000, "q", "r"], ["x", "y", "z"], rewards, k=2)
    assert [(e["problem_id"], e["verdict"], e["reward"]) for e in ex] == [("a", "wrong_answer", 0.0), ("c", "passed", 1.0)]
    assert ex[0]["prompt"].startswith("p" * rw.EXAMPLE_MAX_CHARS) and "[1000 more characters]" in ex[0]["prompt"]
    assert len(rw.pick_examples(["a", "b", "c"], ["p"] * 3, ["x"] * 3, rewards[:2], k=2)) == 2  # filled up
    assert rw.pick_examples([], [], [], [], k=2) == []
