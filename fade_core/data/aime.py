"""AIME: American Invitational Mathematics Examination problems, answers integers 0..999.

Common published layouts, all read by the same converter (field names matched case-insensitively):

    problem / answer / id / url / year [/ solution]     (e.g. HuggingFaceH4/aime_2024)
    question / answer                                   (e.g. opencompass/AIME2025, one file per exam)
    Problem / Answer / ID ("2024-I-4") [/ Solution]     (e.g. Maxwell-Jia/AIME_2024)
    id / problem / solution / answer / url              (e.g. AI-MO/aimo-validation-aime)

Answers come as int or string ("033", "33", "$33$", "\\boxed{033}", "\\fbox{33}") and are normalized to the integer's
decimal text ("33"); anything that is not an integer in 0..999 is a bad row (field ``answer``).

Year, exam (I/II) and problem number are taken, in order, from: explicit columns (year), the id
("2024-I-4"), the AoPS url (".../2024_AIME_I_Problems/Problem_4"), the file name and then the names of
its folders ("aime2025-II.jsonl", "aime25.jsonl", "aime_2025/test.jsonl", "AIME2025-I.parquet": a
two-digit year right after "aime" is 20xx; elsewhere a year needs four digits), or ``year=``
(params.yaml ``data.aime_year``), which overrides them all for a file that says nothing or says it
wrong.
problem_id is ``aime/<year>-<exam>-<number>`` when all three are known, else ``aime/<id>``, else
``aime/<file stem>/<row>``. Filtering by ``years`` needs a known year for every row: a row whose year
cannot be told is a bad row rather than silently kept or lost (pass ``year=`` for a one-year file).

difficulty: the problem's position in its exam ("problem 4"); AIME problems get harder in order, so
difficulty_level is easy for 1-5, medium for 6-10, hard for 11-15, unknown when the number is unknown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

BENCHMARK = "aime"
HUB_ID = "HuggingFaceH4/aime_2024"

_ID = re.compile(
    r"(?P<year>(?:19|20)\d\d)[-_ ]?(?:AIME[-_ ]?)?(?P<exam>I{1,2})?[-_ ]?(?:Problem[-_ ]?)?(?P<num>\d{1,2})?",
    re.I,
)
_URL = re.compile(
    r"(?P<year>(?:19|20)\d\d)_AIME(?:_(?P<exam>I{1,2}))?_Problems/Problem_(?P<num>\d{1,2})", re.I
)
_AIME_NAME = re.compile(
    r"aime[-_ ]?(?P<year>(?:19|20)\d\d|\d\d)(?!\d)(?:[-_ ]?(?P<exam>I{1,2})(?![a-z]))?", re.I
)
_YEAR_NAME = re.compile(r"(?<!\d)(?P<year>(?:19|20)\d\d)(?!\d)(?:[-_ ]?(?P<exam>I{1,2})(?![a-z]))?", re.I)
_BOXED = re.compile(r"\\(?:boxed|fbox|framebox)\s*\{([^{}]*)\}")


def normalize_answer(value: Any) -> str:
    """An AIME answer -> the decimal text of an integer in 0..999 ("033" -> "33"); raises BadField."""
    if isinstance(value, bool):
        raise BadField("answer", f"not an integer: {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        s = value.strip()
        m = _BOXED.search(s)
        if m:
            s = m.group(1)
        s = s.strip().strip("$").strip()
        if not re.fullmatch(r"\d{1,3}", s):
            raise BadField("answer", f"not an integer 0..999: {value!r}")
        n = int(s)
    else:
        raise BadField("answer", f"missing or not an integer: {value!r}")
    if not 0 <= n <= 999:
        raise BadField("answer", f"{n} is outside 0..999")
    return str(n)


def _field(rec: dict[str, Any], *names: str) -> Any:
    lower = {str(k).lower(): v for k, v in rec.items()}
    for n in names:
        v = lower.get(n)
        if v is not None and v != "":
            return v
    return None


def name_year(names: list[str]) -> re.Match[str] | None:
    """The year (and exam) a file or folder name tells, looking at ``names`` in order (the file's
    stem first, then its folders, innermost first). A year right after "aime" (two or four digits)
    counts in any of them; a bare four-digit year only in the file's own name (a folder such as
    /tmp/run2019x says nothing about AIME)."""
    for i, name in enumerate(names):
        m = _AIME_NAME.search(name) or (_YEAR_NAME.search(name) if i == 0 else None)
        if m:
            return m
    return None


def identify(rec: dict[str, Any], names: list[str] | str) -> dict[str, Any]:
    """(year, exam, number) from the row's fields, id, url, then the file and folder ``names``
    (see :func:`name_year`); unknown -> None."""
    found: dict[str, Any] = {"year": None, "exam": None, "number": None}

    def take(m: re.Match[str] | None) -> None:
        if not m:
            return
        for k, g in (("year", "year"), ("exam", "exam"), ("number", "num")):
            v = m.groupdict().get(g)
            if v and found[k] is None:
                if k == "year":
                    found[k] = 2000 + int(v) if len(v) == 2 else int(v)
                else:
                    found[k] = int(v) if k == "number" else v.upper()

    y = _field(rec, "year")
    if y is not None:
        try:
            found["year"] = int(str(y).strip())
        except ValueError:
            raise BadField("year", f"not a year: {y!r}") from None
    rid = _field(rec, "id")
    if isinstance(rid, str):
        take(_ID.fullmatch(rid.strip()))
    url = _field(rec, "url", "link")
    if isinstance(url, str):
        take(_URL.search(url))
    take(name_year([names] if isinstance(names, str) else names))
    if found["number"] is None:
        n = _field(rec, "problem_number", "number")
        if isinstance(n, int) or (isinstance(n, str) and n.isdigit()):
            found["number"] = int(n)
    return found


def level_of(number: int | None) -> str:
    if number is None or not 1 <= number <= 15:
        return "unknown"
    return "easy" if number <= 5 else "medium" if number <= 10 else "hard"


def convert_row(
    rec: dict[str, Any],
    *,
    origin: Origin,
    file_stem: str,
    year: int | None = None,
    folders: tuple[str, ...] = (),
    split: str = "test",
) -> dict[str, Any]:
    """One AIME record in any known layout -> one problem row of split ``split`` (raises BadField).
    ``folders``: the names of the file's folders, innermost first (a year may be there: ``aime25/test.jsonl``)."""
    rec = plain_record(require_record(rec))
    text = _field(rec, "problem", "question", "prompt")
    if not isinstance(text, str) or not text.strip():
        raise BadField("problem", "missing or empty (looked for problem / question / prompt)")
    raw_answer = _field(rec, "answer", "final_answer")
    if raw_answer is None:
        raise BadField("answer", "missing")
    answer = normalize_answer(raw_answer)
    ident = identify(rec, [file_stem, *folders])
    if year is not None:
        ident["year"] = year
    rid = _field(rec, "id")
    if ident["year"] and ident["exam"] and ident["number"]:
        pid = f"aime/{ident['year']}-{ident['exam']}-{ident['number']}"
    elif rid is not None:
        pid = f"aime/{rid}"
    else:
        pid = f"aime/{file_stem}/{origin.row}"
    meta = {
        "file": origin.file,
        "row": origin.row,
        "id": rid,
        "year": ident["year"],
        "exam": ident["exam"],
        "number": ident["number"],
        "url": _field(rec, "url", "link"),
        "solution": _field(rec, "solution"),
    }
    return {
        "problem_id": pid,
        "benchmark": BENCHMARK,
        "split": split,
        "kind": "math",
        "prompt": text,
        "starter_code": "",
        "fn_name": None,
        "tests": "[]",
        "answer": answer,
        "difficulty": f"problem {ident['number']}" if ident["number"] else "unknown",
        "difficulty_level": level_of(ident["number"]),
        "contest_date": f"{ident['year']}-01-01" if ident["year"] else None,
        "source": "aime",
        "metadata": json.dumps(meta, default=str),
    }


