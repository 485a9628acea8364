"""What the generic loaders (``math``: generic_math, ``code``: generic_code) share: reading a user's files,
finding a field under its common names, naming rows, and giving each row a split.

A generic benchmark is named ``math`` / ``code``, or ``math-<name>`` / ``code-<name>`` to keep several
(``math-gsm8k`` and ``math-competition``); the name is the table's ``benchmark`` column and the prefix of
its problem ids. Its source (``data.sources.<name>``) is a local file or folder (.jsonl, .json, .parquet,
.arrow; every file of a folder) or a hub dataset id (split ``train``).

Splits: a row's own ``split`` field when it has one; else ``test`` for a share ``test_fraction`` of rows
chosen by a stable hash of the problem id (the same rows whatever the file order or machine), else
``train``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fade_core.data.reading import data_files, plain_record, read_file, read_hub
from fade_core.data.schema import BadField, DataError, Origin, require_record

GENERIC_LOADERS = ("math", "code")
_LEVEL_NUMBER = re.compile(r"(?:level|lvl)\s*(\d+)", re.I)


def generic_kind(benchmark: str) -> str | None:
    """``math`` or ``code`` when ``benchmark`` is read by that generic loader (the name itself, or the name
    followed by ``-<anything>``), else None."""
    head = benchmark.split("-", 1)[0]
    if head in GENERIC_LOADERS and (benchmark == head or len(benchmark) > len(head) + 1):
        return head
    return None


def field(rec: Mapping[str, Any], *names: str) -> Any:
    """The first of ``names`` present (case-insensitive) with a value that is not None or ""."""
    lower = {str(k).lower(): v for k, v in rec.items()}
    for n in names:
        v = lower.get(n)
        if v is not None and v != "":
            return v
    return None


def text_field(rec: Mapping[str, Any], names: tuple[str, ...], label: str) -> str:
    """A required non-empty text field (raises BadField ``label`` naming the names looked for)."""
    v = field(rec, *names)
    if not isinstance(v, str) or not v.strip():
        raise BadField(label, f"missing or empty (looked for {' / '.join(names)})")
    return v


def stable_fraction(key: str) -> float:
    """A number in [0, 1) fixed by ``key`` (sha256), for hash splits."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 2**32


def split_of(rec: Mapping[str, Any], problem_id: str, test_fraction: float) -> str:
    """The row's own ``split``, else ``test`` for a stable ``test_fraction`` share of problem ids, else ``train``."""
    own = field(rec, "split")
    if own is not None:
        if not isinstance(own, str) or not own.strip():
            raise BadField("split", f"not a split name: {own!r}")
        return own.strip()
    return "test" if stable_fraction(problem_id) < test_fraction else "train"


def difficulty_of(rec: Mapping[str, Any]) -> tuple[str, str]:
    """(difficulty as the source says it, easy / medium / hard / unknown): a label easy/medium/hard as it is,
    MATH's "Level 1".."Level 5" as easy (1-2), medium (3), hard (4-5)."""
    raw = field(rec, "difficulty", "level")
    if raw is None:
        return "unknown", "unknown"
    text = str(raw).strip()
    low = text.lower()
    if low in ("easy", "medium", "hard"):
        return text, low
    m = _LEVEL_NUMBER.search(text) or re.fullmatch(r"(\d+)", text)
    if m:
        n = int(m.group(1))
        return text, "easy" if n <= 2 else "medium" if n == 3 else "hard"
    return text, "unknown"


def row_id(rec: Mapping[str, Any], benchmark: str, stem: str, origin: Origin) -> tuple[str, Any]:
    """(problem_id, the source's own id or None): ``<benchmark>/<id>``, else ``<benchmark>/<file stem>/<row>``."""
    rid = field(rec, "id", "problem_id", "unique_id", "task_id", "idx")
    if rid is not None:
        return f"{benchmark}/{rid}", rid
    return f"{benchmark}/{stem}/{origin.row}", None


def records(source: str | None, benchmark: str, notes: list[str], hub_options: dict[str, Any] | None = None,
            ) -> Iterator[tuple[Origin, tuple[Origin, str, dict[str, Any]]]]:
    """(origin, (origin, file stem, plain record)) of every row of a generic source (see the module
    docstring); a missing source raises DataError naming the option to set."""
    if not source:
        raise DataError(f"benchmark {benchmark!r} reads your own files: set data.sources.{benchmark} "
                        "to a local file or folder (or a hub dataset id)")
    src = str(source)
    p = Path(src).expanduser()
    if p.is_dir():
        files = data_files(p)
        if not files:
            raise DataError(f"{src}: no data files (.jsonl, .json, .parquet, .arrow) in this folder")
        streams = [(f.name.split(".")[0], read_file(f, notes=notes)) for f in files]
    elif p.is_file():
        streams = [(p.name.split(".")[0], read_file(p, notes=notes))]
    elif src.startswith((".", "/", "~")) or src.endswith((".jsonl", ".json", ".parquet", ".arrow")):
        raise DataError(f"{src}: no such file or folder")
    else:
        streams = [(src.rsplit("/", 1)[-1], read_hub(src.removeprefix("hub:"), "train", **dict(hub_options or {})))]
    for stem, stream in streams:
        for origin, rec in stream:
            yield origin, (origin, stem, rec)


def plain(rec: Any) -> dict[str, Any]:
    """A source record as a plain dict (raises BadField('<record>') when it could not be parsed)."""
    return plain_record(require_record(rec))
