"""The problem table: one schema that every benchmark loader's output passes.

Training and evaluation read problems without knowing where they came from, so every loader (TACO,
LiveCodeBench, AIME, HumanEval, the built-in countdown task) converts its source's native rows into the
same table, one row per problem:

    problem_id        str, unique      e.g. "taco/train/17", "livecodebench/abc301_a", "HumanEval/0"
    benchmark         str              the loader's name ("taco", "livecodebench", ...)
    split             str              "train", "test", ...
    kind              str              code_stdio | code_call | math | expression
    prompt            str              the problem statement (HumanEval: signature + docstring)
    starter_code      str              code the answer continues ("" when none)
    fn_name           str | null       the function a call-based answer defines (code_call only)
    tests             str              JSON list of {"input", "output", "testtype"}
    answer            str | null       the reference answer (math, expression)
    difficulty        str              the source's own difficulty label
    difficulty_level  str              normalized: easy | medium | hard | unknown
    contest_date      str | null       ISO date (YYYY-MM-DD or a full ISO timestamp)
    source            str              upstream origin: platform or dataset ("codeforces", "leetcode", ...)
    metadata          str              JSON object with everything else (provenance file/row, tags, ...)
    gold_pass         bool | null      whether a reference solution passes the row's tests in fade's
                                       sandbox (``fade prepare``'s gold validation); null: not validated
    gold_detail       str | null       why: "1/1 reference solutions pass", the first failure, or why
                                       the row was not validated

Metadata keys the judge reads (fade_core.verifiers, fade_core.sandbox.compare): ``judge`` and
``float_tol`` (an explicit output rule), ``special_judge`` and ``special_judge_case`` (TACO's flags),
``checker`` (source of a checker program for a special-judge row), ``prelude`` (whose official import
block programs run after; null for none). See docs/judging.md.

Test records by testtype:
    stdin       {"input": stdin text, "output": expected stdout text}
    functional  {"input": [positional args as JSON values], "output": expected JSON value}
    humaneval   {"input": source of the HumanEval ``check`` program, "output": null}

Validation is lazy: a bad table reports every failing row and field at once, and :func:`build_table`
maps each failure back to the source file and row it came from (:class:`RowIssue`). With
``on_bad_rows="error"`` a bad source raises :class:`DataError`; with ``"drop"`` the bad rows are dropped
and returned as issues, so the data card can count them. Nothing is dropped silently.

Missing values: string columns use pandas' ``str`` dtype, so a null reads back as NaN; use
:func:`records` to get plain dicts with ``None``. ``gold_pass`` is pandas' nullable ``boolean``. The two
gold columns are optional in validation, so tables written before gold validation existed still read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal, Optional

import pandas as pd
import pandera.errors
import pandera.pandas as pa
from pandera.typing.pandas import Series

KINDS = ("code_stdio", "code_call", "math", "expression")
LEVELS = ("easy", "medium", "hard", "unknown")
TESTTYPES = ("stdin", "functional", "humaneval")
COLUMNS = (
    "problem_id",
    "benchmark",
    "split",
    "kind",
    "prompt",
    "starter_code",
    "fn_name",
    "tests",
    "answer",
    "difficulty",
    "difficulty_level",
    "contest_date",
    "source",
    "metadata",
    "gold_pass",
    "gold_detail",
)
NULLABLE = ("fn_name", "answer", "contest_date", "gold_pass", "gold_detail")
GOLD_COLUMNS = ("gold_pass", "gold_detail")
OnBadRows = Literal["error", "drop"]


# ------------------------------------------------------------------------------------------ errors
@dataclass(frozen=True)
class RowIssue:
    """One problem with one source row: where it is (file, 0-based row, 1-based line when the file is
    line-oriented) and which field is wrong."""

    file: str
    row: int | None
    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", row {self.row}"
            if self.line is not None:
                where += f" (line {self.line})"
        return f"{where}, field {self.field!r}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class DataError(ValueError):
    """Bad source data. ``issues`` lists every bad row and field found (the message shows them all, up
    to a cap), so a user fixes a file in one pass."""

    MAX_SHOWN = 50

    def __init__(self, issues: Iterable[RowIssue] | str, benchmark: str | None = None):
        if isinstance(issues, str):
            self.issues: list[RowIssue] = []
            super().__init__(issues)
            return
        self.issues = list(issues)
        head = f"{benchmark}: " if benchmark else ""
        rows = {(i.file, i.row) for i in self.issues}
        lines = [f"{head}{len(self.issues)} problem(s) in {len(rows)} source row(s):"]
        lines += [f"  {i}" for i in self.issues[: self.MAX_SHOWN]]
        if len(self.issues) > self.MAX_SHOWN:
            lines.append(f"  ... and {len(self.issues) - self.MAX_SHOWN} more")
        lines.append("(set data.on_bad_rows=drop to drop such rows and count them in the data card)")
        super().__init__("\n".join(lines))


class BadField(Exception):
    """Raised by a row converter: ``field`` of the current source row is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Unreadable(dict):
    """Stands in for a source record that could not be parsed (a line that is not a JSON object), so
    that it becomes a bad row like any other instead of stopping the whole file."""

    def __init__(self, message: str):
        super().__init__()
        self.message = message


