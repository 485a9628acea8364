"""The results store: schema checks, idempotent re-evaluation, atomicity and concurrency with real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fade_core.store import EvalKey, ResultsStore, StoreError, atomic_duckdb

REPO = Path(__file__).resolve().parents[2]


def make_samples(run_id: str, benchmark: str, step: int, problems: int = 5, n: int = 4, version: str = "v0",
                 seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(zlib.crc32(f"{run_id}/{benchmark}/{step}/{version}".encode()))
    rows = []
    for p in range(problems):
        for i in range(n):
            ok = bool(rng.random() < 0.4)
            rows.append(dict(run_id=run_id, method=run_id.split("-")[0], seed=seed, step=step, benchmark=benchmark,
                             problem_id=f"{benchmark}/{p}", difficulty_level="easy", sample_index=i,
                             completion=f"{version}:{p}:{i}", status="passed" if ok else "wrong", passed=ok,
                             reward=float(ok), tokens=int(rng.integers(1, 16)), finish_reason="stop",
                             latency_s=float(rng.random())))
    return pd.DataFrame(rows)


def _child(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{err}"
    return out


# ------------------------------------------------------------------------------------------ basics
def test_write_read_roundtrip_and_metadata(tmp_path):
    store = ResultsStore(tmp_path)
    df = make_samples("grpo-s0-abcdef12", "countdown", 50)
    path = store.write(df, {"checkpoint": "runs/x/checkpoints/step-50", "n_samples": 4})
    assert path == tmp_path / "samples" / "grpo-s0-abcdef12" / "countdown" / "step-00000050.parquet"
    back = store.read()
    assert len(back) == len(df) == 20
    assert sorted(back.completion) == sorted(df.completion)
    assert back.passed.sum() == df.passed.sum()
    (part,) = store.parts()
    assert part.key == EvalKey("grpo-s0-abcdef12", "countdown", 50)
    assert part.num_rows == 20 and part.metadata["n_samples"] == 4


def test_empty_store_has_typed_view(tmp_path):
    store = ResultsStore(tmp_path)
    df = store.read()
    assert df.empty and "problem_id" in df.columns and "passed" in df.columns


def test_rejects_bad_frames(tmp_path):
    store = ResultsStore(tmp_path)
    good = make_samples("a-s0-00000000", "countdown", 1)
    with pytest.raises(StoreError, match="lacks columns"):
        store.write(good.drop(columns=["reward"]))
    with pytest.raises(StoreError, match="one \\(run_id, benchmark, step\\)"):
        store.write(pd.concat([good, make_samples("a-s0-00000000", "countdown", 2)]))
    with pytest.raises(StoreError, match="duplicate sample"):
        store.write(pd.concat([good, good.iloc[:1]]))
    bad = good.copy()
    bad.loc[3, "reward"] = 1.5
    with pytest.raises(StoreError, match="outside \\[0, 1\\]"):
        store.write(bad)
    nul = good.copy()
    nul.loc[2, "problem_id"] = None
    with pytest.raises(StoreError, match="'problem_id' is null at row 2"):
        store.write(nul)
    assert store.part_files() == []


def test_reevaluation_replaces_never_duplicates(tmp_path):
    store = ResultsStore(tmp_path)
    for version in ("v0", "v1", "v2"):
        store.write(make_samples("fade-s1-12345678", "countdown", 100, version=version))
        store.write(make_samples("fade-s1-12345678", "countdown", 200, version=version))
    counts = store.query("SELECT step, count(*) AS n, count(DISTINCT split_part(completion, ':', 1)) AS versions "
                         "FROM samples GROUP BY step ORDER BY step")
    assert counts.n.tolist() == [20, 20]
    assert counts.versions.tolist() == [1, 1]
    assert set(store.read().completion.str[:2]) == {"v2"}
    assert store.delete(EvalKey("fade-s1-12345678", "countdown", 100))
    assert store.query("SELECT count(*) AS n FROM samples").n.item() == 20


def test_atomic_duckdb_leaves_old_file_on_error(tmp_path):
    db = tmp_path / "results.duckdb"
    with atomic_duckdb(db) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    with pytest.raises(RuntimeError), atomic_duckdb(db) as con:
        con.execute("CREATE TABLE t AS SELECT 2 AS x")
        raise RuntimeError("interrupted")
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT x FROM t").fetchall() == [(1,)]
    assert [p.name for p in tmp_path.iterdir()] == ["results.duckdb"]


# ------------------------------------------------------------------------------------- concurrency
_SLOW_WRITER = """
import sys, time
import pyarrow.parquet as pq
sys.path.insert(0, sys.argv[1])
from tests.unit.test_store import make_samples
from fade_core.store import ResultsStore

