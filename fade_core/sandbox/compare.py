"""Output comparison, done in the trusted parent (the expected outputs never enter the sandbox).

Every rule here is linear in the size of the outputs (an 8 MiB output with a million leading blank
lines compares in a fraction of a second) and a verdict it cannot decide is never a pass.

stdio (:func:`compare_stdout`), judges chosen per problem from its metadata (:func:`judge_from_metadata`):

- ``"lines"`` (default): each line stripped, leading and trailing blank lines ignored, the same number
  of lines; lines that differ as text are compared token by token with :func:`tokens_match`:
  tokens equal as text, or both numbers where **integers compare exactly** (as decimals, so ``5``
  equals ``5.0`` and ``+5`` but ``1000000000000000001`` never equals ``1000000000000000000``) and a
  **tolerance applies only where the expected token is a float** (``0.5`` for ``0.500000``).
- ``"exact"``: byte-equal after stripping trailing whitespace of the whole output.
- ``"casefold"``: ``lines`` with letter case ignored (TACO special-judge case 2).
- ``"numeric"``: ``lines`` where every number, integer or not, compares within the tolerance (TACO
  special-judge case 3, "floating-point precision with epsilon tolerance").
- ``"lines_unordered"``: the same normalized lines in any order (problems that say "any order").
- ``"tokens_unordered"``: the same multiset of tokens in any order.
- ``"checker"``: a checker program decides (a special-judge row that carries one). The expected
  output is then a :func:`checker_envelope` (checker source, test input, expected output) and the
  decision comes from the runner installed with :func:`set_checker_runner` (fade_core.verifiers
  installs one that runs the checker in a sandbox of its own); with no runner the verdict is a fail.
- ``"special_lenient"``: a special-judge row without a checker, included on the user's explicit
  request (``data.taco.special_judge_without_checker=lenient``): the same multiset of tokens. This
  passes invalid answers (an identity permutation where a derangement is asked), so the reason of
  every verdict says it is the lenient rule.
- ``"no_checker"``: a special-judge row that nothing can decide: always a fail, with that reason.

call (:func:`compare_value`): the returned plain value against the expected JSON value, with types
as the official harnesses (LiveCodeBench's ``prediction == expected`` after turning tuples into
lists) treat them: a set never equals a list, tuples equal lists, an expected integer is met by an
equal int (or a float equal to it exactly, as Python's ``2.0 == 2``), only an expected float takes a
tolerance, dict keys compare as text when the expected side came from JSON. Deliberately stricter
than Python's ``==``: booleans never equal numbers (``True`` is not ``1``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

JUDGES = (
    "lines", "exact", "casefold", "numeric", "lines_unordered", "tokens_unordered", "checker",
    "special_lenient", "no_checker",
)  # fmt: skip
DEFAULT_FLOAT_TOL = 1e-6
# TACO's output_spj.jsonl "case" of a special-judge problem -> the judge that decides it without a checker
SPECIAL_JUDGE_CASES = {2: "casefold", 3: "numeric"}  # 1: non-deterministic output, needs a checker
LENIENT_LABEL = "lenient special judge: same tokens in any order, not a real check"
NO_CHECKER_REASON = "special-judge problem without a checker: undecidable, never a pass"

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FLOAT_MARK = re.compile(r"[.eE]")


def judge_from_metadata(metadata: Mapping[str, Any] | None) -> tuple[str, float]:
    """(judge, float_tol) of a problem from its metadata.

    Keys, in order: ``judge`` (one of :data:`JUDGES`, set explicitly), ``checker`` (source of a checker
    program -> ``"checker"``), TACO's ``special_judge`` with its ``special_judge_case`` (2 ->
    ``casefold``, 3 -> ``numeric``, anything else -> ``no_checker``); otherwise ``lines``. ``float_tol``
    (a float >= 0) overrides the tolerance. Unknown judges and bad tolerances raise ValueError."""
    md = metadata or {}
    judge = md.get("judge")
    if not judge:
        if isinstance(md.get("checker"), str) and md["checker"].strip():
            judge = "checker"
        elif md.get("special_judge") is True:
            judge = SPECIAL_JUDGE_CASES.get(md.get("special_judge_case"), "no_checker")
        else:
            judge = "lines"
    if judge not in JUDGES:
        raise ValueError(f"metadata.judge={judge!r} is not one of {JUDGES}")
    tol = float(md.get("float_tol", DEFAULT_FLOAT_TOL))
    if not tol >= 0:
        raise ValueError(f"metadata.float_tol={md.get('float_tol')!r} must be a number >= 0")
    return judge, tol


# ------------------------------------------------------------------------------------------- stdio
def normalized_lines(text: str) -> list[str]:
    """Lines of ``text`` (\\n, \\r\\n or \\r), each stripped, without leading and trailing blank lines.
    Linear in len(text): the whole text is stripped once (which drops the blank lines at both ends)
    before it is split."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    return [ln.strip() for ln in text.split("\n")] if text else []


