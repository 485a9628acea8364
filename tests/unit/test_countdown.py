"""The built-in countdown task: generation is deterministic and honest, the checker is strict."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fade_core import countdown_task


def _brute_force_values(numbers: tuple[int, ...]) -> list[int]:
    """Every value reachable by a full binary tree over a permutation, by explicit recursion."""

    def vals(items: tuple[int, ...]) -> list[int]:
        if len(items) == 1:
            return [items[0]]
        out = []
        for s in range(1, len(items)):
            for a in vals(items[:s]):
                for b in vals(items[s:]):
                    out += [a + b, a - b, a * b]
        return out

    return [v for p in itertools.permutations(numbers) for v in vals(p)]


@pytest.mark.parametrize("numbers", [(3, 5, 7), (1, 1, 2), (2, 3, 4, 5)])
def test_candidates_match_brute_force(numbers):
    cands = countdown_task.candidate_expressions(numbers)
    assert sorted(v for _, v in cands) == sorted(_brute_force_values(numbers))
    # every printed text checks as itself: parentheses placed correctly
    for text, value in cands:
        ok, why = countdown_task.check(text, numbers, value)
        assert ok, (text, value, why)


def test_generate_is_deterministic_and_reachable():
    a = countdown_task.generate(50, seed=3)
    b = countdown_task.generate(50, seed=3)
    c = countdown_task.generate(50, seed=4)
    assert a == b and a != c
    keys = {(tuple(sorted(p.numbers)), p.target) for p in a}
    assert len(keys) == 50  # distinct
    for p in a:
        assert p.target > 0 and p.num_solutions >= 2
        ok, _ = countdown_task.check(p.example_solution, p.numbers, p.target)
        assert ok
        hits = sum(v == p.target for _, v in countdown_task.candidate_expressions(p.numbers))
        assert p.difficulty == pytest.approx(hits / p.num_candidates)


def test_exclude_keeps_splits_apart():
    train = countdown_task.generate(100, seed=0)
    keys = {(tuple(sorted(p.numbers)), p.target) for p in train}
    test = countdown_task.generate(40, seed=1, exclude=keys)
    assert not keys & {(tuple(sorted(p.numbers)), p.target) for p in test}


def test_impossible_request_is_a_clear_error():
    with pytest.raises(ValueError, match="could only generate"):
        countdown_task.generate(500, num_numbers=2, max_number=3)


@pytest.mark.parametrize(
    "completion, ok",
    [
        ("3*5+7", True),
        (" 7+5*3 \nextra text", True),
        ("(3*5)+7", True),
        ("3*5+7+0", False),  # 0 is not a given number
        ("35+7", False),  # digits glued together
        ("3*5", False),  # 7 unused
        ("3*5+7*1", False),
        ("3**5+7", False),  # power not allowed
        ("3/5+7", False),
        ("__import__('os')", False),
        ("", False),
        ("(" * 40 + "3" + ")" * 40, False),
        ("3*5+7.0", False),
        ("3*5+-7", False),  # wrong value anyway, unary minus never creates a number
    ],
)
def test_check(completion, ok):
    assert countdown_task.check(completion, (3, 5, 7), 22)[0] is ok


def test_prompt_format():
    assert countdown_task.format_prompt((3, 5, 7), 22) == "3 5 7 -> 22: "


# ------------------------------------------------------------------------------ the testbed's levels
def test_uniform_baseline_is_exact_against_enumeration():
    """pass@k of the uniform sampler = 1 - (1 - share)^k: counted over every ordered k-tuple of trees."""
    from fractions import Fraction

    numbers, target = (3, 5, 7), 22
    cands = countdown_task.candidate_expressions(numbers)
    hits = [v == target for _, v in cands]
    share = Fraction(sum(hits), len(cands))
    assert countdown_task.analyse(numbers, target)[2] == pytest.approx(float(share))
    for k in (1, 2, 3):
        solved = sum(any(hits[i] for i in t) for t in itertools.product(range(len(cands)), repeat=k))
        exact = Fraction(solved, len(cands) ** k)
        assert exact == 1 - (1 - share) ** k
        assert countdown_task.uniform_pass_at_k(float(share), k) == pytest.approx(float(exact), rel=1e-12)
    import numpy as np

    arr = countdown_task.uniform_pass_at_k(np.array([0.0, 0.5, 1.0]), 2)
    assert arr.tolist() == [0.0, 0.75, 1.0]


def test_candidates_do_not_depend_on_the_order_of_the_numbers():
    a = countdown_task.candidate_expressions((7, 3, 5))
    assert a == countdown_task.candidate_expressions((3, 5, 7)) and len(a) == 108


LEVELS = {"easy": countdown_task.Level(3, 9, 2.0), "hard": countdown_task.Level(4, 6, 1.0)}


def test_generate_splits_levels_sizes_and_disjointness():
    sizes = {"train": 30, "validation": 6, "test": 12}
    out = countdown_task.generate_splits(LEVELS, sizes, seed=1)
    assert countdown_task.generate_splits(LEVELS, sizes, seed=1) == out
    assert countdown_task.generate_splits(LEVELS, sizes, seed=2) != out
    for split, n in sizes.items():
        assert len(out[split]) == n
        by_level = [p.level for p in out[split]]
        assert by_level.count("easy") == round(n * 2 / 3) and by_level.count("hard") == n - round(n * 2 / 3)
        for p in out[split]:
            lv = LEVELS[p.level]
            assert len(p.numbers) == lv.num_numbers and all(1 <= x <= lv.max_number for x in p.numbers)
    keys = {s: {p.key for p in out[s]} for s in sizes}
    assert all(len(keys[s]) == n for s, n in sizes.items())
    assert not (keys["train"] & keys["test"] or keys["train"] & keys["validation"] or keys["validation"] & keys["test"])


def test_level_sizes_sum_and_reject_bad_shares():
    assert countdown_task.level_sizes(10, [0.5, 0.5]) == [5, 5]
    assert countdown_task.level_sizes(7, [1, 1, 1]) == [3, 2, 2]
    assert sum(countdown_task.level_sizes(101, [0.2, 0.3, 0.5])) == 101
    with pytest.raises(ValueError, match="shares"):
        countdown_task.level_sizes(10, [0.0, 0.0])
    with pytest.raises(ValueError, match="unknown split"):
        countdown_task.generate_splits(LEVELS, {"dev": 3})


def test_default_testbed_leaves_headroom_for_the_uniform_sampler_at_every_level():
    """The default levels (config.CountdownData): harder levels have smaller shares of correct candidates, and
    the uniform sampler stays clearly below 1 at pass@128 on the default test split (the old 3-number task
    gave ~0.98: no headroom at large k)."""
    from fade_core import config
    from fade_core.data.countdown import parse_levels

    cd = config.load(None, []).data.countdown
    test = countdown_task.generate_splits(parse_levels(cd.levels), {"test": cd.num_test}, min_solutions=cd.min_solutions,
                                          seed=cd.seed)["test"]
    by_level = {lv: np.array([p.difficulty for p in test if p.level == lv]) for lv in ("easy", "medium", "hard")}
    assert all(len(v) >= 60 for v in by_level.values())
    share = {lv: float(v.mean()) for lv, v in by_level.items()}
    assert share["easy"] > 3 * max(share["medium"], share["hard"]) and min(share.values()) > 0
    u128 = {lv: float(np.mean(countdown_task.uniform_pass_at_k(v, 128))) for lv, v in by_level.items()}
    # medium and hard have similar mean shares, but hard's are spread thinner: it is harder at large k
    assert u128["easy"] > 0.9 > 0.75 > u128["medium"] > u128["hard"], u128
    overall = float(np.mean(countdown_task.uniform_pass_at_k(np.concatenate(list(by_level.values())), 128)))
    assert overall < 0.8
