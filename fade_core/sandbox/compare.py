"""Output comparison, done in the trusted parent (the expected outputs never enter the sandbox).

stdio (:func:`compare_stdout`): the default judge ``"lines"`` compares whitespace-normalized lines:
each line stripped, trailing and leading blank lines dropped; if that fails, the lines are compared
token by token, where two tokens match when equal as text or both parse as floats within
``float_tol`` (absolute or relative), which accepts ``0.5`` for ``0.500000``. Other judges, chosen per
problem in its metadata (``{"judge": ...}``, see :func:`judge_from_metadata`):

- ``"exact"``: byte-equal after stripping trailing whitespace of the whole output.
- ``"lines_unordered"``: the same normalized lines in any order (TACO "print all answers, any order").
- ``"tokens_unordered"``: the same multiset of tokens, float tolerance applied after sorting.
- ``"special"``: TACO problems marked special-judge (any valid answer accepted) with no checker
  available: approximated by ``tokens_unordered``; the verdict's detail says so.

call (:func:`compare_value`): the returned plain value against the expected JSON value; tuples equal
lists, ints equal floats within tolerance, bools never equal numbers, dict keys compared as strings
when the expected side came from JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

JUDGES = ("lines", "exact", "lines_unordered", "tokens_unordered", "special")
DEFAULT_FLOAT_TOL = 1e-6


def judge_from_metadata(metadata: Mapping[str, Any] | None) -> tuple[str, float]:
    """(judge, float_tol) from a problem's metadata: keys ``judge`` (one of :data:`JUDGES`),
    ``float_tol`` (float), or TACO's boolean ``special_judge``. Unknown judges raise ValueError."""
    md = metadata or {}
    judge = md.get("judge") or ("special" if md.get("special_judge") else "lines")
    if judge not in JUDGES:
        raise ValueError(f"metadata.judge={judge!r} is not one of {JUDGES}")
    tol = float(md.get("float_tol", DEFAULT_FLOAT_TOL))
    return judge, tol


def _lines(text: str) -> list[str]:
    lines = [ln.strip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _float(tok: str) -> float | None:
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def tokens_match(a: str, b: str, tol: float) -> bool:
    """Equal as text, or both finite floats within ``tol`` (absolute or relative)."""
    if a == b:
        return True
    x, y = _float(a), _float(b)
    return x is not None and y is not None and (abs(x - y) <= tol or abs(x - y) <= tol * max(abs(x), abs(y)))


def _token_lists_match(a: list[str], b: list[str], tol: float) -> bool:
    return len(a) == len(b) and all(tokens_match(x, y, tol) for x, y in zip(a, b, strict=True))


def compare_stdout(actual: str, expected: str, judge: str = "lines", float_tol: float = DEFAULT_FLOAT_TOL) -> tuple[bool, str]:
    """Whether a program's stdout matches the expected output; returns (ok, reason)."""
    if judge == "exact":
        ok = actual.rstrip() == expected.rstrip()
        return ok, "ok" if ok else "output differs"
    got, want = _lines(actual), _lines(expected)
    if judge == "lines":
        if got == want:
            return True, "ok"
        if len(got) == len(want) and all(
            _token_lists_match(g.split(), w.split(), float_tol) for g, w in zip(got, want, strict=True)
        ):
            return True, "ok (numeric tolerance)"
        if not got:
            return False, "empty output"
        first = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), min(len(got), len(want)))
        return False, f"line {first + 1} differs ({len(got)} lines, expected {len(want)})"
    if judge == "lines_unordered":
        ok = sorted(got) == sorted(want)
        return ok, "ok" if ok else "lines differ (any order)"
    # tokens_unordered and special
    ga = sorted(" ".join(got).split())
    wa = sorted(" ".join(want).split())
    ok = ga == wa or _token_lists_match(ga, wa, float_tol)
    note = " (special judge approximated by unordered tokens)" if judge == "special" else ""
    return ok, ("ok" if ok else "tokens differ") + note


def values_equal(actual: Any, expected: Any, tol: float = DEFAULT_FLOAT_TOL) -> bool:
    """Plain-value equality for call-style tests (see the module docstring). Only built-in types are
    handled; anything else is unequal (so no user-defined ``__eq__`` is ever called)."""
    ta, te = type(actual), type(expected)
    if ta is bool or te is bool:
        return ta is te and actual == expected
    if ta in (int, float) and te in (int, float):
        if ta is int and te is int:
            return actual == expected
        if math.isnan(actual) or math.isnan(expected):
            return math.isnan(actual) and math.isnan(expected)
        if math.isinf(actual) or math.isinf(expected):
            return actual == expected
        return abs(actual - expected) <= tol or abs(actual - expected) <= tol * max(abs(actual), abs(expected))
    if ta in (list, tuple) and te in (list, tuple):
        return len(actual) == len(expected) and all(
            values_equal(a, e, tol) for a, e in zip(actual, expected, strict=True)
        )
    if ta is dict and te is dict:
        if len(actual) != len(expected):
            return False
        amap = {str(k) if type(k) is not str else k: v for k, v in actual.items()}
        return all(str(k) in amap and values_equal(amap[str(k)], v, tol) for k, v in expected.items())
    if ta in (set, frozenset) and te in (set, frozenset, list, tuple):
        return actual == set(expected) if all(type(x) in (int, str, float, bool) for x in expected) else False
    if ta is str and te is str:
        return actual == expected
    if actual is None or expected is None:
        return actual is None and expected is None
    return False


def compare_value(actual: Any, expected: Any, float_tol: float = DEFAULT_FLOAT_TOL) -> tuple[bool, str]:
    """(ok, reason) for a call-style test."""
    ok = values_equal(actual, expected, float_tol)
    return ok, "ok" if ok else "return value differs"
