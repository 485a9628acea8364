"""TACO (BAAI/TACO): 25,443 training and 1,000 test competitive-programming problems.

Native row (every field a string, as on the hub):

    question       the statement
    solutions      JSON list of Python solutions
    starter_code   "" or a function/class header (call-based problems)
    input_output   JSON {"inputs": [...], "outputs": [...], "fn_name"?: str}
    difficulty     EASY | MEDIUM | MEDIUM_HARD | HARD | VERY_HARD | UNKNOWN_DIFFICULTY
    skill_types, tags, raw_tags   Python list literals as strings ("['Sorting', 'Greedy']")
    source, url, name, date, time_limit, memory_limit, picture_num, Expected Time/Auxiliary Space

Conversion to problem rows:
- ``fn_name`` present -> ``code_call``: each input is a list of positional args; each expected output
  is stored the APPS way, wrapped in a one-element list (``[[3], [5]]`` for results 3 and 5). When every
  output of a problem is a one-element list the wrapper is removed (metadata ``outputs_unwrapped``:
  true); otherwise outputs are kept as they are.
- no ``fn_name`` -> ``code_stdio``: inputs/outputs are strings, or lists of lines (joined with "\\n",
  with a trailing newline on inputs).
- Special judge: TACO marks test problems whose output is not unique (any valid answer is accepted) in
  a sidecar file ``output_spj.jsonl`` ({"idx", "special_judge", "case"}, idx = row of the test split).
  A folder source that holds it gets ``metadata.special_judge`` (and ``special_judge_case``) on those
  rows; a row that carries its own ``special_judge`` field keeps it. A checker must not compare output
  exactly on such problems.
- problem_id ``taco/<split>/<row within split>`` (rows counted across a split's shards in name order).
- difficulty_level: EASY -> easy; MEDIUM, MEDIUM_HARD -> medium; HARD, VERY_HARD -> hard;
  UNKNOWN_DIFFICULTY -> unknown.

Local layouts: a folder with ``train``/``test`` sub-folders or files whose names start with the split
(``train.jsonl``, ``test/data-00000-of-00001.arrow``, ``ALL/train-00000-of-00009.parquet``), or one file
with ``split=`` given. Hub: the parquet shards ``ALL/<split>-*`` of BAAI/TACO are downloaded to the
Hugging Face cache and read as a local folder (``datasets.load_dataset`` when a repo lacks them).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fade_core.data.reading import data_files, read_file, read_hub
from fade_core.data.schema import (
    BadField,
    DataError,
    LoadResult,
    OnBadRows,
    Origin,
    build_table,
    require_record,
)

BENCHMARK = "taco"
HUB_ID = "BAAI/TACO"
SPLITS = ("train", "test")
SPJ_FILE = "output_spj.jsonl"
LEVELS = {
    "EASY": "easy",
    "MEDIUM": "medium",
    "MEDIUM_HARD": "medium",
    "HARD": "hard",
    "VERY_HARD": "hard",
    "UNKNOWN_DIFFICULTY": "unknown",
}


def _text(rec: dict[str, Any], key: str, *, required: bool = True) -> str:
    v = rec.get(key)
    if v is None:
        if required:
            raise BadField(key, "missing")
        return ""
    if not isinstance(v, str):
        raise BadField(key, f"expected a string, got {type(v).__name__}")
    return v


def _py_list(rec: dict[str, Any], key: str) -> list[str]:
    """A field stored as the text of a Python list ("['a', 'b']"); missing/empty -> []."""
    v = rec.get(key)
    if v is None or v == "":
        return []
    if isinstance(v, list):
        return [str(x) for x in v]
    if not isinstance(v, str):
        raise BadField(key, f"expected a list literal string, got {type(v).__name__}")
    try:
        parsed = ast.literal_eval(v)
    except (ValueError, SyntaxError):
        raise BadField(key, f"not a Python list literal: {v[:60]!r}") from None
    if not isinstance(parsed, list):
        raise BadField(key, f"not a list: {v[:60]!r}")
    return [str(x) for x in parsed]


def _lines(x: Any, *, trailing_newline: bool) -> str:
    """A stdio payload as text: strings stay, lists of lines are joined."""
    if isinstance(x, str):
        return x
    if isinstance(x, list) and all(isinstance(s, (str, int, float)) for s in x):
        text = "\n".join(str(s) for s in x)
        return text + "\n" if trailing_newline and text and not text.endswith("\n") else text
    raise ValueError(f"expected a string or a list of lines, got {type(x).__name__}")


def convert_tests(io: dict[str, Any]) -> tuple[str, str | None, list[dict[str, Any]], bool]:
    """TACO ``input_output`` -> (kind, fn_name, tests, outputs_unwrapped). Raises BadField."""
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise BadField("input_output", "needs lists 'inputs' and 'outputs'")
    if len(inputs) != len(outputs):
        raise BadField("input_output", f"{len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise BadField("input_output", "no tests")
    fn_name = io.get("fn_name")
    if fn_name is not None:
        if not isinstance(fn_name, str) or not fn_name.strip():
            raise BadField("input_output", f"fn_name must be a non-empty string, got {fn_name!r}")
        for i, args in enumerate(inputs):
            if not isinstance(args, list):
                raise BadField(
                    "input_output",
                    f"call-based input {i} must be a list of arguments, got {type(args).__name__}",
                )
        unwrap = all(isinstance(o, list) and len(o) == 1 for o in outputs)
        tests = [
            {"input": args, "output": out[0] if unwrap else out, "testtype": "functional"}
            for args, out in zip(inputs, outputs, strict=True)
        ]
        return "code_call", fn_name.strip(), tests, unwrap
    tests = []
    for i, (x, y) in enumerate(zip(inputs, outputs, strict=True)):
        try:
            tests.append(
                {
                    "input": _lines(x, trailing_newline=True),
                    "output": _lines(y, trailing_newline=False),
                    "testtype": "stdin",
                }
            )
        except ValueError as e:
            raise BadField("input_output", f"stdio test {i}: {e}") from None
    return "code_stdio", None, tests, False


_TIME = re.compile(r"([\d.]+)\s*(milli)?\s*(s|sec|second)", re.I)
_MEM = re.compile(r"([\d.]+)\s*(k|m|g)?(?:ilo|ega|iga)?\s*(b|byte)", re.I)


def parse_time_limit(text: Any) -> float | None:
    """'2 seconds' -> 2.0, '500 milliseconds' -> 0.5; unparseable -> None."""
    if not isinstance(text, str):
        return None
    m = _TIME.search(text)
    if not m:
        return None
    try:
        v = float(m.group(1))
    except ValueError:
        return None
    return v / 1000 if m.group(2) else v


def parse_memory_limit(text: Any) -> float | None:
    """'256 megabytes' -> 256.0 (MB); unparseable -> None."""
    if not isinstance(text, str):
        return None
    m = _MEM.search(text)
    if not m:
        return None
    try:
        v = float(m.group(1))
    except ValueError:
        return None
    unit = (m.group(2) or "").lower()
    return {"k": v / 1024, "m": v, "g": v * 1024}.get(unit, v / 2**20)


def convert_row(
    rec: dict[str, Any],
    *,
    split: str,
    index: int,
    origin: Origin,
    keep_solutions: int = 1,
    special_judge: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One native TACO record -> one problem row (raises BadField naming the field)."""
    rec = require_record(rec)
    question = _text(rec, "question")
    if not question.strip():
        raise BadField("question", "empty")
    starter = _text(rec, "starter_code", required=False)
    raw_io = _text(rec, "input_output")
    try:
        io = json.loads(raw_io)
    except ValueError as e:
        raise BadField("input_output", f"not valid JSON ({e})") from None
    if not isinstance(io, dict):
        raise BadField("input_output", f"expected a JSON object, got {type(io).__name__}")
    kind, fn_name, tests, unwrapped = convert_tests(io)
    difficulty = _text(rec, "difficulty", required=False) or "UNKNOWN_DIFFICULTY"
    if difficulty not in LEVELS:
        raise BadField("difficulty", f"{difficulty!r} is not one of {sorted(LEVELS)}")
    raw_solutions = rec.get("solutions")
    solutions: list[Any] = []
    if raw_solutions not in (None, ""):
        try:
            solutions = json.loads(raw_solutions) if isinstance(raw_solutions, str) else raw_solutions
        except ValueError as e:
            raise BadField("solutions", f"not valid JSON ({e})") from None
        if not isinstance(solutions, list):
            raise BadField("solutions", f"expected a JSON list, got {type(solutions).__name__}")
    meta: dict[str, Any] = {
        "file": origin.file,
        "row": origin.row,
        "name": rec.get("name"),
        "url": rec.get("url"),
        "date": rec.get("date"),
        "skill_types": _py_list(rec, "skill_types"),
        "tags": _py_list(rec, "tags"),
        "raw_tags": _py_list(rec, "raw_tags"),
        "time_limit": rec.get("time_limit"),
        "time_limit_s": parse_time_limit(rec.get("time_limit")),
        "memory_limit": rec.get("memory_limit"),
        "memory_limit_mb": parse_memory_limit(rec.get("memory_limit")),
        "expected_time_complexity": rec.get("Expected Time Complexity"),
        "expected_auxiliary_space": rec.get("Expected Auxiliary Space"),
        "picture_num": rec.get("picture_num"),
        "num_solutions": len(solutions),
        "solutions": solutions[: max(keep_solutions, 0)],
        "outputs_unwrapped": unwrapped,
    }
    if "special_judge" in rec and rec["special_judge"] is not None:
        if not isinstance(rec["special_judge"], bool):
            raise BadField("special_judge", f"expected true/false, got {rec['special_judge']!r}")
        meta["special_judge"] = rec["special_judge"]
    elif special_judge is not None:
        meta["special_judge"] = bool(special_judge.get("special_judge"))
        if special_judge.get("case") is not None:
            meta["special_judge_case"] = special_judge["case"]
    try:
        tests_json = json.dumps(tests, allow_nan=False)
        meta_json = json.dumps(meta, allow_nan=False, default=str)
    except ValueError as e:
        raise BadField("input_output", f"not representable as strict JSON ({e})") from None
    return {
        "problem_id": f"taco/{split}/{index}",
        "benchmark": BENCHMARK,
        "split": split,
        "kind": kind,
        "prompt": question,
        "starter_code": starter,
        "fn_name": fn_name,
        "tests": tests_json,
        "answer": None,
        "difficulty": difficulty,
        "difficulty_level": LEVELS[difficulty],
        "contest_date": None,
        "source": str(rec.get("source") or "taco"),
        "metadata": meta_json,
    }


