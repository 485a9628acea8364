"""The results store: one row per evaluated sample, safe under concurrent writers and readers.

DuckDB allows one writer per database file, and an evaluation of a checkpoint can take hours, so the
store never shares a writable database between evaluations. Instead every evaluation, keyed by
(run_id, benchmark, step), is one immutable Parquet *part*::

    <root>/samples/<run_id>/<benchmark>/step-<step:08d>.parquet

A writer builds the part under a hidden temporary name in the same folder (``.<name>.<pid>.<nonce>.tmp``),
fsyncs it and renames it over the final name with :func:`os.replace`, which POSIX makes atomic. So:

- idempotent: evaluating the same checkpoint again replaces its part, its rows are never duplicated;
- transactional: a reader sees either the complete old part, the complete new one, or none at all; an
  interrupted (even SIGKILLed) writer leaves only a ``.tmp`` file that no reader globs (and
  :meth:`ResultsStore.clean_stale` removes once its process is gone);
- concurrent: parallel evaluations of different keys write different files; two evaluations of the
  same key both complete and the last rename wins (each part is whole, never a mixture);
- readable while written: a reader is an in-memory DuckDB whose view ``samples`` globs the parts
  afresh on every query (``read_parquet(..., union_by_name=true)``), so it needs no lock on anything.

A part's Parquet footer carries the evaluation's metadata (checkpoint path, sampling options, time)
under the key ``fade.eval``; :meth:`ResultsStore.parts` lists them. It also carries the part's checksum
(``fade.sha256``: :func:`content_digest` of the rows as written), inside the part so that the one rename
replaces data and checksum together; :meth:`ResultsStore.verify` recomputes it from what a reader decodes
and names the part whose rows differ (a flipped bit, a truncated file) before anything is aggregated. The aggregate stage materialises
the samples and every derived table into one DuckDB file (``results.duckdb``) that it, too, writes
under a temporary name and renames, so that file is never seen half-written either.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fade_core.integrity import DamagedFile

# One row per sample. Order and types are the on-disk schema of every part.
SAMPLE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),  # runs/<run_id>, or a name for a checkpoint outside a run
        ("method", pa.string()),  # method label used in tables and figures
        ("seed", pa.int64()),
        ("step", pa.int64()),  # training step of the checkpoint
        ("benchmark", pa.string()),
        ("problem_id", pa.string()),
        ("difficulty_level", pa.string()),  # easy / medium / hard / unknown (problem table)
        ("sample_index", pa.int64()),  # 0..n-1 within the problem
        ("completion", pa.string()),
        ("status", pa.string()),  # the verifier's verdict status
        ("passed", pa.bool_()),  # the verifier's verdict: counts as correct for pass@k
        ("reward", pa.float64()),  # in [0, 1]
        ("tokens", pa.int64()),  # completion length in tokens
        ("finish_reason", pa.string()),
        ("latency_s", pa.float64()),  # seconds: generation share + scoring of this sample
    ]
)
SAMPLE_COLUMNS: tuple[str, ...] = tuple(SAMPLE_SCHEMA.names)
KEY_COLUMNS = ("run_id", "benchmark", "step")
META_KEY = b"fade.eval"
CHECKSUM_KEY = b"fade.sha256"
_SAFE = re.compile(r"[^A-Za-z0-9._=+,()@-]")


class StoreError(ValueError):
    """A malformed evaluation or store; the message names the column / file."""


@dataclass(frozen=True)
class EvalKey:
    """The identity of one evaluation: a run's checkpoint at ``step`` on ``benchmark``."""

    run_id: str
    benchmark: str
    step: int


@dataclass(frozen=True)
class PartInfo:
    """One committed evaluation part."""

    key: EvalKey
    path: Path
    num_rows: int
    metadata: dict[str, Any]


def safe_name(text: str) -> str:
    """A file-system-safe rendering of a run id or benchmark name (other characters become ``_``)."""
    if not text:
        raise StoreError("empty run_id/benchmark name")
    out = _SAFE.sub("_", text)
    return "_" + out if out.startswith(".") else out


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    return True