def require_record(rec: Any) -> dict[str, Any]:
    """The record itself, or BadField('<record>') when it could not be parsed or is not an object."""
    if isinstance(rec, Unreadable):
        raise BadField("<record>", rec.message)
    if not isinstance(rec, dict):
        raise BadField("<record>", f"expected an object, got {type(rec).__name__}")
    return rec


# ------------------------------------------------------------------------------------- field checks
def _json_scalar_or_container(x: Any) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    return x is None or isinstance(x, (str, int, bool, list, dict))


def fault_in_tests(tests: Any, kind: Any) -> str | None:
    """Why ``tests`` (the JSON text of a row's tests) is not valid for a problem of ``kind``; None if
    it is. Code problems need at least one test, all of a type that fits the kind."""
    if not isinstance(tests, str):
        return f"must be a JSON string, got {type(tests).__name__}"
    try:
        parsed = json.loads(tests)
    except ValueError as e:
        return f"not valid JSON ({e})"
    if not isinstance(parsed, list):
        return f"must be a JSON list, got {type(parsed).__name__}"
    for i, t in enumerate(parsed):
        if not isinstance(t, dict) or set(t) != {"input", "output", "testtype"}:
            return f"test {i} must be an object with exactly input, output, testtype"
        tt = t["testtype"]
        if tt not in TESTTYPES:
            return f"test {i}: testtype {tt!r} is not one of {TESTTYPES}"
        if tt == "stdin" and not (isinstance(t["input"], str) and isinstance(t["output"], str)):
            return f"test {i}: a stdin test needs string input and output"
        if tt == "functional" and not isinstance(t["input"], list):
            return f"test {i}: a functional test needs a list of arguments as input"
        if tt == "humaneval" and not isinstance(t["input"], str):
            return f"test {i}: a humaneval test needs the check program as input"
    types = {t["testtype"] for t in parsed}
    if kind == "code_stdio":
        if not parsed:
            return "a code_stdio problem needs at least one test"
        if types != {"stdin"}:
            return f"a code_stdio problem takes stdin tests only, got {sorted(types)}"
    elif kind == "code_call":
        if not parsed:
            return "a code_call problem needs at least one test"
        if not types <= {"functional", "humaneval"}:
            return f"a code_call problem takes functional or humaneval tests, got {sorted(types)}"
    elif kind in ("math", "expression") and parsed:
        return f"a {kind} problem is checked against its answer and takes no tests"
    return None


def _is_iso_date(x: Any) -> bool:
    if not isinstance(x, str):
        return False
    try:
        (date.fromisoformat if len(x) == 10 else datetime.fromisoformat)(x)
    except ValueError:
        return False
    return True


def _is_json_object(x: Any) -> bool:
    try:
        return isinstance(json.loads(x), dict)
    except (TypeError, ValueError):
        return False


def _missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