def split_of(path: Path, root: Path) -> str | None:
    """The split a file belongs to, from its name or a folder name under ``root`` ('train'/'test')."""
    parts = [*path.relative_to(root).parent.parts, path.name]
    for part in reversed(parts):
        for s in SPLITS:
            if part.lower().startswith(s):
                return s
    return None


def read_special_judge(path: Path) -> dict[int, dict[str, Any]]:
    """TACO's output_spj.jsonl -> {test-split row idx: {"special_judge", "case"}}."""
    out: dict[int, dict[str, Any]] = {}
    for origin, rec in read_file(path):
        idx = rec.get("idx")
        if not isinstance(idx, int) or not isinstance(rec.get("special_judge"), bool):
            raise DataError(
                f"{origin.file}, row {origin.row}: needs integer 'idx' and boolean 'special_judge'"
            )
        out[idx] = rec
    return out


def _records(
    source: str, splits: tuple[str, ...], split: str | None, hub_options: dict[str, Any]
) -> tuple[list[tuple[str, Iterator[tuple[Origin, dict[str, Any]]]]], dict[int, dict[str, Any]]]:
    """(split, records) streams of the source, in split/file order; and the special-judge map."""
    p = Path(source).expanduser()
    if p.is_file():
        s = split or split_of(p, p.parent)
        if s is None:
            raise DataError(
                f"{source}: cannot tell the split from the file name; pass split='train' or 'test'"
            )
        spj_path = p.parent / SPJ_FILE
        spj = read_special_judge(spj_path) if s == "test" and spj_path.is_file() else {}
        return [(s, read_file(p))], spj
    if p.is_dir():
        files = data_files(p, skip=("output_spj",))
        if not files:
            raise DataError(f"{source}: no data files (.jsonl, .json, .parquet, .arrow) in this folder")
        by_split: dict[str, list[Path]] = {}
        for f in files:
            s = split_of(f, p)
            if s is None:
                raise DataError(f"{f}: cannot tell the split (train/test) from its name or folder")
            by_split.setdefault(s, []).append(f)
        spj_files = sorted(p.rglob(SPJ_FILE))
        spj = read_special_judge(spj_files[0]) if spj_files else {}
        streams = []
        for s in splits:
            for f in by_split.get(s, []):
                streams.append((s, read_file(f)))
        return streams, spj
    if source.startswith((".", "/", "~")) or source.endswith((".jsonl", ".json", ".parquet", ".arrow")):
        raise DataError(f"{source}: no such file or folder")
    folder = download_hub(source, splits, hub_options)
    if folder is not None:
        return _records(str(folder), splits, None, {})
    return [(s, read_hub(source, s, **hub_options)) for s in splits], {}


