"""Gold validation: run every row's reference solutions through the real judge before training.

A row whose reference solution fails its own tests teaches the policy nothing (no correct answer
earns reward) or, worse, rewards a wrong convention; serious RL-for-code pipelines therefore run the
references first and drop such rows. ``fade prepare`` does this for the code benchmarks whose rows
carry reference solutions (:data:`GOLD_BENCHMARKS`): TACO (``metadata.solutions``, as many as
``keep_solutions`` kept) and HumanEval (``metadata.canonical_solution``). The programs run exactly as
a policy's would (:func:`fade_core.verifiers.score_batch`: the sandbox, the benchmark's import prelude,
the row's judge), with a progress bar.

Per row: ``gold_pass`` is True when at least one reference solution passes every test, False when
all fail, null when the row was not validated (no reference solution, or a judge that cannot decide
it); ``gold_detail`` says which (``"1/2 reference solutions pass"``, or the first failure's status
and detail). ``on_fail="drop"`` leaves failing rows out (counted in ``filtered`` and listed in the
summary), ``"flag"`` keeps them with ``gold_pass`` false. The summary (:func:`summarize`) goes to the
data card: rows validated, passed, failed, not validated and the gold pass rate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

import pandas as pd

from fade_core.data.schema import LoadResult, records

GOLD_BENCHMARKS = ("taco", "humaneval")
FAILED = "reference solutions fail their tests (gold validation)"
OnFail = Literal["drop", "flag"]
MAX_FAILURES_LISTED = 200


def reference_programs(row: Mapping[str, Any]) -> list[str]:
    """The reference solutions a problem row carries: TACO's kept ``metadata.solutions``, HumanEval's
    ``metadata.canonical_solution`` (the body that continues the prompt); [] for any other row."""
    try:
        meta = json.loads(row.get("metadata") or "{}")
    except (TypeError, ValueError):
        return []
    if row.get("benchmark") == "humaneval":
        sol = meta.get("canonical_solution")
        return [sol] if isinstance(sol, str) and sol.strip() else []
    sols = meta.get("solutions") or []
    return [s for s in sols if isinstance(s, str) and s.strip()]


def _verdict(scores: list[Any]) -> tuple[bool | None, str]:
    """(gold_pass, gold_detail) of one row from the scores of its reference solutions."""
    if not scores:
        return None, "not validated: no reference solution"
    decided = [s for s in scores if s.status != "undecidable"]
    if not decided:
        return None, f"not validated: {scores[0].detail}"
    passed = sum(1 for s in decided if s.passed)
    if passed:
        return True, f"{passed}/{len(decided)} reference solutions pass"
    first = decided[0]
    return False, f"0/{len(decided)} reference solutions pass; first: {first.status}: {first.detail}"[:500]


def validate(
    result: LoadResult,
    *,
    on_fail: OnFail = "drop",
    workers: int | None = None,
    progress: bool = True,
) -> LoadResult:
    """``result`` with ``gold_pass``/``gold_detail`` filled in by running every reference solution,
    failing rows dropped (``on_fail="drop"``) or flagged, and ``result.gold`` set to the summary."""
    if on_fail not in ("drop", "flag"):
        raise ValueError(f"gold on_fail must be 'drop' or 'flag', got {on_fail!r}")
    table = result.table
    rows = records(table)
    problems: list[dict[str, Any]] = []
    programs: list[str] = []
    owner: list[int] = []
    for i, row in enumerate(rows):
        for program in reference_programs(row):
            problems.append(row)
            programs.append(program)
            owner.append(i)
    scores: list[Any] = []
    if problems:
        from fade_core import verifiers

        scores = verifiers.score_batch(problems, programs, workers=workers, progress=progress, extract=False)
    per_row: list[list[Any]] = [[] for _ in rows]
    for i, s in zip(owner, scores, strict=True):
        per_row[i].append(s)
    verdicts = [_verdict(s) for s in per_row]
    table = table.copy()
    table["gold_pass"] = pd.Series([v[0] for v in verdicts], dtype="boolean", index=table.index)
    table["gold_detail"] = pd.Series([v[1] for v in verdicts], dtype="str", index=table.index)
    failed = [(rows[i]["problem_id"], d) for i, (ok, d) in enumerate(verdicts) if ok is False]
    filtered = dict(result.filtered)
    if on_fail == "drop" and failed:
        table = table[table["gold_pass"].fillna(True).astype(bool)].reset_index(drop=True)
        filtered[FAILED] = len(failed)
    summary = summarize(verdicts, on_fail=on_fail, failures=failed)
    return replace(result, table=table, filtered=filtered, gold=summary)


def summarize(
    verdicts: list[tuple[bool | None, str]], *, on_fail: str, failures: list[tuple[str, str]]
) -> dict[str, Any]:
    """Counts and the gold pass rate (passed / validated; None when nothing was validated)."""
    passed = sum(1 for ok, _ in verdicts if ok is True)
    failed = sum(1 for ok, _ in verdicts if ok is False)
    validated = passed + failed
    return {
        "validated": validated,
        "passed": passed,
        "failed": failed,
        "not_validated": len(verdicts) - validated,
        "pass_rate": round(passed / validated, 4) if validated else None,
        "on_fail": on_fail,
        "failures": [{"problem_id": pid, "detail": d} for pid, d in failures[:MAX_FAILURES_LISTED]],
    }
