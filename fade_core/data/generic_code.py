"""Generic code files: one problem and its tests per row (your own, or a benchmark without a loader).

A row needs the problem text and tests; fields are matched case-insensitively under their common names::

    prompt | question | problem | description       the problem statement
    tests                                         a list (or its JSON text) of {"input", "output"} tests
    input_output                                  or APPS/TACO's {"inputs": [...], "outputs": [...], "fn_name"?}
    inputs + outputs                              or two parallel lists at the top level
    fn_name                                       optional: the function a call-based answer defines
    starter_code                                  optional: the signature to complete (goes in the prompt)
    id | problem_id | unique_id | task_id | idx   optional; problem_id is <benchmark>/<id>
    split, difficulty | level, source             optional (see fade_core.data.generic)
    metadata                                      optional object merged into the row's metadata (e.g. the
                                                  judge's "judge" / "float_tol", docs/judging.md)

Without ``fn_name`` the problem is ``code_stdio``: each test's input is the program's stdin and output its
expected stdout (text). With ``fn_name`` it is ``code_call``: each input is the list of arguments and the
output the expected return value (JSON values). Programs are judged in the sandbox like TACO's
(fade_core.verifiers), with no harness prelude.
"""

from __future__ import annotations

import json
from typing import Any

from fade_core.data.generic import difficulty_of, field, plain, records, row_id, split_of, text_field
from fade_core.data.schema import BadField, LoadResult, OnBadRows, Origin, build_table

PROMPT_FIELDS = ("prompt", "question", "problem", "description")


def _json_value(v: Any, label: str) -> Any:
    """``v``, parsed when it is JSON text of a list or object."""
    if isinstance(v, str) and v.strip()[:1] in ("[", "{"):
        try:
            return json.loads(v)
        except ValueError as e:
            raise BadField(label, f"not valid JSON ({e})") from None
    return v


def raw_tests(rec: dict[str, Any]) -> tuple[list[tuple[Any, Any]], Any]:
    """[(input, output)] from ``tests`` / ``input_output`` / ``inputs`` + ``outputs``, and the fn_name the
    tests carry (input_output's), or BadField('tests')."""
    tests = _json_value(field(rec, "tests"), "tests")
    if tests is not None:
        if not isinstance(tests, list) or not all(isinstance(t, dict) and "input" in t and "output" in t for t in tests):
            raise BadField("tests", "must be a list of {input, output} objects")
        return [(t["input"], t["output"]) for t in tests], None
    io = _json_value(field(rec, "input_output"), "input_output")
    if io is not None:
        if not isinstance(io, dict):
            raise BadField("input_output", "must be an object with inputs and outputs")
        return _pairs(io.get("inputs"), io.get("outputs"), "input_output"), io.get("fn_name")
    ins, outs = _json_value(field(rec, "inputs"), "inputs"), _json_value(field(rec, "outputs"), "outputs")
    if ins is not None or outs is not None:
        return _pairs(ins, outs, "inputs"), None
    raise BadField("tests", "missing (looked for tests, input_output, inputs + outputs)")


def _pairs(ins: Any, outs: Any, label: str) -> list[tuple[Any, Any]]:
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
        raise BadField(label, "needs two lists of the same length (inputs and outputs)")
    return list(zip(ins, outs, strict=True))


def make_tests(pairs: list[tuple[Any, Any]], fn_name: str | None) -> list[dict[str, Any]]:
    """Test records of the problem table: stdin tests (text in, text out) or, with ``fn_name``, functional
    tests (a list of arguments in, a JSON value out); raises BadField('tests') for one that does not fit."""
    if not pairs:
        raise BadField("tests", "no tests")
    out = []
    for i, (inp, expected) in enumerate(pairs):
        if fn_name:
            args = _json_value(inp, f"tests[{i}].input")
            if not isinstance(args, list):
                raise BadField("tests", f"test {i}: a call-based test's input must be the list of arguments")
            out.append({"input": args, "output": _json_value(expected, f"tests[{i}].output"), "testtype": "functional"})
        else:
            if not isinstance(inp, str) or not isinstance(expected, str):
                raise BadField("tests", f"test {i}: a stdin test needs text input and output (or give fn_name)")
            out.append({"input": inp, "output": expected, "testtype": "stdin"})
    return out


def convert_row(rec: Any, *, origin: Origin, stem: str, benchmark: str, test_fraction: float) -> dict[str, Any]:
    """One generic code record -> one problem row (raises BadField naming the field)."""
    rec = plain(rec)
    prompt = text_field(rec, PROMPT_FIELDS, "prompt")
    pairs, io_fn = raw_tests(rec)
    fn_name = field(rec, "fn_name") or io_fn
    if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
        raise BadField("fn_name", f"not a Python name: {fn_name!r}")
    tests = make_tests(pairs, fn_name)
    starter = field(rec, "starter_code") or ""
    if not isinstance(starter, str):
        raise BadField("starter_code", "must be text")
    pid, rid = row_id(rec, benchmark, stem, origin)
    difficulty, level = difficulty_of(rec)
    extra = field(rec, "metadata")
    extra = _json_value(extra, "metadata") if extra is not None else {}
    if not isinstance(extra, dict):
        raise BadField("metadata", "must be an object")
    meta = {**extra, "file": origin.file, "row": origin.row, "id": rid, "prelude": None}
    return {
        "problem_id": pid,
        "benchmark": benchmark,
        "split": split_of(rec, pid, test_fraction),
        "kind": "code_call" if fn_name else "code_stdio",
        "prompt": prompt,
        "starter_code": starter,
        "fn_name": fn_name,
        "tests": json.dumps(tests),
        "answer": None,
        "difficulty": difficulty,
        "difficulty_level": level,
        "contest_date": None,
        "source": str(field(rec, "source", "data_source") or benchmark),
        "metadata": json.dumps(meta, default=str),
    }


def load(
    source: str | None = None,
    *,
    benchmark: str = "code",
    test_fraction: float = 0.0,
    on_bad_rows: OnBadRows = "error",
    hub_options: dict[str, Any] | None = None,
) -> LoadResult:
    """Load a generic code file or folder (or hub dataset) as benchmark ``benchmark``; rows without a split
    go to ``test`` with probability ``test_fraction`` (a stable hash of the problem id)."""
    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    notes: list[str] = []

    def convert(item: tuple[Origin, str, Any]) -> dict[str, Any]:
        origin, stem, rec = item
        return convert_row(rec, origin=origin, stem=stem, benchmark=benchmark, test_fraction=test_fraction)

    return build_table(records(source, benchmark, notes, hub_options), convert, benchmark=benchmark,
                       on_bad_rows=on_bad_rows, notes=notes)
