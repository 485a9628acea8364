"""Generic math files: one problem and its final answer per row (MATH, GSM8K, your own), any answer.

A row needs the problem text and an answer; fields are matched case-insensitively under their common names::

    problem | question | prompt | query           the problem text
    answer | final_answer | target | gt_answer     the final answer; GSM8K's worked answer "... #### 72"
                                                  gives the text after "####"; \\boxed{...} gives its content
    solution                                      when there is no answer field: the last \\boxed{} in it
    id | problem_id | unique_id | task_id | idx   optional; problem_id is <benchmark>/<id>
    split                                         optional (see fade_core.data.generic for the default)
    difficulty | level                            optional ("Level 5" -> hard)
    source | data_source                          optional (default: the benchmark's name)

Answers are kept as text ("\\frac{1}{2}", "2\\sqrt{3}", "-7", "1,000"): math-verify compares them with the
completion's answer at scoring time (fade_core.verifiers), so they need not be integers. The solution, if
any, goes to metadata (never into the prompt).
"""

from __future__ import annotations

import json
from typing import Any

from fade_core.data.generic import difficulty_of, field, plain, records, row_id, split_of, text_field
from fade_core.data.schema import BadField, LoadResult, OnBadRows, Origin, build_table

PROBLEM_FIELDS = ("problem", "question", "prompt", "query")
ANSWER_FIELDS = ("answer", "final_answer", "target", "gt_answer")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` of ``text`` (balanced braces), or None."""
    from fade_core.verifiers import last_boxed as boxed

    return boxed(text)


def final_answer(rec: dict[str, Any]) -> str:
    """The row's final answer as text (see the module docstring); raises BadField('answer')."""
    raw = field(rec, *ANSWER_FIELDS)
    if raw is None:
        solution = field(rec, "solution")
        boxed = last_boxed(solution) if isinstance(solution, str) else None
        if boxed is None:
            raise BadField("answer", f"missing (looked for {' / '.join(ANSWER_FIELDS)}, or a \\boxed{{}} in solution)")
        raw = boxed
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise BadField("answer", f"not a number or text: {raw!r}")
    text = str(raw).strip()
    if "####" in text:  # GSM8K: worked solution, then "#### <answer>"
        text = text.rsplit("####", 1)[1].strip()
    boxed = last_boxed(text)
    if boxed is not None:
        text = boxed.strip()
    text = text.strip().strip("$").strip()
    if not text:
        raise BadField("answer", f"empty answer: {raw!r}")
    return text


def convert_row(rec: Any, *, origin: Origin, stem: str, benchmark: str, test_fraction: float) -> dict[str, Any]:
    """One generic math record -> one problem row (raises BadField naming the field)."""
    rec = plain(rec)
    prompt = text_field(rec, PROBLEM_FIELDS, "problem")
    answer = final_answer(rec)
    pid, rid = row_id(rec, benchmark, stem, origin)
    difficulty, level = difficulty_of(rec)
    meta = {"file": origin.file, "row": origin.row, "id": rid, "solution": field(rec, "solution"),
            "subject": field(rec, "subject", "type")}
    return {
        "problem_id": pid,
        "benchmark": benchmark,
        "split": split_of(rec, pid, test_fraction),
        "kind": "math",
        "prompt": prompt,
        "starter_code": "",
        "fn_name": None,
        "tests": "[]",
        "answer": answer,
        "difficulty": difficulty,
        "difficulty_level": level,
        "contest_date": None,
        "source": str(field(rec, "source", "data_source") or benchmark),
        "metadata": json.dumps(meta, default=str),
    }


def load(
    source: str | None = None,
    *,
    benchmark: str = "math",
    test_fraction: float = 0.0,
    on_bad_rows: OnBadRows = "error",
    hub_options: dict[str, Any] | None = None,
) -> LoadResult:
    """Load a generic math file or folder (or hub dataset) as benchmark ``benchmark``; rows without a split
    go to ``test`` with probability ``test_fraction`` (a stable hash of the problem id)."""
    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    notes: list[str] = []

    def convert(item: tuple[Origin, str, Any]) -> dict[str, Any]:
        origin, stem, rec = item
        return convert_row(rec, origin=origin, stem=stem, benchmark=benchmark, test_fraction=test_fraction)

    return build_table(records(source, benchmark, notes, hub_options), convert, benchmark=benchmark,
                       on_bad_rows=on_bad_rows, notes=notes)
