"""Reading source records: local files in a source's native layout, or a hub dataset.

Every loader goes through the same two steps: read records (plain dicts) tagged with their
:class:`~fade_core.data.schema.Origin` (file, row, line), then convert them row by row. Local formats:

    *.jsonl, *.jsonl.gz     one JSON object per line (blank lines skipped; line numbers kept; a line
                            that is not a JSON object becomes a bad row, field '<record>')
    *.json                  a JSON list of objects (or JSON lines, when the file is not one document)
    *.parquet               parquet (row numbers kept)
    *.arrow                 an Arrow IPC stream, as ``datasets`` writes (``save_to_disk`` shards, TACO's hub files)

A hub source is loaded with ``datasets.load_dataset`` and tagged ``hub:<id>/<split>``; no test uses it (no
network in tests), but it feeds the same converters.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from fade_core.data.schema import DataError, Origin, Unreadable

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet", ".arrow")
# bookkeeping files that ``datasets.save_to_disk`` writes next to the Arrow shards
DATASETS_METADATA = ("dataset_info.json", "state.json", "dataset_dict.json")


def data_files(folder: Path, *, skip: tuple[str, ...] = ()) -> list[Path]:
    """Readable files under ``folder`` (recursively), sorted by path; names starting with a prefix in
    ``skip`` (sidecar files such as TACO's output_spj.jsonl), hidden files and ``datasets``' own
    bookkeeping files are left out."""
    out = [
        p
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and p.name.endswith(SUFFIXES)
        and p.name not in DATASETS_METADATA
        and not p.name.startswith(skip)
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    ]
    return out


def _decode_json_line(text: str) -> dict[str, Any]:
    """A JSON-lines record, or an Unreadable stand-in (a bad row, not a failed file)."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        return Unreadable(f"not valid JSON ({e})")
    if not isinstance(obj, dict):
        return Unreadable(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def read_file(path: str | Path, *, name: str | None = None) -> Iterator[tuple[Origin, dict[str, Any]]]:
    """Records of one local file, each with its origin (file, 0-based row, 1-based line if any);
    ``name`` replaces the path in origins and messages (e.g. a package-relative label)."""
    p = Path(path).expanduser()
    name = name or str(path)
    if not p.is_file():
        raise DataError(f"{name}: no such file")
    if p.name.endswith((".jsonl", ".jsonl.gz")) or p.name.endswith(".json"):
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rt", encoding="utf-8") as f:
            text = f.read()
        if p.name.endswith(".json"):
            try:
                doc = json.loads(text)
            except ValueError:
                doc = None  # not one document: read as JSON lines below
            if isinstance(doc, list):
                for i, obj in enumerate(doc):
                    yield (
                        Origin(name, i),
                        obj
                        if isinstance(obj, dict)
                        else Unreadable(f"expected a JSON object, got {type(obj).__name__}"),
                    )
                return
            if isinstance(doc, dict):
                raise DataError(f"{name}: expected a JSON list of objects or JSON lines, got one object")
        row = 0
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            yield Origin(name, row, line_no), _decode_json_line(line)
            row += 1
        return
    if p.name.endswith(".parquet"):
        try:
            df = pd.read_parquet(p)
        except Exception as e:  # pyarrow raises several types for a corrupt file
            raise DataError(f"{name}: cannot read parquet ({e})") from None
        for i, rec in enumerate(df.to_dict("records")):
            yield Origin(name, i), rec
        return
    if p.name.endswith(".arrow"):
        import datasets

        try:
            ds = datasets.Dataset.from_file(str(p))
        except Exception as e:
            raise DataError(f"{name}: cannot read Arrow file ({e})") from None
        for i, rec in enumerate(ds):
            yield Origin(name, i), rec
        return
    raise DataError(f"{name}: unsupported file type (read: {', '.join(SUFFIXES)})")


def read_hub(dataset_id: str, split: str, **load_options: Any) -> Iterator[tuple[Origin, dict[str, Any]]]:
    """Records of one split of a hub dataset via ``datasets.load_dataset`` (needs the network or a
    local Hugging Face cache). ``load_options`` pass through (name, revision, data_files, ...)."""
    import datasets

    try:
        ds = datasets.load_dataset(dataset_id, split=split, **load_options)
    except Exception as e:  # network, missing split, unsupported script: name the dataset
        raise DataError(f"hub:{dataset_id} split {split!r}: cannot load ({type(e).__name__}: {e})") from None
    name = f"hub:{dataset_id}/{split}"
    for i, rec in enumerate(ds):
        yield Origin(name, i), rec
