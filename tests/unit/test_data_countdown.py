"""Countdown as problem rows: deterministic splits, disjoint test, difficulty and levels."""

from __future__ import annotations

import json

import pytest

from fade_core import countdown_task as countdown
from fade_core import data
from fade_core.data import countdown as cd
from fade_core.data.schema import records

OPTS = dict(num_train=60, num_test=20, seed=3)


@pytest.fixture(scope="module")
def table():
    return data.load("countdown", **OPTS)


def test_sizes_and_determinism(table) -> None:
    assert table["split"].value_counts().to_dict() == {"train": 60, "test": 20}
    again = data.load("countdown", **OPTS)
    assert records(again) == records(table)
    other = data.load("countdown", num_train=60, num_test=20, seed=4)
    assert other["prompt"].tolist() != table["prompt"].tolist()


def test_test_split_excludes_training_problems(table) -> None:
    def key(r):
        m = json.loads(r["metadata"])
        return (tuple(sorted(m["numbers"])), m["target"])

    rows = records(table)
    train = {key(r) for r in rows if r["split"] == "train"}
    test = {key(r) for r in rows if r["split"] == "test"}
    assert len(train) == 60 and len(test) == 20 and not train & test


def test_rows_match_the_generator(table) -> None:
    for r in records(table):
        m = json.loads(r["metadata"])
        assert r["kind"] == "expression" and r["tests"] == "[]" and r["answer"] == str(m["target"])
        assert r["prompt"] == countdown.format_prompt(m["numbers"], m["target"])
        n_sol, n_cand, share, _ = countdown.analyse(tuple(m["numbers"]), m["target"])
        assert (m["num_solutions"], m["num_candidates"], m["share_correct"]) == (n_sol, n_cand, share)
        assert m["num_solutions"] >= 2
        assert countdown.check(m["example_solution"], m["numbers"], m["target"])[0]
        assert r["difficulty"] == f"{share:.4f}" and r["difficulty_level"] == cd.level_of(share)


@pytest.mark.parametrize(
    ("share", "level"),
    [(0.5, "easy"), (0.05, "easy"), (0.0499, "medium"), (0.02, "medium"), (0.0199, "hard"), (0.0, "hard")],
)
def test_level_thresholds(share: float, level: str) -> None:
    assert cd.level_of(share) == level


def test_countdown_takes_no_source() -> None:
    with pytest.raises(ValueError, match="generated"):
        data.load("countdown", "some/path")