def _decimal(tok: str) -> Decimal | None:
    if not _NUMBER.fullmatch(tok):
        return None
    try:
        return Decimal(tok)
    except InvalidOperation:
        return None


def _close(x: float, y: float, tol: float) -> bool:
    return (
        math.isfinite(x)
        and math.isfinite(y)
        and (abs(x - y) <= tol or abs(x - y) <= tol * max(abs(x), abs(y)))
    )


def tokens_match(
    actual: str, expected: str, tol: float = DEFAULT_FLOAT_TOL, *, any_number_tol: bool = False
) -> bool:
    """Equal as text; or both numbers that are equal as decimals; or, where the expected token is a
    float (has a '.' or an exponent; any number with ``any_number_tol``), within ``tol`` absolute
    or relative. An expected integer never takes a tolerance."""
    if actual == expected:
        return True
    a, e = _decimal(actual), _decimal(expected)
    if a is None or e is None:
        return False
    if a == e:
        return True
    if any_number_tol or _FLOAT_MARK.search(expected):
        return _close(float(a), float(e), tol)
    return False


def _lines_match(got: list[str], want: list[str], tol: float, *, any_number_tol: bool) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g == w:
            continue
        gt, wt = g.split(), w.split()
        if len(gt) != len(wt):
            return False
        if not all(
            tokens_match(x, y, tol, any_number_tol=any_number_tol) for x, y in zip(gt, wt, strict=True)
        ):
            return False
    return True


def _first_difference(got: list[str], want: list[str]) -> int:
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return i
    return min(len(got), len(want))


def _unordered_tokens_match(got: list[str], want: list[str], tol: float) -> bool:
    ga, wa = sorted(" ".join(got).split()), sorted(" ".join(want).split())
    return ga == wa or (
        len(ga) == len(wa) and all(tokens_match(x, y, tol) for x, y in zip(ga, wa, strict=True))
    )


def compare_stdout(
    actual: str, expected: str, judge: str = "lines", float_tol: float = DEFAULT_FLOAT_TOL
) -> tuple[bool, str]:
    """Whether a program's stdout matches the expected output under ``judge``; returns (ok, reason)."""
    if judge == "no_checker":
        return False, NO_CHECKER_REASON
    if judge == "checker":
        return compare_with_checker(actual, expected)
    if judge == "exact":
        ok = actual.rstrip() == expected.rstrip()
        return ok, "ok" if ok else "output differs"
    if judge == "casefold":
        actual, expected = actual.casefold(), expected.casefold()
    got, want = normalized_lines(actual), normalized_lines(expected)
    if judge in ("lines", "casefold", "numeric"):
        if got == want:
            return True, "ok"
        if _lines_match(got, want, float_tol, any_number_tol=judge == "numeric"):
            return True, "ok (numbers compared as numbers)"
        if not got:
            return False, "empty output"
        first = _first_difference(got, want)
        return False, f"line {first + 1} differs ({len(got)} lines, expected {len(want)})"
    if judge == "lines_unordered":
        ok = sorted(got) == sorted(want)
        return ok, "ok" if ok else "lines differ (any order)"
    if judge in ("tokens_unordered", "special_lenient"):
        ok = _unordered_tokens_match(got, want, float_tol)
        note = f" ({LENIENT_LABEL})" if judge == "special_lenient" else ""
        return ok, ("ok" if ok else "tokens differ") + note
    raise ValueError(f"judge {judge!r} is not one of {JUDGES}")


