"""Real benchmark files in their native layouts (../shared/realdata, beside the checkout; see its
README for provenance): every valid row loads, flags and years come out right."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fade_core import data
from fade_core.data import taco

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason=f"real-format samples not found at {REAL}")


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_taco_every_row_loads() -> None:
    test_rows, train_rows = lines(REAL / "taco" / "test.jsonl"), lines(REAL / "taco" / "train.jsonl")
    flags = {f["taco_test_row"]: f for f in lines(REAL / "taco" / "output_spj.jsonl")}
    undecidable = sum(1 for f in flags.values() if f["special_judge"] and f["case"] not in (2, 3))
    res = data.load_result("taco", str(REAL / "taco"))
    assert res.dropped == [] and res.notes == []
    assert len(res.table) == len(test_rows) + len(train_rows) - undecidable
    assert res.filtered == {taco.EXCLUDED: undecidable}
    lenient = data.load_result("taco", str(REAL / "taco"), special_judge_without_checker="lenient")
    assert len(lenient.table) == len(test_rows) + len(train_rows) and lenient.filtered == {}
    for row in data.records(lenient.table):
        meta = json.loads(row["metadata"])
        if row["split"] == "test":  # each row got the flag of its own upstream row
            f = flags[meta["taco_test_row"]]
            assert row["problem_id"] == f"taco/test/{meta['taco_test_row']}"
            assert (meta["special_judge"], meta["special_judge_case"]) == (f["special_judge"], f["case"])


def test_taco_subset_next_to_the_upstream_flag_file(tmp_path: Path) -> None:
    shutil.copy(REAL / "taco" / "test.jsonl", tmp_path)
    shutil.copy(REAL / "taco_upstream" / "output_spj.jsonl", tmp_path)
    upstream = {f["idx"]: f for f in lines(REAL / "taco_upstream" / "output_spj.jsonl")}
    res = data.load_result("taco", str(tmp_path), special_judge_without_checker="lenient")
    assert len(res.table) == len(lines(tmp_path / "test.jsonl"))
    for m in map(json.loads, res.table["metadata"]):
        assert m["special_judge"] == upstream[m["taco_test_row"]]["special_judge"]
    # without the rows' own keys, position would give wrong flags: a clear error instead
    rows = lines(tmp_path / "test.jsonl")
    (tmp_path / "test.jsonl").write_text("".join(json.dumps({**r, "taco_test_row": None}) + "\n" for r in rows))
    with pytest.raises(data.DataError, match="1000 special-judge flags but 73 test rows"):
        data.load("taco", str(tmp_path))


def test_taco_hub_parquet_layout_of_the_real_rows(tmp_path: Path) -> None:
    """The real rows written the way the hub stores them (one parquet file, strings with nulls)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{k: v for k, v in r.items() if k != "taco_test_row"} for r in lines(REAL / "taco" / "test.jsonl")]
    (tmp_path / "ALL").mkdir()
    schema = pa.schema([(k, pa.string()) for k in rows[0]])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "ALL" / "test-00000-of-00001.parquet")
    res = data.load_result("taco", str(tmp_path), special_judge_without_checker="lenient")
    assert len(res.table) == len(rows) and res.dropped == []
    assert len(res.notes) == 1 and "no output_spj.jsonl beside the test split" in res.notes[0]  # said, not silent


def test_livecodebench_rows_with_compressed_private_tests() -> None:
    raw = lines(REAL / "livecodebench" / "lcb_sample.jsonl")
    res = data.load_result("livecodebench", str(REAL / "livecodebench" / "lcb_sample.jsonl"))
    assert len(res.table) == len(raw) and res.dropped == []
    row = data.records(res.table)[0]
    meta = json.loads(row["metadata"])
    assert row["problem_id"] == "livecodebench/1873_A" and meta["num_private_tests"] > meta["num_public_tests"]
    assert json.loads(row["tests"])[0]["input"].startswith("6\nabc")


@pytest.mark.parametrize(
    ("file", "year"),
    [
        ("qwen25math_aime24_test.jsonl", 2024),
        ("maxwelljia_aime_2024_problems.parquet", 2024),
        ("zldscr0_opencompass_aime2024.jsonl", 2024),
        ("gkv_aime25.jsonl", 2025),
        ("mathevalharness_aime25_test.jsonl", 2025),
    ],
)
def test_aime_every_layout_loads_with_its_year(file: str, year: int) -> None:
    res = data.load_result("aime", str(REAL / "aime" / file), years=[year])
    assert len(res.table) == 30 and res.dropped == [] and res.filtered == {}
    assert {json.loads(m)["year"] for m in res.table["metadata"]} == {year}
    assert all(0 <= int(a) <= 999 for a in res.table["answer"])
    if file.startswith("zldscr0"):  # a JSON array named .jsonl
        assert len(res.notes) == 1 and "JSON array" in res.notes[0]
