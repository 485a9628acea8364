"""The committed data fixtures are exactly what tests/fixtures/data/make_fixtures.py writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def test_generator_reproduces_committed_fixtures(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIX / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    written = mod.write_all(tmp_path)
    assert len(written) >= 15
    for p in written:
        rel = p.relative_to(tmp_path)
        assert (FIX / rel).read_bytes() == p.read_bytes(), f"{rel} differs: rerun make_fixtures.py"
    # the compressed LiveCodeBench form is really present in the fixtures
    text = (FIX / "livecodebench" / "test.jsonl").read_text()
    assert '"private_test_cases": "[' in text and '"private_test_cases": "eJ' in text
