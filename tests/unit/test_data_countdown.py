"""Countdown as problem rows: deterministic, disjoint train/validation/test splits, one difficulty level per
testbed level."""

from __future__ import annotations

import json

import pytest

from fade_core import countdown_task as countdown
from fade_core import data
from fade_core.data.schema import records

LEVELS = {"easy": {"num_numbers": 3, "max_number": 9, "share": 0.5},
          "hard": {"num_numbers": 4, "max_number": 6, "share": 0.5}}
OPTS = dict(num_train=60, num_validation=10, num_test=20, seed=3, levels=LEVELS)


@pytest.fixture(scope="module")
def table():
    return data.load("countdown", **OPTS)


def _key(r):
    m = json.loads(r["metadata"])
    return (tuple(sorted(m["numbers"])), m["target"])


def test_sizes_levels_and_determinism(table) -> None:
    assert table["split"].value_counts().to_dict() == {"train": 60, "test": 20, "validation": 10}
    counts = table.groupby(["split", "difficulty_level"]).size().to_dict()
    assert counts == {("test", "easy"): 10, ("test", "hard"): 10, ("train", "easy"): 30, ("train", "hard"): 30,
                      ("validation", "easy"): 5, ("validation", "hard"): 5}
    assert records(data.load("countdown", **OPTS)) == records(table)
    other = data.load("countdown", **{**OPTS, "seed": 4})
    assert other["prompt"].tolist() != table["prompt"].tolist()


def test_splits_are_disjoint(table) -> None:
    rows = records(table)
    keys = {s: {_key(r) for r in rows if r["split"] == s} for s in ("train", "validation", "test")}
    assert [len(k) for k in keys.values()] == [60, 10, 20]
    assert not keys["train"] & keys["test"] and not keys["train"] & keys["validation"]
    assert not keys["validation"] & keys["test"]


def test_held_out_splits_do_not_depend_on_the_training_size(table) -> None:
    bigger = records(data.load("countdown", **{**OPTS, "num_train": 90}))
    held = [r for r in records(table) if r["split"] != "train"]
    assert [r for r in bigger if r["split"] != "train"] == held


def test_rows_match_the_generator(table) -> None:
    for r in records(table):
        m = json.loads(r["metadata"])
        assert r["kind"] == "expression" and r["tests"] == "[]" and r["answer"] == str(m["target"])
        assert r["prompt"] == countdown.format_prompt(m["numbers"], m["target"])
        n_sol, n_cand, share, _ = countdown.analyse(tuple(m["numbers"]), m["target"])
        assert (m["num_solutions"], m["num_candidates"], m["share_correct"]) == (n_sol, n_cand, share)
        assert m["num_solutions"] >= 2
        assert countdown.check(m["example_solution"], m["numbers"], m["target"])[0]
        assert r["difficulty"] == f"{share:.4f}" and r["difficulty_level"] == m["level"]
        spec = LEVELS[m["level"]]
        assert len(m["numbers"]) == spec["num_numbers"] and max(m["numbers"]) <= spec["max_number"]


def test_countdown_takes_no_source() -> None:
    with pytest.raises(ValueError, match="generated"):
        data.load("countdown", "some/path")
