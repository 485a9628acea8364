"""A problem row's fields as the judges read them (the problem table of fade_core/data/schema.py:
a dict, or a pandas row whose missing strings are NaN; ``metadata`` and ``tests`` may be JSON text)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def get(problem: Mapping[str, Any], key: str) -> Any:
    """``problem[key]``, with a missing value (None, or NaN as pandas gives for a null string) as None."""
    v = problem.get(key)
    return None if isinstance(v, float) and v != v else v


def metadata(problem: Mapping[str, Any]) -> dict[str, Any]:
    """The row's metadata as a dict ({} when absent); a value that is not a JSON object is a ValueError."""
    md = get(problem, "metadata")
    if md is None or md == "":
        return {}
    if isinstance(md, Mapping):
        return dict(md)
    try:
        out = json.loads(md)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"problem {problem.get('problem_id')!r}: metadata is not a JSON object: {e}"
        ) from None
    if not isinstance(out, dict):
        raise ValueError(f"problem {problem.get('problem_id')!r}: metadata is not a JSON object")
    return out


def tests(problem: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's tests as a list; text that is not a JSON list is a ValueError."""
    tests = get(problem, "tests")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests) if tests else []
        except ValueError as e:
            raise ValueError(f"problem {problem.get('problem_id')!r}: tests is not JSON: {e}") from None
    if not isinstance(tests, list):
        raise ValueError(f"problem {problem.get('problem_id')!r}: tests must be a JSON list")
    return tests