def load(
    source: str | None = None,
    *,
    years: list[int] | tuple[int, ...] | None = None,
    year: int | None = None,
    split: str = "train",
    assign_split: str = "test",
    on_bad_rows: OnBadRows = "error",
    hub_options: dict[str, Any] | None = None,
) -> LoadResult:
    """Load AIME problems from a local file/folder in any known layout, or a hub id (default
    HuggingFaceH4/aime_2024, the hub's split ``split``). ``years``: keep only these years (empty: all);
    ``year``: the year of every row (for files that do not say it); ``assign_split``: the split of
    every row in the problem table (params.yaml ``data.aime_split``: test to evaluate, train to train on).

    contest_date is January 1st of the exam year: a coarse date for date windows (exams are in Feb)."""
    src = str(source or HUB_ID)
    keep = set(years or ())
    if year is not None and not 1983 <= int(year) <= 2100:
        raise ValueError(f"aime year={year!r} is not an AIME year (the AIME started in 1983)")
    p = Path(src).expanduser()
    notes: list[str] = []

    def folders_of(f: Path) -> tuple[str, ...]:
        return tuple(reversed(f.resolve().parent.parts[-3:]))

    if p.is_dir():
        files = data_files(p)
        if not files:
            raise DataError(f"{src}: no data files (.jsonl, .json, .parquet) in this folder")
        streams = [(f.name.split(".")[0], folders_of(f), read_file(f, notes=notes)) for f in files]
    elif p.is_file():
        streams = [(p.name.split(".")[0], folders_of(p), read_file(p, notes=notes))]
    elif src.startswith((".", "/", "~")) or src.endswith((".jsonl", ".json", ".parquet")):
        raise DataError(f"{src}: no such file or folder")
    else:
        streams = [(src.rsplit("/", 1)[-1], (), read_hub(src, split, **dict(hub_options or {})))]
    filtered: dict[str, int] = {}

    def records() -> Iterator[tuple[Origin, tuple[Origin, str, tuple[str, ...], dict[str, Any]]]]:
        for stem, folders, stream in streams:
            for origin, rec in stream:
                yield origin, (origin, stem, folders, rec)

    def convert(item: tuple[Origin, str, tuple[str, ...], dict[str, Any]]) -> dict[str, Any] | None:
        origin, stem, folders, rec = item
        row = convert_row(rec, origin=origin, file_stem=stem, year=year, folders=folders, split=assign_split)
        if keep:
            y = json.loads(row["metadata"])["year"]
            if y is None:
                raise BadField(
                    "year",
                    f"unknown (no year/id/url/file or folder name tells it), cannot apply years={sorted(keep)}; "
                    "give it with data.aime_year (year=)",
                )
            if y not in keep:
                filtered["year not selected"] = filtered.get("year not selected", 0) + 1
                return None
        return row

    return build_table(
        records(), convert, benchmark=BENCHMARK, on_bad_rows=on_bad_rows, filtered=filtered, notes=notes
    )
