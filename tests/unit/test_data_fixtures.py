"""The committed data fixtures are exactly what tests/fixtures/data/make_fixtures.py writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow.parquet as pq

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def test_generator_reproduces_committed_fixtures(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIX / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    written = mod.write_all(tmp_path)
    assert len(written) >= 25
    for p in written:
        rel = p.relative_to(tmp_path)
        if p.suffix == ".parquet":  # parquet bytes carry the writer's version: compare the values
            got, want = pq.read_table(p), pq.read_table(FIX / rel)
            assert got.schema == want.schema and got.to_pylist() == want.to_pylist(), f"{rel} differs"
        else:
            assert (FIX / rel).read_bytes() == p.read_bytes(), f"{rel} differs: rerun make_fixtures.py"
    # the native warts are really present in the fixtures
    text = (FIX / "livecodebench" / "test.jsonl").read_text()
    assert '"private_test_cases": "[' in text and '"private_test_cases": "eJ' in text  # compressed form
    assert (FIX / "aime" / "opencompass_aime2023.jsonl").read_text().startswith("[")  # an array as .jsonl
    hub = pq.read_table(FIX / "taco_hub" / "ALL" / "train-00000-of-00001.parquet")
    assert {str(t) for t in hub.schema.types} == {"string"} and hub.column("url").null_count == hub.num_rows
