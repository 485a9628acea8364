"""Reading source records: local files in a source's native layout, or a hub dataset.

Every loader goes through the same two steps: read records (plain dicts) tagged with their
:class:`~fade_core.data.schema.Origin` (file, row, line), then convert them row by row. Local formats:

    *.jsonl, *.jsonl.gz     one JSON object per line (blank lines skipped; line numbers kept; a line
                            that is not a JSON object becomes a bad row, field '<record>'). A file
                            that is one JSON array though named .jsonl (as some evaluation repos
                            publish AIME) is read as the array, with a note saying so; one that
                            starts with '[' but does not parse is one clear error, not one per line.
    *.json                  a JSON list of objects (or JSON lines, when the file is not one document)
    *.parquet               parquet (row numbers kept), read with pyarrow so that a null is None
    *.arrow                 an Arrow IPC stream, as ``datasets`` writes (``save_to_disk`` shards, TACO's hub files)

Missing values arrive as None whatever the format: nulls of parquet and Arrow (the hub's TACO leaves
url, name, date... empty) and float NaN (what pandas writes for a missing text) become None, so a
converter never meets a NaN. Notes about how a file was read go to the ``notes`` list a caller passes
(the data card shows them).

A hub source is loaded with ``datasets.load_dataset`` and tagged ``hub:<id>/<split>``; no test uses it (no
network in tests), but it feeds the same converters.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fade_core.data.schema import DataError, Origin, Unreadable

log = logging.getLogger(__name__)
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


def plain_value(v: Any) -> Any:
    """A value read from a columnar file as plain Python: NaN -> None, numpy scalars and arrays ->
    Python numbers and lists (recursively)."""
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if v is None or isinstance(v, (str, int, bool)):
        return v
    if isinstance(v, dict):
        return {k: plain_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain_value(x) for x in v]
    tolist = getattr(v, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return plain_value(tolist())
    return v


def plain_record(rec: Any) -> Any:
    """A record with every field a plain value (see :func:`plain_value`)."""
    return {k: plain_value(v) for k, v in rec.items()} if isinstance(rec, dict) else rec


def _json_array_in_jsonl(text: str, name: str, notes: list[str] | None) -> list[Any] | None:
    """The list, when a .jsonl file is one JSON array; None when it is JSON lines."""
    if not text.lstrip().startswith("["):
        return None
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise DataError(
            f"{name}: starts with '[' like a JSON array but is not valid JSON ({e}); a .jsonl file must "
            "hold one JSON object per line, or be one valid JSON array"
        ) from None
    if not isinstance(doc, list):
        return None
    note = f"{name}: a JSON array, not JSON lines (read as the array of {len(doc)} records)"
    log.info(note)
    if notes is not None:
        notes.append(note)
    return doc


def read_file(
    path: str | Path, *, name: str | None = None, notes: list[str] | None = None
) -> Iterator[tuple[Origin, dict[str, Any]]]:
    """Records of one local file, each with its origin (file, 0-based row, 1-based line if any);
    ``name`` replaces the path in origins and messages (e.g. a package-relative label); notes on how
    the file was read are appended to ``notes``."""
    p = Path(path).expanduser()
    name = name or str(path)
    if not p.is_file():
        raise DataError(f"{name}: no such file")
    if p.name.endswith((".jsonl", ".jsonl.gz")) or p.name.endswith(".json"):
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rt", encoding="utf-8") as f:
            text = f.read()
        array = None if p.name.endswith(".json") else _json_array_in_jsonl(text, name, notes)
        if array is not None:
            for i, obj in enumerate(array):
                yield (
                    Origin(name, i),
                    obj
                    if isinstance(obj, dict)
                    else Unreadable(f"expected a JSON object, got {type(obj).__name__}"),
                )
            return
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
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(p).to_pylist()
        except Exception as e:  # pyarrow raises several types for a corrupt file
            raise DataError(f"{name}: cannot read parquet ({e})") from None
        for i, rec in enumerate(rows):
            yield Origin(name, i), plain_record(rec)
        return
    if p.name.endswith(".arrow"):
        import datasets

        try:
            ds = datasets.Dataset.from_file(str(p))
        except Exception as e:
            raise DataError(f"{name}: cannot read Arrow file ({e})") from None
        for i, rec in enumerate(ds):
            yield Origin(name, i), plain_record(rec)
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
        yield Origin(name, i), plain_record(rec)