# ------------------------------------------------------------------------------------------- schema
class ProblemSchema(pa.DataFrameModel):
    """The problem table (see the module docstring). ``strict``: no other columns."""

    problem_id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    benchmark: Series[str] = pa.Field(str_length={"min_value": 1})
    split: Series[str] = pa.Field(str_length={"min_value": 1})
    kind: Series[str] = pa.Field(isin=list(KINDS))
    prompt: Series[str] = pa.Field(str_length={"min_value": 1})
    starter_code: Series[str]
    fn_name: Series[str] = pa.Field(nullable=True)
    tests: Series[str]
    answer: Series[str] = pa.Field(nullable=True)
    difficulty: Series[str] = pa.Field(str_length={"min_value": 1})
    difficulty_level: Series[str] = pa.Field(isin=list(LEVELS))
    contest_date: Series[str] = pa.Field(nullable=True)
    source: Series[str] = pa.Field(str_length={"min_value": 1})
    metadata: Series[str]
    gold_pass: Optional[Series[pd.BooleanDtype]] = pa.Field(nullable=True)  # noqa: UP045 - pandera reads Optional
    gold_detail: Optional[Series[str]] = pa.Field(nullable=True)  # noqa: UP045

    class Config:
        strict = True

    @pa.check("contest_date", element_wise=True, name="iso_date")
    def _contest_date_iso(cls, x: Any) -> bool:
        return _missing(x) or _is_iso_date(x)

    @pa.check("metadata", element_wise=True, name="json_object")
    def _metadata_json(cls, x: Any) -> bool:
        return _is_json_object(x)

    @pa.dataframe_check(name="tests_fit_kind")
    def _tests_fit_kind(cls, df: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [fault_in_tests(t, k) is None for t, k in zip(df["tests"], df["kind"], strict=True)],
            index=df.index,
        )

    @pa.dataframe_check(name="fn_name_for_code_call")
    def _fn_name_for_code_call(cls, df: pd.DataFrame) -> pd.Series:
        return (df["kind"] != "code_call") | df["fn_name"].map(lambda x: isinstance(x, str) and x != "")

    @pa.dataframe_check(name="answer_for_math")
    def _answer_for_math(cls, df: pd.DataFrame) -> pd.Series:
        needs = df["kind"].isin(["math", "expression"])
        return ~needs | df["answer"].map(lambda x: isinstance(x, str) and x != "")


# ------------------------------------------------------------------------------------ table building
@dataclass(frozen=True)
class Origin:
    """Where a table row came from."""

    file: str
    row: int | None
    line: int | None = None

    def issue(self, field: str, message: str) -> RowIssue:
        return RowIssue(self.file, self.row, field, message, self.line)


@dataclass
class LoadResult:
    """A validated problem table plus what did not make it in: ``dropped`` bad-row issues (only with
    on_bad_rows="drop"), ``filtered`` counts of rows left out on purpose (a selection: version, date,
    year; special-judge rows nothing can decide; rows whose reference solution fails), ``notes`` on
    how the source was read (files ignored, a JSON array named .jsonl) and ``gold``, the summary of
    gold validation when it ran (see :mod:`fade_core.data.gold`)."""

    table: pd.DataFrame
    dropped: list[RowIssue] = field(default_factory=list)
    filtered: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    gold: dict[str, Any] | None = None

    @property
    def dropped_rows(self) -> int:
        return len({(i.file, i.row) for i in self.dropped})


_FIX_MESSAGES = {
    "field_uniqueness": "duplicate problem_id",
    "iso_date": "not an ISO date",
    "json_object": "not a JSON object",
    "fn_name_for_code_call": "a code_call problem needs fn_name",
    "answer_for_math": "a math/expression problem needs an answer",
}


def _dtype(column: str) -> str:
    return "boolean" if column == "gold_pass" else "str"


def empty_table() -> pd.DataFrame:
    """A zero-row problem table with the schema's columns and dtypes."""
    return pd.DataFrame({c: pd.Series([], dtype=_dtype(c)) for c in COLUMNS})


