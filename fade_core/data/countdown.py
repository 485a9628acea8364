"""The built-in countdown task as problem rows (wraps :func:`fade_core.countdown_task.generate_splits`).

Splits: ``train``, ``validation`` (for choosing hyper-parameters, e.g. the study's learning rates) and
``test``, disjoint (no problem, as a multiset of numbers and a target, is in two splits), each holding
every difficulty level in proportion to its ``share``. Levels are named by the problem table's
normalized difficulty (``easy`` / ``medium`` / ``hard``): ``difficulty_level`` is the problem's level, so
every per-level table of the aggregation (pass@k by difficulty bucket) is a table per testbed level.
The source label ``difficulty`` is the share of candidate expressions that hit the target, with 4
decimals ("0.0370"): the uniform sampler's pass@1 (fade_core.countdown_task.uniform_pass_at_k).

Rows: kind ``expression``, prompt "3 5 7 -> 22: ", answer str(target), tests "[]", metadata {"numbers",
"target", "level", "num_solutions", "num_candidates", "share_correct", "example_solution"}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fade_core.countdown_task import CountdownProblem, Level, generate_splits
from fade_core.data.schema import LEVELS, LoadResult, OnBadRows, Origin, build_table

BENCHMARK = "countdown"
DEFAULT_LEVELS: dict[str, dict[str, Any]] = {
    "easy": {"num_numbers": 3, "max_number": 9, "share": 0.34},
    "medium": {"num_numbers": 4, "max_number": 9, "share": 0.33},
    "hard": {"num_numbers": 4, "max_number": 19, "share": 0.33},
}
"""The testbed's levels when none are given (the config's default, fade_core.config.CountdownData)."""


def to_row(p: CountdownProblem, *, split: str, index: int) -> dict[str, Any]:
    meta = {
        "numbers": list(p.numbers),
        "target": p.target,
        "level": p.level,
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
        "difficulty_level": p.level if p.level in LEVELS else "unknown",
        "contest_date": None,
        "source": "fade:countdown",
        "metadata": json.dumps(meta),
    }


def parse_levels(levels: Mapping[str, Any] | None) -> dict[str, Level]:
    """{name: Level} from a mapping of {num_numbers, max_number, share} (a config section or dicts)."""
    out = {}
    for name, spec in (levels or DEFAULT_LEVELS).items():
        get = spec.get if isinstance(spec, Mapping) else (lambda k, s=spec: getattr(s, k))
        out[name] = Level(int(get("num_numbers")), int(get("max_number")), float(get("share")))
    return out


def load(
    source: str | None = None,
    *,
    num_train: int = 1000,
    num_validation: int = 0,
    num_test: int = 200,
    levels: Mapping[str, Any] | None = None,
    min_solutions: int = 2,
    seed: int = 0,
    on_bad_rows: OnBadRows = "error",
) -> LoadResult:
    """Generate the countdown splits (deterministic by seed; a split of size 0 is left out). ``source`` must
    be None: the task is built in."""
    if source is not None:
        raise ValueError(f"countdown is generated, not read: got source={source!r}")
    sizes = {s: n for s, n in (("train", num_train), ("validation", num_validation), ("test", num_test)) if n > 0}
    splits = generate_splits(parse_levels(levels), sizes, min_solutions=min_solutions, seed=seed)
    label = f"fade_core.countdown_task(seed={seed})"
    records = [
        (Origin(f"{label}/{split}", i), (split, i, p))
        for split, problems in splits.items()
        for i, p in enumerate(problems)
    ]
    return build_table(
        records,
        lambda item: to_row(item[2], split=item[0], index=item[1]),
        benchmark=BENCHMARK,
        on_bad_rows=on_bad_rows,
    )
