"""LiveCodeBench code generation (livecodebench/code_generation_lite).

Native row (one JSON object per line):

    question_title, question_content, platform (leetcode | codeforces | atcoder), question_id,
    contest_id, contest_date ("2023-08-21T00:00:00"), starter_code, difficulty (easy | medium | hard),
    public_test_cases   JSON text: [{"input", "output", "testtype": "stdin" | "functional"}]
    private_test_cases  the same JSON text, or base64( zlib( pickle( that JSON text ) ) )
    metadata            JSON text; {"func_name": ...} for functional (LeetCode) problems

Functional tests hold one JSON value per argument, one per line (``"abc"\\n3``), and the result as a
JSON value; they become ``{"input": ["abc", 3], "output": <value>, "testtype": "functional"}``, with
``kind="code_call"`` and ``fn_name`` = func_name. stdin tests stay text (``kind="code_stdio"``).

The compressed form is decoded with a restricted unpickler that accepts plain data only (no globals,
so no code can run from a downloaded file).

Releases are cumulative files: release_v1 = test.jsonl, release_v2 adds test2.jsonl, ...,
release_v6 adds test6.jsonl. Selection (``version``):

    "release_v5"    test.jsonl .. test5.jsonl (everything released up to v5)
    "release_latest" every file through v6
    "v5"            test5.jsonl only (the problems v5 added)
    "v2..v5"        test2.jsonl .. test5.jsonl

``metadata.prelude`` = "livecodebench" (null with ``prelude=False``): the verifier runs programs after the
import block of lcb_runner's harness (see fade_core.verifiers.PRELUDES).

Selection also takes a contest-date window ``date_from``/``date_to`` (inclusive ISO dates), the contamination control:
keep only problems published after a model's training cut-off. Rows left out by the window are
counted (``filtered``), not dropped silently.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from fade_core.data.reading import plain_record, read_file
from fade_core.data.schema import (
    BadField,
    DataError,
    LoadResult,
    OnBadRows,
    Origin,
    build_table,
    require_record,
)

BENCHMARK = "livecodebench"
HUB_ID = "livecodebench/code_generation_lite"
LATEST = 6
LEVELS = {"easy": "easy", "medium": "medium", "hard": "hard"}


def version_file(v: int) -> str:
    """File that release v adds: 1 -> test.jsonl, 2 -> test2.jsonl, ..."""
    return "test.jsonl" if v == 1 else f"test{v}.jsonl"


def select_versions(version: str) -> list[int]:
    """Version selection -> the release numbers whose files to read (see module docstring)."""
    v = version.strip().lower()
    if v == "release_latest":
        return list(range(1, LATEST + 1))
    m = re.fullmatch(r"release_v(\d+)", v)
    if m:
        hi = int(m.group(1))
        if not 1 <= hi <= LATEST:
            raise ValueError(f"livecodebench version {version!r}: releases are v1..v{LATEST}")
        return list(range(1, hi + 1))
    m = re.fullmatch(r"v(\d+)(?:\s*\.\.\s*v?(\d+))?", v)
    if m:
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if not 1 <= lo <= hi <= LATEST:
            raise ValueError(f"livecodebench version {version!r}: need 1 <= from <= to <= {LATEST}")
        return list(range(lo, hi + 1))
    raise ValueError(
        f"livecodebench version {version!r}: use 'release_vN' (cumulative), 'vN' (one release), "
        f"'vA..vB' (a range) or 'release_latest'"
    )


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickles strings, numbers, lists and dicts only: any global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a test-case blob")


def decode_private_tests(text: str) -> list[Any]:
    """private_test_cases (plain JSON, or base64/zlib/pickle of JSON) -> the list of test dicts."""
    s = text.strip()
    if s.startswith("["):
        try:
            return json.loads(s)
        except ValueError as e:
            raise BadField("private_test_cases", f"not valid JSON ({e})") from None
    try:
        raw = zlib.decompress(base64.b64decode(s.encode("ascii"), validate=True))
        inner = _PlainDataUnpickler(io.BytesIO(raw)).load()
    except Exception as e:  # binascii.Error, zlib.error, UnpicklingError, ...
        raise BadField(
            "private_test_cases", f"neither JSON nor base64/zlib/pickle ({type(e).__name__}: {e})"
        ) from None
    if isinstance(inner, bytes):
        inner = inner.decode("utf-8")
    if isinstance(inner, list):
        return inner
    if not isinstance(inner, str):
        raise BadField("private_test_cases", f"compressed payload is {type(inner).__name__}, not JSON text")
    try:
        return json.loads(inner)
    except ValueError as e:
        raise BadField("private_test_cases", f"compressed payload is not valid JSON ({e})") from None


def encode_private_tests(tests: list[dict[str, Any]]) -> str:
    """The inverse of the compressed form (for fixtures and round-trip tests)."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests), protocol=4))).decode("ascii")