def validate_samples(df: pd.DataFrame) -> EvalKey:
    """Check a samples frame against :data:`SAMPLE_SCHEMA`; return its single evaluation key.

    Raises :class:`StoreError` naming the column or row: missing columns, nulls in key columns, more than
    one (run_id, benchmark, step), duplicate (problem_id, sample_index), rewards outside [0, 1].
    """
    missing = [c for c in SAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise StoreError(f"samples frame lacks columns {missing}")
    if df.empty:
        raise StoreError("samples frame is empty: nothing to store")
    for c in ("run_id", "method", "seed", "step", "benchmark", "problem_id", "sample_index", "passed", "reward"):
        nulls = df[c].isna()
        if nulls.any():
            raise StoreError(f"column {c!r} is null at row {int(nulls.to_numpy().nonzero()[0][0])}")
    keys = df[list(KEY_COLUMNS)].drop_duplicates()
    if len(keys) != 1:
        raise StoreError(f"a part holds one (run_id, benchmark, step); got {len(keys)}: {keys.head(5).to_dict('records')}")
    dup = df.duplicated(["problem_id", "sample_index"])
    if dup.any():
        r = df[dup].iloc[0]
        raise StoreError(f"duplicate sample (problem_id={r.problem_id!r}, sample_index={r.sample_index})")
    bad = (df["reward"] < 0) | (df["reward"] > 1)
    if bad.any():
        r = df[bad].iloc[0]
        raise StoreError(f"reward {r.reward} outside [0, 1] (problem_id={r.problem_id!r}, sample_index={r.sample_index})")
    k = keys.iloc[0]
    return EvalKey(str(k.run_id), str(k.benchmark), int(k.step))


def to_arrow(df: pd.DataFrame, metadata: Mapping[str, Any] | None = None) -> pa.Table:
    """The samples frame as an Arrow table with the store's schema (and ``fade.eval`` metadata and the
    ``fade.sha256`` checksum of its rows)."""
    try:
        table = pa.Table.from_pandas(df[list(SAMPLE_COLUMNS)], schema=SAMPLE_SCHEMA, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise StoreError(f"samples frame does not fit the store schema: {e}") from e
    meta_json = json.dumps(dict(metadata or {}), default=str, sort_keys=True).encode()
    meta = {META_KEY: meta_json, CHECKSUM_KEY: content_digest(table, meta_json).encode()}
    return table.replace_schema_metadata(meta)


def content_digest(table: pa.Table, metadata: bytes = b"") -> str:
    """sha256 (hex) of a table's column names, types, nulls and values (and of the part's ``fade.eval``
    metadata), independent of how its rows are chunked: the same rows give the same digest whether built
    in memory or decoded from a Parquet file. Strings are hashed as their UTF-8 lengths then bytes; other
    columns as their little-endian values."""
    h = hashlib.sha256(metadata)
    for name, column in zip(table.column_names, table.columns, strict=True):
        arr = column.combine_chunks() if column.num_chunks else pa.array([], type=column.type)
        h.update(f"{name}\0{arr.type}\0{len(arr)}\0".encode())
        h.update(np.packbits(arr.is_null().to_numpy(zero_copy_only=False)).tobytes())
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            values = [v.encode() for v in arr.fill_null("").to_pylist()]
            h.update(np.array([len(v) for v in values], dtype="<i8").tobytes())
            h.update(b"".join(values))
        else:
            filled = arr.fill_null(False if pa.types.is_boolean(arr.type) else 0)
            h.update(np.ascontiguousarray(filled.to_numpy(zero_copy_only=False)).astype(
                filled.to_numpy(zero_copy_only=False).dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()


@lru_cache(maxsize=1)
def _sample_column_types() -> list[tuple[str, str]]:
    """(column, DuckDB type) of a part as written: what :func:`_column_types` reads from an intact part."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "empty.parquet"
        pq.write_table(SAMPLE_SCHEMA.empty_table(), path)
        return _column_types(path)


def _column_types(path: Path) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a Parquet file, from its footer as DuckDB reads it (DuckDB trusts the
    legacy converted types, which pyarrow's stored schema would mask)."""
    with duckdb.connect() as con:
        rows = con.execute("SELECT name, duckdb_type FROM parquet_schema(?) WHERE num_children IS NULL",
                           [str(path)]).fetchall()
    return [(str(n), str(t)) for n, t in rows]


def verify_part(path: str | Path) -> bool:
    """Decode a part with both readers the store uses (pyarrow, and DuckDB, which the aggregate queries
    with) and compare each one's rows with the ``fade.sha256`` recorded when it was written; raise
    :class:`~fade_core.integrity.DamagedFile` naming the part when they differ or it cannot be decoded
    (the two readers trust different parts of a damaged footer). False: a part written before checksums
    existed (nothing to compare with)."""
    path = Path(path)
    try:
        table = pq.read_table(path)
        column_types = _column_types(path)
        with duckdb.connect() as con:
            literal = str(path).replace("'", "''")
            duck = con.sql(f"SELECT {', '.join(SAMPLE_COLUMNS)} FROM read_parquet('{literal}')").to_arrow_table()
    except (pa.ArrowException, OSError, ValueError, duckdb.Error) as e:
        raise DamagedFile(path, f"cannot be decoded as Parquet ({type(e).__name__}: {e})") from e
    meta = table.schema.metadata or {}
    recorded = meta.get(CHECKSUM_KEY)
    if recorded is None:
        return False
    if column_types != _sample_column_types():
        raise DamagedFile(path, "its Parquet column types differ from the store's schema")
    expected = recorded.decode(errors="replace")
    plain = table.replace_schema_metadata(None)
    try:
        duck = duck.cast(plain.schema)
    except (pa.ArrowException, ValueError) as e:
        raise DamagedFile(path, f"DuckDB decodes other column types ({e})") from e
    for decoded in (plain, duck):
        if content_digest(decoded, meta.get(META_KEY, b"")) != expected:
            raise DamagedFile(path, "its rows differ from the sha256 recorded when it was written (bits changed since)")
    return True


class ResultsStore:
    """The evaluation results under ``root`` (``results/`` by default).

    Writers: :meth:`write` (one evaluation, atomically). Readers: :meth:`connect` (a DuckDB connection
    with a live ``samples`` view), :meth:`read`, :meth:`parts`. Any number of both may run at once.
    """

    def __init__(self, root: str | Path, group: str | None = None) -> None:
        """``group`` (optional) puts this writer's parts one folder deeper, ``samples/<group>/<run_id>/...``,
        so that several pipeline stages (DVC's evaluate@<arm>) own disjoint folders; readers see every
        group."""
        self.root = Path(root)
        self.samples_dir = self.root / "samples"
        self.group = safe_name(group) if group else None

    # ----------------------------------------------------------------------------------- layout
    def part_path(self, key: EvalKey) -> Path:
        """``<root>/samples/[<group>/]<run_id>/<benchmark>/step-<step:08d>.parquet``."""
        if key.step < 0:
            raise StoreError(f"step must be >= 0, got {key.step}")
        base = self.samples_dir / self.group if self.group else self.samples_dir
        return base / safe_name(key.run_id) / safe_name(key.benchmark) / f"step-{key.step:08d}.parquet"

    @property
    def glob(self) -> str:
        """The pattern that matches committed parts only (temporary files end in ``.tmp``)."""
        return str(self.samples_dir / "**" / "step-*.parquet")

    # ----------------------------------------------------------------------------------- writes
    def write(self, samples: pd.DataFrame, metadata: Mapping[str, Any] | None = None, *, row_group_size: int = 65536) -> Path:
        """Store one evaluation atomically, replacing any earlier part of the same key. Returns its path."""
        key = validate_samples(samples)
        table = to_arrow(samples.sort_values(["problem_id", "sample_index"], kind="stable"), metadata)
        final = self.part_path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            with open(tmp, "wb") as fh:
                pq.write_table(table, fh, row_group_size=row_group_size, compression="zstd")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(final.parent)
        return final

    def delete(self, key: EvalKey) -> bool:
        """Remove one evaluation's part (atomic: the unlink). True when there was one."""
        p = self.part_path(key)
        if p.exists():
            p.unlink()
            _fsync_dir(p.parent)
            return True
        return False

    def clean_stale(self, *, older_than_s: float = 0.0) -> list[Path]:
        """Remove temporary files left by writers that died (their pid is gone); returns what it removed."""
        removed = []
        now = time.time()
        for tmp in self.samples_dir.rglob(".*.tmp"):
            try:
                pid = int(tmp.name.split(".")[-3])
            except (ValueError, IndexError):
                continue
            if not _pid_alive(pid) and now - tmp.stat().st_mtime >= older_than_s:
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
        return removed

    # ------------------------------------------------------------------------------------ reads
    def part_files(self) -> list[Path]:
        return sorted(self.samples_dir.rglob("step-*.parquet"))

    def parts(self, *, skip_damaged: bool = False) -> list[PartInfo]:
        """Every committed evaluation with its row count and ``fade.eval`` metadata. A part that cannot be
        decoded raises :class:`~fade_core.integrity.DamagedFile` naming it, or (``skip_damaged``, a resume
        that will redo it) is left out; :meth:`verify` checks the rows too."""
        out = []
        for p in self.part_files():
            try:
                md = pq.read_metadata(p)
                raw = (md.metadata or {}).get(META_KEY, b"{}")
                meta = json.loads(raw)
                first = pq.read_table(p, columns=list(KEY_COLUMNS)).slice(0, 1).to_pylist()
            except FileNotFoundError:  # deleted between glob and open
                continue
            except (pa.ArrowException, OSError, ValueError) as e:
                if skip_damaged:
                    continue
                raise DamagedFile(p, f"cannot be decoded as Parquet ({type(e).__name__}: {e})") from e
            if not first:
                continue
            k = first[0]
            out.append(PartInfo(EvalKey(k["run_id"], k["benchmark"], int(k["step"])), p, md.num_rows, meta))
        return out

    def verify(self) -> int:
        """Check every committed part against its checksum (:func:`verify_part`); raise DamagedFile naming
        the first damaged one. Returns how many parts carried a checksum."""
        return sum(verify_part(p) for p in self.part_files())

    def intact(self, path: str | Path) -> bool:
        """Whether a part decodes to the rows its checksum records (False: damaged; a resume redoes it)."""
        try:
            verify_part(path)
        except DamagedFile:
            return False
        return True

    def has(self, key: EvalKey) -> bool:
        return self.part_path(key).exists()

    def connect(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection (in-memory unless given) with the view ``samples`` over every committed part.

        The view re-globs on every query, so it sees parts committed later. If the store has no part yet
        the view is empty with the right columns; call again once parts exist.
        """
        con = con if con is not None else duckdb.connect()
        if self.part_files():
            glob = self.glob.replace("'", "''")
            sql = f"SELECT {', '.join(SAMPLE_COLUMNS)} FROM read_parquet('{glob}', union_by_name = true)"
        else:
            sql = "SELECT * FROM empty_samples"
            con.register("empty_samples_arrow", SAMPLE_SCHEMA.empty_table())
            con.execute("CREATE OR REPLACE TEMP TABLE empty_samples AS SELECT * FROM empty_samples_arrow")
            con.unregister("empty_samples_arrow")
        con.execute(f"CREATE OR REPLACE TEMP VIEW samples AS {sql}")
        return con

    def query(self, sql: str, params: list[Any] | None = None, *, retries: int = 5) -> pd.DataFrame:
        """Run ``sql`` (which may use the view ``samples``) and return a DataFrame.

        A part deleted or replaced between DuckDB's glob and its open is retried (it is a benign race).
        """
        for attempt in range(retries + 1):
            con = self.connect()
            try:
                return con.execute(sql, params or []).df()
            except duckdb.IOException:
                if attempt == retries:
                    raise
                time.sleep(0.05 * (attempt + 1))
            finally:
                con.close()
        raise AssertionError("unreachable")  # pragma: no cover

    def read(self) -> pd.DataFrame:
        """Every committed sample as one DataFrame (ordered by key, problem, sample)."""
        return self.query(
            "SELECT * FROM samples ORDER BY run_id, benchmark, step, problem_id, sample_index"
        )


@contextmanager
def atomic_duckdb(path: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB database built under a temporary name and renamed over ``path`` on success.

    Readers of ``path`` see the old file or the complete new one; on an exception nothing is replaced.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
    con = duckdb.connect(str(tmp))
    try:
        yield con
        con.execute("CHECKPOINT")
        con.close()
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write a file under a temporary name and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
