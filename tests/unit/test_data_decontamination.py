"""Decontamination: exact and near duplicates by normalized n-gram overlap, against brute force."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fade_core import data
from fade_core.data import decontamination as dc

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def test_normalize() -> None:
    assert dc.normalize("Given  $N$ integers,\nprint THE sum!") == "given n integers print the sum"
    assert dc.normalize("ﬁnd x²") == "find x2"  # NFKC


def test_ngrams_short_text_is_one_gram() -> None:
    assert dc.ngrams("a b c", n=8) == {("a", "b", "c")}
    assert len(dc.ngrams(" ".join(str(i) for i in range(10)), n=8)) == 3
    assert dc.ngrams("!!!") == set()


def test_exact_after_normalization_and_near_copy() -> None:
    ev = [
        ("e1", "Count the letter a in S. Print the count."),
        ("e2", "Completely unrelated statement about graphs and trees here."),
    ]
    tr = [
        ("t1", "count the LETTER a in s -- print the count"),  # exact after normalization
        ("t2", "Count the letter a in S. Print the count. Extra words follow here to make it longer."),
        ("t3", "Sort the array and print it in increasing order please."),
    ]
    found = dc.find_overlaps(tr, ev, n=3, threshold=0.5)
    assert [(o.train_id, o.eval_id, o.kind) for o in found] == [("t1", "e1", "exact"), ("t2", "e1", "near")]
    assert found[1].score == 1.0  # e1 is wholly inside t2: overlap is measured against the smaller text


def brute(train, evaluation, n, threshold):
    out = []
    for tid, t in train:
        for eid, e in evaluation:
            if dc.normalize(t) == dc.normalize(e):
                out.append((tid, eid, "exact"))
                continue
            a, b = dc.ngrams(t, n), dc.ngrams(e, n)
            if a and b and len(a & b) / min(len(a), len(b)) >= threshold:
                out.append((tid, eid, "near"))
    return sorted(out)


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    vocab = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]

    def text() -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12)))

    ev = [(f"e{i}", text()) for i in range(8)]
    tr = [(f"t{i}", text()) for i in range(15)] + [("copy", ev[0][1].upper())]
    for n, th in ((2, 0.5), (3, 0.3), (4, 1.0)):
        got = sorted((o.train_id, o.eval_id, o.kind) for o in dc.find_overlaps(tr, ev, n=n, threshold=th))
        assert got == brute(tr, ev, n, th)
        assert ("copy", "e0", "exact") in got


def test_fixture_taco_problem_copies_a_livecodebench_statement() -> None:
    tables = {
        "taco": data.load("taco", str(FIX / "taco")),
        "livecodebench": data.load("livecodebench", str(FIX / "livecodebench")),
        "humaneval": data.load("humaneval"),
        "countdown": data.load("countdown", num_train=5, num_test=2),
    }
    found = dc.check_tables(tables)
    assert [(o.train_id, o.eval_id, o.kind) for o in found] == [
        ("taco/test/0", "livecodebench/abc301_a", "near")
    ]
    kept, dropped = dc.drop_overlaps(tables["taco"], found)
    assert dropped == ["taco/test/0"] and len(kept) == len(tables["taco"]) - 1
    assert dc.check_tables({"taco": tables["taco"]}) == []  # nothing to compare against


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        dc.find_overlaps([], [], n=0)
    with pytest.raises(ValueError):
        dc.find_overlaps([], [], threshold=0)