# ----------------------------------------------------------------------------------------- checker
CheckerRunner = Callable[[str, str, str, str], tuple[bool, str]]
"""(checker source, test input, program output, expected output) -> (accepted, reason)."""

_checker_runner: CheckerRunner | None = None
ENVELOPE_KEY = "fade_checker_envelope"


def set_checker_runner(runner: CheckerRunner | None) -> CheckerRunner | None:
    """Install the function that runs checker programs (None removes it); returns the previous one."""
    global _checker_runner
    previous, _checker_runner = _checker_runner, runner
    return previous


def checker_envelope(checker: str, test_input: str, expected: str) -> str:
    """The expected-output text of a test judged by ``checker`` (what :func:`compare_stdout` with
    judge ``"checker"`` receives in place of the expected output)."""
    return json.dumps({ENVELOPE_KEY: 1, "checker": checker, "input": test_input, "expected": expected})


def compare_with_checker(actual: str, envelope: str) -> tuple[bool, str]:
    """Let the installed checker runner decide; a missing runner or a malformed envelope is a fail."""
    try:
        env = json.loads(envelope)
    except ValueError:
        env = None
    if not isinstance(env, dict) or env.get(ENVELOPE_KEY) != 1:
        return False, "checker judge without a checker envelope: undecidable, never a pass"
    if _checker_runner is None:
        return False, "no checker runner installed: undecidable, never a pass"
    ok, why = _checker_runner(str(env["checker"]), str(env["input"]), actual, str(env["expected"]))
    return ok is True, why


# -------------------------------------------------------------------------------------------- call
def values_equal(actual: Any, expected: Any, tol: float = DEFAULT_FLOAT_TOL) -> bool:
    """Plain-value equality for call-style tests (see the module docstring). Only built-in types are
    handled; anything else is unequal (so no user-defined ``__eq__`` is ever called)."""
    ta, te = type(actual), type(expected)
    if ta is bool or te is bool:
        return ta is te and actual == expected
    if te is int:
        return (ta is int or ta is float) and actual == expected
    if te is float:
        if ta is not int and ta is not float:
            return False
        if math.isnan(expected) or (ta is float and math.isnan(actual)):
            return ta is float and math.isnan(actual) and math.isnan(expected)
        if math.isinf(expected) or (ta is float and math.isinf(actual)):
            return actual == expected
        return _close(float(actual), expected, tol)
    if te in (list, tuple):
        return (
            (ta is list or ta is tuple)
            and len(actual) == len(expected)
            and all(values_equal(a, e, tol) for a, e in zip(actual, expected, strict=True))
        )
    if te is dict:
        if ta is not dict or len(actual) != len(expected):
            return False
        amap = {k if type(k) is str else str(k): v for k, v in actual.items()}
        if len(amap) != len(actual):
            return False
        return all(str(k) in amap and values_equal(amap[str(k)], v, tol) for k, v in expected.items())
    if te is str:
        return ta is str and actual == expected
    if expected is None:
        return actual is None
    return False


def compare_value(actual: Any, expected: Any, float_tol: float = DEFAULT_FLOAT_TOL) -> tuple[bool, str]:
    """(ok, reason) for a call-style test."""
    ok = values_equal(actual, expected, float_tol)
    return ok, "ok" if ok else "return value differs"
