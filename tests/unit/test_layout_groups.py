"""Per-arm layout: runs/<arm>/<run_id>/ and eval/samples/<arm>/<run_id>/ are found by every reader."""

from __future__ import annotations

from fade_core.runs import find_run_dirs
from fade_core.store import EvalKey, ResultsStore
from tests.unit.test_store import make_samples


def test_grouped_and_flat_parts_are_read_together(tmp_path):
    flat = ResultsStore(tmp_path)
    grouped = ResultsStore(tmp_path, group="power2")
    p1 = flat.write(make_samples("base", "countdown", 0))
    p2 = grouped.write(make_samples("power2-s0-abcdef12", "countdown", 10))
    assert p1 == tmp_path / "samples" / "base" / "countdown" / "step-00000000.parquet"
    assert p2 == tmp_path / "samples" / "power2" / "power2-s0-abcdef12" / "countdown" / "step-00000010.parquet"
    assert len(flat.part_files()) == 2 and len(grouped.part_files()) == 2
    df = flat.read()
    assert set(df.run_id) == {"base", "power2-s0-abcdef12"}
    # re-writing the grouped part replaces it, never duplicates
    n = len(df)
    grouped.write(make_samples("power2-s0-abcdef12", "countdown", 10, version="v1"))
    assert len(flat.read()) == n
    assert grouped.has(EvalKey("power2-s0-abcdef12", "countdown", 10))
    assert not flat.has(EvalKey("power2-s0-abcdef12", "countdown", 10))


def test_find_run_dirs_flat_and_per_arm(tmp_path):
    def run(path):
        path.mkdir(parents=True)
        (path / "config.yaml").write_text("train: {}\n")
        (path / "metrics.jsonl").write_text("")
        return path

    a = run(tmp_path / "grpo-s0-00000000")
    b = run(tmp_path / "power2" / "power2-s0-11111111")
    c = run(tmp_path / "power2" / "power2-s1-22222222")
    (tmp_path / "power2" / "notes").mkdir()
    (tmp_path / "stray").mkdir()
    assert find_run_dirs(tmp_path) == [a, b, c]
    assert find_run_dirs(tmp_path / "missing") == []
