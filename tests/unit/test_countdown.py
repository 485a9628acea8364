"""The built-in countdown task: generation is deterministic and honest, the checker is strict."""

from __future__ import annotations

import itertools

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