def download_hub(repo_id: str, splits: tuple[str, ...], hub_options: dict[str, Any]) -> Path | None:
    """Fetch the parquet shards of the selected splits (``ALL/<split>-*``, the layout of BAAI/TACO
    since its parquet conversion) into the Hugging Face cache; None when the repo has no such files
    (then ``datasets.load_dataset`` is tried). Needs the network or a warm cache."""
    from huggingface_hub import snapshot_download

    patterns = [f"ALL/{s}-*" for s in splits] + [SPJ_FILE]
    try:
        local = Path(snapshot_download(repo_id, repo_type="dataset", allow_patterns=patterns, **hub_options))
    except Exception as e:  # network, auth, missing repo: name what failed
        raise DataError(f"hub:{repo_id}: cannot download {patterns} ({type(e).__name__}: {e})") from None
    return local if data_files(local, skip=("output_spj",)) else None


def load(
    source: str | None = None,
    *,
    splits: tuple[str, ...] | list[str] = SPLITS,
    split: str | None = None,
    keep_solutions: int = 1,
    on_bad_rows: OnBadRows = "error",
    hub_options: dict[str, Any] | None = None,
) -> LoadResult:
    """Load TACO from a local file/folder (native layout) or a hub id (default BAAI/TACO).

    ``splits`` selects splits; ``split`` names the split of a single file whose name does not say it.
    ``keep_solutions``: how many reference solutions to keep in metadata (0: none).
    """
    source = source or HUB_ID
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise ValueError(f"unknown TACO split(s) {bad}; TACO has {SPLITS}")
    streams, spj = _records(str(source), tuple(splits), split, dict(hub_options or {}))
    counters: dict[str, int] = {}
    filtered: dict[str, int] = {}

    def tagged() -> Iterator[tuple[Origin, tuple[str, int, Origin, dict[str, Any]]]]:
        for s, stream in streams:
            for origin, rec in stream:
                i = counters.get(s, 0)
                counters[s] = i + 1
                yield origin, (s, i, origin, rec)

    def convert(item: tuple[str, int, Origin, dict[str, Any]]) -> dict[str, Any] | None:
        s, i, origin, rec = item
        if s not in splits:
            filtered["split not selected"] = filtered.get("split not selected", 0) + 1
            return None
        return convert_row(
            rec,
            split=s,
            index=i,
            origin=origin,
            keep_solutions=keep_solutions,
            special_judge=spj.get(i) if s == "test" else None,
        )

    return build_table(tagged(), convert, benchmark=BENCHMARK, on_bad_rows=on_bad_rows, filtered=filtered)
