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
- Special judge: TACO marks the test problems whose output is not compared as text in a sidecar file
  ``output_spj.jsonl`` (``{"idx", "special_judge", "case"}``; case 1: any valid answer accepted,
  2: case-insensitive, 3: floating-point tolerance). Flags are matched to rows by a key, never by
  position alone: the flag's ``taco_test_row`` (else its ``idx``, the row of the upstream test
  split) against the row's own ``taco_test_row`` field; a row without that field is matched by its
  position only when the source is the complete test split (as many rows as flags), else the load
  fails with an error saying what to add. A row missing from the flag file is a bad row (field
  ``special_judge``). A row that carries its own ``special_judge`` field keeps it.
  Matched rows get ``metadata.special_judge`` and ``special_judge_case``. Cases 2 and 3 are judged
  by a rule (case-insensitive lines; numbers within tolerance); case 1 needs a checker program: a
  row may carry one (field ``checker``: Python source defining ``check(input, output, expected)
  -> bool``, kept in ``metadata.checker`` and run in a sandbox by the verifier). Rows that nothing
  can decide are left out by default (counted in ``filtered``, so in the data card);
  ``special_judge_without_checker="lenient"`` keeps them with the lenient any-order token rule,
  labelled (``metadata.judge = "special_lenient"``, status ``passed_lenient``).
- problem_id ``taco/<split>/<row>``: the row's ``taco_test_row`` when it has one (a subset keeps the
  upstream numbering), else its row within the split (counted across a split's shards in name order).
- ``metadata.prelude`` = "taco" (or null with ``prelude=False``): the verifier runs programs after the
  import block of TACO's official harness (see fade_core.verifiers.PRELUDES).
- difficulty_level: EASY -> easy; MEDIUM, MEDIUM_HARD -> medium; HARD, VERY_HARD -> hard;
  UNKNOWN_DIFFICULTY -> unknown.

Local layouts: a folder with ``train``/``test`` sub-folders or files whose names start with the split
(``train.jsonl``, ``test/data-00000-of-00001.arrow``, ``ALL/train-00000-of-00009.parquet``), or one file
with ``split=`` given. In a folder, only files whose name or folder tells the split are read; any other
data file (notes, samples, a copy of something) is ignored with a note in the load result (and the
data card), never guessed at. Hub: the parquet shards ``ALL/<split>-*`` of BAAI/TACO are downloaded to the
Hugging Face cache and read as a local folder (``datasets.load_dataset`` when a repo lacks them).
"""

from __future__ import annotations

import ast
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fade_core.data.reading import data_files, plain_record, read_file, read_hub
from fade_core.data.schema import (
    BadField,
    DataError,
    LoadResult,
    OnBadRows,
    Origin,
    build_table,
    require_record,
)
from fade_core.sandbox.compare import judge_from_metadata

log = logging.getLogger(__name__)

BENCHMARK = "taco"
HUB_ID = "BAAI/TACO"
SPLITS = ("train", "test")
SPJ_FILE = "output_spj.jsonl"
ROW_KEY = "taco_test_row"  # a test row's row in the upstream test split
SpecialJudgePolicy = Literal["exclude", "lenient"]
EXCLUDED = "special-judge rows nothing can decide (no checker): excluded"
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
    prelude: bool = True,
) -> dict[str, Any]:
    """One native TACO record -> one problem row (raises BadField naming the field). ``special_judge``:
    the row's entry of the flag file, if any."""
    rec = plain_record(require_record(rec))
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
    checker = rec.get("checker")
    if checker is not None and not (isinstance(checker, str) and checker.strip()):
        raise BadField("checker", f"expected the source of a checker program, got {checker!r:.60}")
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
        "prelude": BENCHMARK if prelude else None,
    }
    if rec.get(ROW_KEY) is not None:
        meta[ROW_KEY] = rec[ROW_KEY]
    if checker is not None:
        meta["checker"] = checker
    if rec.get("special_judge") is not None:
        if not isinstance(rec["special_judge"], bool):
            raise BadField("special_judge", f"expected true/false, got {rec['special_judge']!r}")
        meta["special_judge"] = rec["special_judge"]
        if rec.get("special_judge_case") is not None:
            meta["special_judge_case"] = rec["special_judge_case"]
    elif special_judge is not None:
        meta["special_judge"] = bool(special_judge.get("special_judge"))
        if special_judge.get("case") is not None:
            meta["special_judge_case"] = special_judge["case"]
    try:
        tests_json = json.dumps(tests, allow_nan=False)
    except ValueError as e:
        raise BadField("input_output", f"not representable as strict JSON ({e})") from None
    try:
        meta_json = json.dumps(meta, allow_nan=False, default=str)
    except ValueError as e:
        bad = next((k for k, v in meta.items() if isinstance(v, float) and v != v), "metadata")
        raise BadField(bad, f"not representable as strict JSON ({e})") from None
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


