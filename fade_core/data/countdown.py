"""The built-in countdown task as problem rows (wraps :func:`fade_core.countdown_task.generate`).

Splits: ``train`` = generate(num_train, seed=seed); ``test`` = generate(num_test, seed=seed + 1,
exclude=<train problems>), so no test problem (as a multiset of numbers and a target) is a training
problem. Rows: kind ``expression``, prompt "3 5 7 -> 22: ", answer str(target), tests "[]",
metadata {"numbers", "target", "num_solutions", "num_candidates", "share_correct", "example_solution"}.

Difficulty: the source label is the share of candidate expressions that hit the target, as text with
4 decimals ("0.0370"). Normalized levels by fixed thresholds on that share (the chance that a uniformly
random well-formed expression is correct):

    easy     share >= 0.05      (1 in 20 or better)
    medium   0.02 <= share < 0.05
    hard     share < 0.02

With 3 numbers from 1..9 roughly a third of problems are easy, half medium and a sixth hard; with 4
numbers the candidate space is larger and most problems are hard.
"""

from __future__ import annotations

import json
from typing import Any

from fade_core.countdown_task import CountdownProblem, generate
from fade_core.data.schema import LoadResult, OnBadRows, Origin, build_table

BENCHMARK = "countdown"
EASY_SHARE = 0.05
MEDIUM_SHARE = 0.02


def level_of(share: float) -> str:
    """Normalized difficulty of a countdown problem from its share of correct candidates."""
    if share >= EASY_SHARE:
        return "easy"
    if share >= MEDIUM_SHARE:
        return "medium"
    return "hard"


def to_row(p: CountdownProblem, *, split: str, index: int) -> dict[str, Any]:
    meta = {
        "numbers": list(p.numbers),
        "target": p.target,
        "num_solutions": p.num_solutions,
        "num_candidates": p.num_candidates,
        "share_correct": p.difficulty,
        "example_solution": p.example_solution,
    }
    return {
        "problem_id": f"countdown/{split}/{index:05d}",
        "benchmark": BENCHMARK,
        "split": split,
        "kind": "expression",
        "prompt": p.prompt,
        "starter_code": "",
        "fn_name": None,
        "tests": "[]",
        "answer": str(p.target),
        "difficulty": f"{p.difficulty:.4f}",
        "difficulty_level": level_of(p.difficulty),
        "contest_date": None,
        "source": "fade:countdown",
        "metadata": json.dumps(meta),
    }


def load(
    source: str | None = None,
    *,
    num_train: int = 1000,
    num_test: int = 200,
    num_numbers: int = 3,
    max_number: int = 9,
    min_solutions: int = 2,
    seed: int = 0,
    on_bad_rows: OnBadRows = "error",
) -> LoadResult:
    """Generate the countdown train and test splits (deterministic by seed). ``source`` must be None:
    the task is built in."""
    if source is not None:
        raise ValueError(f"countdown is generated, not read: got source={source!r}")
    opts = dict(num_numbers=num_numbers, max_number=max_number, min_solutions=min_solutions)
    train = generate(num_train, seed=seed, **opts)
    exclude = {(tuple(sorted(p.numbers)), p.target) for p in train}
    test = generate(num_test, seed=seed + 1, exclude=exclude, **opts)
    label = f"fade_core.countdown_task(seed={seed})"
    records = [
        (Origin(f"{label}/{split}", i), (split, i, p))
        for split, problems in (("train", train), ("test", test))
        for i, p in enumerate(problems)
    ]
    return build_table(
        records,
        lambda item: to_row(item[2], split=item[0], index=item[1]),
        benchmark=BENCHMARK,
        on_bad_rows=on_bad_rows,
    )