def slow_write_table(table, where, row_group_size=None, **kw):
    # the same bytes as pq.write_table, but one row group at a time with a pause: a long evaluation
    with pq.ParquetWriter(where, table.schema, **kw) as w:
        for i in range(0, table.num_rows, 50):
            w.write_table(table.slice(i, 50))
            print("chunk", flush=True)
            time.sleep(0.2)

pq.write_table = slow_write_table
ResultsStore(sys.argv[2]).write(make_samples("fade-s0-00000001", "countdown", 10, problems=100, n=10, version="v1"))
print("done", flush=True)
"""


def test_killed_writer_leaves_old_rows_and_nothing_partial(tmp_path):
    store = ResultsStore(tmp_path)
    key = EvalKey("fade-s0-00000001", "countdown", 10)
    store.write(make_samples(key.run_id, key.benchmark, key.step, problems=100, n=10, version="v0"))
    before = store.read()
    proc = _child(_SLOW_WRITER, str(REPO), str(tmp_path))
    folder = store.part_path(key).parent
    deadline = time.time() + 60
    while not list(folder.glob(".*.tmp")) and time.time() < deadline:
        time.sleep(0.05)
    assert list(folder.glob(".*.tmp")), "the writer never started its temporary part"
    proc.stdout.readline()  # at least one row group is on disk
    time.sleep(0.3)
    # mid-write: readers see the complete old version only
    mid = store.read()
    pd.testing.assert_frame_equal(mid, before)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    after = store.read()
    pd.testing.assert_frame_equal(after, before)
    assert store.query("SELECT count(*) AS n FROM samples").n.item() == 1000
    leftovers = list(folder.glob(".*.tmp"))
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > 0
    assert store.clean_stale() == leftovers and not list(folder.glob(".*.tmp"))


_WRITER = """
import sys, json
sys.path.insert(0, sys.argv[1])
from tests.unit.test_store import make_samples
from fade_core.store import ResultsStore
store = ResultsStore(sys.argv[2]); tag = sys.argv[3]; rounds = int(sys.argv[4])
for i in range(rounds):
    store.write(make_samples(f"w{tag}-s0-0000000{i % 10}", "countdown", i, problems=20, n=8, version=f"{tag}{i}"))
    store.write(make_samples("shared-s0-00000000", "countdown", 0, problems=20, n=8, version=f"{tag}{i}"))
print("done", flush=True)
"""

_READER = """
import sys, json, time
sys.path.insert(0, sys.argv[1])
from fade_core.store import ResultsStore
store = ResultsStore(sys.argv[2]); deadline = time.time() + float(sys.argv[3])
queries, seen = 0, set()
while time.time() < deadline:
    df = store.query("SELECT run_id, step, count(*) AS n, count(DISTINCT split_part(completion, ':', 1)) AS v "
                     "FROM samples GROUP BY ALL")
    bad = df[(df.n != 160) | (df.v != 1)]
    assert bad.empty, bad.to_dict("records")
    seen.update(zip(df.run_id, df.step))
    queries += 1
print(json.dumps({"queries": queries, "keys": len(seen)}), flush=True)
"""


def test_reader_while_two_writers_write(tmp_path):
    store = ResultsStore(tmp_path)
    store.write(make_samples("shared-s0-00000000", "countdown", 0, problems=20, n=8, version="init"))
    rounds = 12
    reader = _child(_READER, str(REPO), str(tmp_path), "6")
    w1 = _child(_WRITER, str(REPO), str(tmp_path), "a", str(rounds))
    w2 = _child(_WRITER, str(REPO), str(tmp_path), "b", str(rounds))
    assert "done" in _finish(w1) and "done" in _finish(w2)
    stats = json.loads(_finish(reader).strip().splitlines()[-1])
    assert stats["queries"] >= 3  # the reader really read while the writers wrote
    final = store.query("SELECT run_id, step, count(*) AS n, count(DISTINCT split_part(completion, ':', 1)) AS v "
                        "FROM samples GROUP BY ALL ORDER BY ALL")
    assert len(final) == 2 * rounds + 1  # every writer's keys + the one shared key, each once
    assert (final.n == 160).all() and (final.v == 1).all()
    last = store.query("SELECT DISTINCT split_part(completion, ':', 1) AS v FROM samples WHERE run_id LIKE 'shared%'")
    assert last.v.item() in {f"a{rounds - 1}", f"b{rounds - 1}"}  # the last rename wins, whole
    assert not list(store.samples_dir.glob("*/*/.*.tmp"))