def apply_special_judge_policy(row: dict[str, Any], policy: SpecialJudgePolicy) -> dict[str, Any] | None:
    """A row as kept under ``policy``: unchanged when its judge can decide it; None (left out) when it
    is a special-judge row that nothing can decide and ``policy`` is "exclude"; marked with the
    labelled lenient judge when ``policy`` is "lenient"."""
    meta = json.loads(row["metadata"])
    if judge_from_metadata(meta)[0] != "no_checker":
        return row
    if policy == "exclude":
        return None
    if policy != "lenient":
        raise ValueError(f"special_judge_without_checker must be 'exclude' or 'lenient', got {policy!r}")
    meta["judge"] = "special_lenient"
    return {**row, "metadata": json.dumps(meta, allow_nan=False, default=str)}


def split_of(path: Path, root: Path) -> str | None:
    """The split a file belongs to, from its name or a folder name under ``root`` ('train'/'test')."""
    parts = [*path.relative_to(root).parent.parts, path.name]
    for part in reversed(parts):
        for s in SPLITS:
            if part.lower().startswith(s):
                return s
    return None


@dataclass
class SpecialJudgeFlags:
    """TACO's special-judge flags, keyed by the upstream test-split row (``taco_test_row``, else
    ``idx``) of each entry; ``path`` is the flag file."""

    path: str
    by_row: dict[int, dict[str, Any]] = field(default_factory=dict)


def read_special_judge(path: Path) -> SpecialJudgeFlags:
    """Read a flag file (``output_spj.jsonl`` or a subset of it with ``taco_test_row`` keys)."""
    flags = SpecialJudgeFlags(str(path))
    for origin, rec in read_file(path):
        key = rec.get(ROW_KEY, rec.get("idx"))
        if (
            not isinstance(key, int)
            or isinstance(key, bool)
            or not isinstance(rec.get("special_judge"), bool)
        ):
            raise DataError(
                f"{origin.file}, row {origin.row}: needs an integer 'idx' (or '{ROW_KEY}') and a boolean "
                "'special_judge'"
            )
        if key in flags.by_row:
            raise DataError(f"{origin.file}, row {origin.row}: a second flag for test row {key}")
        flags.by_row[key] = rec
    return flags


@dataclass
class _Source:
    """What a TACO source holds: (split, records) streams in split/file order, the flags, notes."""

    streams: list[tuple[str, Iterator[tuple[Origin, dict[str, Any]]]]]
    flags: SpecialJudgeFlags | None = None
    notes: list[str] = field(default_factory=list)