def _parse_tests(raw: Any, field: str) -> list[dict[str, Any]]:
    if raw is None or raw == "":
        return []
    if field == "private_test_cases" and isinstance(raw, str):
        tests = decode_private_tests(raw)
    elif isinstance(raw, str):
        try:
            tests = json.loads(raw)
        except ValueError as e:
            raise BadField(field, f"not valid JSON ({e})") from None
    else:
        tests = raw
    if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
        raise BadField(field, "expected a list of test objects")
    return tests


def convert_test(t: dict[str, Any], field: str, i: int) -> dict[str, Any]:
    """One LiveCodeBench test -> the problem table's test record."""
    tt = t.get("testtype")
    x, y = t.get("input"), t.get("output")
    if not isinstance(x, str) or not isinstance(y, str):
        raise BadField(field, f"test {i}: input and output must be strings")
    if tt == "stdin":
        return {"input": x, "output": y, "testtype": "stdin"}
    if tt == "functional":
        try:
            args = [json.loads(line) for line in x.split("\n") if line.strip()]
        except ValueError as e:
            raise BadField(field, f"test {i}: an argument line is not a JSON value ({e})") from None
        try:
            out = json.loads(y)
        except ValueError as e:
            raise BadField(field, f"test {i}: output is not a JSON value ({e})") from None
        return {"input": args, "output": out, "testtype": "functional"}
    raise BadField(field, f"test {i}: testtype {tt!r} is not 'stdin' or 'functional'")