def to_frame(rows: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Problem rows (dicts with the schema's columns; the gold columns may be left out) -> a
    DataFrame with the schema's dtypes."""
    if not rows:
        return empty_table()
    data = {c: pd.Series([r.get(c) for r in rows], dtype=_dtype(c)) for c in COLUMNS}
    return pd.DataFrame(data)


def with_gold_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with null gold columns added where it has none (a table written before gold validation)."""
    missing = [c for c in GOLD_COLUMNS if c not in df.columns]
    if not missing:
        return df
    df = df.copy()
    for c in missing:
        df[c] = pd.Series([None] * len(df), dtype=_dtype(c), index=df.index)
    return df


def _schema_issues(df: pd.DataFrame, origins: list[Origin]) -> dict[int, list[RowIssue]]:
    """Run the schema lazily; map every failure case to (table position -> issues at its origin)."""
    try:
        ProblemSchema.validate(df, lazy=True)
    except pandera.errors.SchemaErrors as err:
        out: dict[int, list[RowIssue]] = {}
        fc = err.failure_cases
        for rec in fc.to_dict("records"):
            idx = rec.get("index")
            check = str(rec.get("check"))
            col = rec.get("column")
            if _missing(idx):
                raise DataError(
                    f"problem table fails the schema as a whole: {check} on column {col}"
                ) from err
            pos = int(idx)
            if check == "tests_fit_kind":
                col = "tests"
                msg = fault_in_tests(df["tests"].iat[pos], df["kind"].iat[pos]) or check
            elif check in ("fn_name_for_code_call", "answer_for_math"):
                col = "fn_name" if check == "fn_name_for_code_call" else "answer"
                msg = _FIX_MESSAGES[check]
            else:
                value = repr(rec.get("failure_case"))
                msg = f"{_FIX_MESSAGES.get(check, 'fails ' + check)} (got {value[:80]})"
            issue = origins[pos].issue(str(col), msg)
            if issue not in out.setdefault(pos, []):
                out[pos].append(issue)
        return out
    return {}


def build_table(
    records: Iterable[tuple[Origin, Any]],
    convert: Callable[[Any], dict[str, Any] | None],
    *,
    benchmark: str,
    on_bad_rows: OnBadRows = "error",
    filtered: dict[str, int] | None = None,
    notes: list[str] | None = None,
) -> LoadResult:
    """Convert source records into a validated problem table.

    ``convert(record)`` returns one problem row, None to leave the record out on purpose (a selection:
    the caller counts those in ``filtered``), or raises :class:`BadField`. Every conversion failure,
    every repeated problem_id and every schema failure becomes a :class:`RowIssue` naming the file,
    row and field. ``on_bad_rows="error"`` raises :class:`DataError` with all of them; ``"drop"``
    returns the good rows and the issues.
    """
    if on_bad_rows not in ("error", "drop"):
        raise ValueError(f"on_bad_rows must be 'error' or 'drop', got {on_bad_rows!r}")
    rows: list[dict[str, Any]] = []
    origins: list[Origin] = []
    issues: list[RowIssue] = []
    first_seen: dict[str, Origin] = {}
    for origin, rec in records:
        try:
            row = convert(rec)
        except BadField as e:
            issues.append(origin.issue(e.field, e.message))
            continue
        if row is None:
            continue
        pid = row.get("problem_id")
        if isinstance(pid, str) and pid in first_seen:
            o = first_seen[pid]
            issues.append(
                origin.issue("problem_id", f"duplicate problem_id {pid!r} (first at {o.file}, row {o.row})")
            )
            continue
        if isinstance(pid, str):
            first_seen[pid] = origin
        rows.append(row)
        origins.append(origin)
    df = to_frame(rows)
    bad = _schema_issues(df, origins)
    for pos in sorted(bad):
        issues.extend(bad[pos])
    if issues and on_bad_rows == "error":
        raise DataError(issues, benchmark)
    if bad:
        df = df.drop(index=list(bad)).reset_index(drop=True)
    return LoadResult(df, issues, dict(filtered or {}), list(notes or []))


def validate(df: pd.DataFrame) -> pd.DataFrame:
    """Validate a finished problem table (e.g. one read back from parquet); raise :class:`DataError`
    listing every failing row (by problem_id) and field."""
    origins = [
        Origin(f"problem {pid!r}", i)
        for i, pid in enumerate(df.get("problem_id", pd.Series([None] * len(df))))
    ]
    bad = _schema_issues(df.reset_index(drop=True), origins)
    if bad:
        raise DataError([i for pos in sorted(bad) for i in bad[pos]])
    return df


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a problem table as plain dicts, with None (not NaN) for missing values."""
    out = df.to_dict("records")
    for r in out:
        for k, v in r.items():
            if _missing(v):
                r[k] = None
    return out


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a prepared problem table (data/problems/<benchmark>.parquet) and validate it (a table
    written before gold validation gets null gold columns)."""
    return validate(with_gold_columns(pd.read_parquet(path)))


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Validate a problem table and write it as parquet (parent folders created); returns the path."""
    validate(df)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(p, index=False)
    return p