def _records(source: str, splits: tuple[str, ...], split: str | None, hub_options: dict[str, Any]) -> _Source:
    p = Path(source).expanduser()
    if p.is_file():
        s = split or split_of(p, p.parent)
        if s is None:
            raise DataError(
                f"{source}: cannot tell the split from the file name; pass split='train' or 'test'"
            )
        out = _Source([])
        spj_path = p.parent / SPJ_FILE
        if s == "test" and spj_path.is_file() and p.name != SPJ_FILE:
            out.flags = read_special_judge(spj_path)
        out.streams.append((s, read_file(p, notes=out.notes)))
        return out
    if p.is_dir():
        out = _Source([])
        files = data_files(p, skip=("output_spj",))
        by_split: dict[str, list[Path]] = {}
        for f in files:
            s = split_of(f, p)
            if s is None:
                note = f"{f}: ignored (neither its name nor its folder says train or test)"
                log.info(note)
                out.notes.append(note)
                continue
            by_split.setdefault(s, []).append(f)
        if not by_split:
            raise DataError(
                f"{source}: no TACO data files here (.jsonl, .json, .parquet, .arrow whose name or folder "
                "starts with train or test)"
            )
        spj_files = sorted(p.rglob(SPJ_FILE))
        if len(spj_files) > 1:
            raise DataError(f"{source}: {len(spj_files)} flag files {[str(f) for f in spj_files]}; keep one")
        if spj_files:
            out.flags = read_special_judge(spj_files[0])
        for s in splits:
            for f in by_split.get(s, []):
                out.streams.append((s, read_file(f, notes=out.notes)))
        return out
    if source.startswith((".", "/", "~")) or source.endswith((".jsonl", ".json", ".parquet", ".arrow")):
        raise DataError(f"{source}: no such file or folder")
    folder = download_hub(source, splits, hub_options)
    if folder is not None:
        return _records(str(folder), splits, None, {})
    return _Source([(s, read_hub(source, s, **hub_options)) for s in splits])


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
    special_judge_without_checker: SpecialJudgePolicy = "exclude",
    prelude: bool = True,
    on_bad_rows: OnBadRows = "error",
    hub_options: dict[str, Any] | None = None,
) -> LoadResult:
    """Load TACO from a local file/folder (native layout) or a hub id (default BAAI/TACO).

    ``splits`` selects splits; ``split`` names the split of a single file whose name does not say it.
    ``keep_solutions``: how many reference solutions to keep in metadata (0: none; gold validation
    tries these). ``special_judge_without_checker``: "exclude" (default) or "lenient" (see the module
    docstring). ``prelude``: programs run after TACO's official import block.
    """
    source = source or HUB_ID
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise ValueError(f"unknown TACO split(s) {bad}; TACO has {SPLITS}")
    if special_judge_without_checker not in ("exclude", "lenient"):
        raise ValueError(
            f"special_judge_without_checker must be 'exclude' or 'lenient', got {special_judge_without_checker!r}"
        )
    src = _records(str(source), tuple(splits), split, dict(hub_options or {}))
    flags = src.flags
    if flags is None and any(s == "test" for s, _ in src.streams):
        note = (
            f"{source}: no {SPJ_FILE} beside the test split: its special-judge problems (218 of the 1,000 "
            f"upstream) are judged as ordinary ones (exact output); put FlagOpen/TACO's {SPJ_FILE} next to it"
        )
        log.info(note)
        src.notes.append(note)
    counters: dict[str, int] = {}
    filtered: dict[str, int] = {}
    by_position = 0  # test rows matched to flags by their position (they carry no taco_test_row)

    def tagged() -> Iterator[tuple[Origin, tuple[str, int, Origin, dict[str, Any]]]]:
        for s, stream in src.streams:
            for origin, rec in stream:
                i = counters.get(s, 0)
                counters[s] = i + 1
                yield origin, (s, i, origin, rec)
        n_test = counters.get("test", 0)
        if flags is not None and by_position and n_test != len(flags.by_row):
            raise DataError(
                f"{flags.path}: {len(flags.by_row)} special-judge flags but {n_test} test rows, and "
                f"{by_position} of those rows carry no '{ROW_KEY}': flags can be matched by position only "
                f"to the complete test split. Give each row its row in the upstream test split as "
                f"'{ROW_KEY}', or use a flag file with a '{ROW_KEY}' per entry for exactly these rows."
            )

    def flag_of(rec: Any, position: int) -> tuple[int, dict[str, Any] | None]:
        nonlocal by_position
        key = rec.get(ROW_KEY) if isinstance(rec, dict) else None
        if key is None:
            by_position += 1
            key = position
        elif not isinstance(key, int) or isinstance(key, bool):
            raise BadField(ROW_KEY, f"expected an integer row of the upstream test split, got {key!r}")
        if flags is None:
            return key, None
        if isinstance(rec, dict) and rec.get("special_judge") is not None:
            return key, None  # the row's own flag wins
        entry = flags.by_row.get(key)
        if entry is None:
            raise BadField("special_judge", f"no entry for test row {key} in {flags.path}")
        return key, entry

    def convert(item: tuple[str, int, Origin, dict[str, Any]]) -> dict[str, Any] | None:
        s, i, origin, rec = item
        if s not in splits:
            filtered["split not selected"] = filtered.get("split not selected", 0) + 1
            return None
        index, entry = flag_of(rec, i) if s == "test" else (i, None)
        row = convert_row(
            rec,
            split=s,
            index=index,
            origin=origin,
            keep_solutions=keep_solutions,
            special_judge=entry,
            prelude=prelude,
        )
        kept = apply_special_judge_policy(row, special_judge_without_checker)
        if kept is None:
            filtered[EXCLUDED] = filtered.get(EXCLUDED, 0) + 1
        return kept

    return build_table(
        tagged(), convert, benchmark=BENCHMARK, on_bad_rows=on_bad_rows, filtered=filtered, notes=src.notes
    )