def iso_contest_date(value: Any) -> str:
    """contest_date -> ISO text; accepts ISO strings, datetimes and dates (parquet/arrow sources)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if not isinstance(value, str) or not value.strip():
        raise BadField("contest_date", f"missing or not text: {value!r}")
    text = value.strip().replace("Z", "+00:00")
    try:
        (date.fromisoformat if len(text) == 10 else datetime.fromisoformat)(text)
    except ValueError:
        raise BadField("contest_date", f"not an ISO date: {value!r}") from None
    return text


def _parse_bound(name: str, value: str | date | None) -> date | None:
    if value is None or value == "":
        return None
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        raise ValueError(f"livecodebench {name}={value!r} is not an ISO date (YYYY-MM-DD)") from None


def convert_row(rec: dict[str, Any], *, origin: Origin, release: int, prelude: bool = True) -> dict[str, Any]:
    """One native LiveCodeBench record -> one problem row (raises BadField naming the field)."""
    rec = plain_record(require_record(rec))
    for key in ("question_content", "question_id", "platform"):
        if not isinstance(rec.get(key), str) or not rec[key].strip():
            raise BadField(key, "missing or empty")
    contest_date = iso_contest_date(rec.get("contest_date"))
    difficulty = rec.get("difficulty")
    if difficulty not in LEVELS:
        raise BadField("difficulty", f"{difficulty!r} is not one of {sorted(LEVELS)}")
    raw_meta = rec.get("metadata") or "{}"
    try:
        meta_src = json.loads(raw_meta) if isinstance(raw_meta, str) else dict(raw_meta)
    except (ValueError, TypeError) as e:
        raise BadField("metadata", f"not a JSON object ({e})") from None
    if not isinstance(meta_src, dict):
        raise BadField("metadata", "not a JSON object")
    public = [
        convert_test(t, "public_test_cases", i)
        for i, t in enumerate(_parse_tests(rec.get("public_test_cases"), "public_test_cases"))
    ]
    private = [
        convert_test(t, "private_test_cases", i)
        for i, t in enumerate(_parse_tests(rec.get("private_test_cases"), "private_test_cases"))
    ]
    tests = public + private
    if not tests:
        raise BadField("public_test_cases", "no tests (public and private both empty)")
    types = {t["testtype"] for t in tests}
    if len(types) > 1:
        raise BadField("private_test_cases", f"mixed test types {sorted(types)}")
    functional = types == {"functional"}
    fn_name = meta_src.get("func_name")
    if functional and not (isinstance(fn_name, str) and fn_name.strip()):
        raise BadField("metadata", "functional tests need metadata.func_name")
    starter = rec.get("starter_code") or ""
    if not isinstance(starter, str):
        raise BadField("starter_code", f"expected a string, got {type(starter).__name__}")
    meta = {
        "file": origin.file,
        "row": origin.row,
        "release": release,
        "question_title": rec.get("question_title"),
        "question_id": rec["question_id"],
        "contest_id": rec.get("contest_id"),
        "num_public_tests": len(public),
        "num_private_tests": len(private),
        "source_metadata": meta_src,
        "prelude": BENCHMARK if prelude else None,
    }
    return {
        "problem_id": f"livecodebench/{rec['question_id']}",
        "benchmark": BENCHMARK,
        "split": "test",
        "kind": "code_call" if functional else "code_stdio",
        "prompt": rec["question_content"],
        "starter_code": starter,
        "fn_name": fn_name.strip() if functional else None,
        "tests": json.dumps(tests),
        "answer": None,
        "difficulty": difficulty,
        "difficulty_level": LEVELS[difficulty],
        "contest_date": contest_date,
        "source": rec["platform"],
        "metadata": json.dumps(meta, default=str),
    }


def _version_paths(source: str, versions: list[int], hub_options: dict[str, Any]) -> list[tuple[int, Path]]:
    p = Path(source).expanduser()
    if p.is_file():
        # one file: its release comes from its name (test.jsonl -> 1, test5.jsonl -> 5)
        m = re.fullmatch(r"test(\d*)\.jsonl", p.name)
        rel = int(m.group(1) or 1) if m else None
        if rel is not None and rel not in versions:
            return []
        return [(rel or 0, p)]
    if p.is_dir():
        out = []
        for v in versions:
            f = p / version_file(v)
            if not f.is_file():
                raise DataError(f"{f}: missing; release v{v} needs this file (selected versions: {versions})")
            out.append((v, f))
        return out
    if source.startswith((".", "/", "~")) or source.endswith((".jsonl", ".json")):
        raise DataError(f"{source}: no such file or folder")
    # hub: download just the release files we need, then read them like local files
    from huggingface_hub import hf_hub_download

    out = []
    for v in versions:
        try:
            local = hf_hub_download(source, version_file(v), repo_type="dataset", **hub_options)
        except Exception as e:
            raise DataError(
                f"hub:{source}/{version_file(v)}: cannot download ({type(e).__name__}: {e})"
            ) from None
        out.append((v, Path(local)))
    return out


def load(
    source: str | None = None,
    *,
    version: str = "release_v6",
    date_from: str | date | None = None,
    date_to: str | date | None = None,
    prelude: bool = True,
    on_bad_rows: OnBadRows = "error",
    hub_options: dict[str, Any] | None = None,
) -> LoadResult:
    """Load LiveCodeBench from a local folder (test.jsonl, test2.jsonl, ...), one such file, or the hub
    id (default livecodebench/code_generation_lite), selecting releases and a contest-date window.
    ``prelude``: programs run after lcb_runner's import block."""
    source = str(source or HUB_ID)
    versions = select_versions(version)
    lo, hi = _parse_bound("date_from", date_from), _parse_bound("date_to", date_to)
    if lo and hi and lo > hi:
        raise ValueError(f"livecodebench date_from={lo} is after date_to={hi}")
    paths = _version_paths(source, versions, dict(hub_options or {}))
    filtered: dict[str, int] = {}

    def records() -> Iterator[tuple[Origin, tuple[Origin, int, dict[str, Any]]]]:
        for rel, path in paths:
            for origin, rec in read_file(path):
                yield origin, (origin, rel, rec)

    def convert(item: tuple[Origin, int, dict[str, Any]]) -> dict[str, Any] | None:
        origin, rel, rec = item
        row = convert_row(rec, origin=origin, release=rel, prelude=prelude)
        d = date.fromisoformat(row["contest_date"][:10])
        if lo and d < lo:
            filtered["contest_date before date_from"] = filtered.get("contest_date before date_from", 0) + 1
            return None
        if hi and d > hi:
            filtered["contest_date after date_to"] = filtered.get("contest_date after date_to", 0) + 1
            return None
        return row

    return build_table(records(), convert, benchmark=BENCHMARK, on_bad_rows=on_bad_rows, filtered=filtered)
