"""The built-in task: countdown, at several difficulty levels.

A problem gives a few small integers and a target; the answer is an arithmetic expression that uses
each integer exactly once, with ``+ - *`` and parentheses only, and evaluates to the target::

    prompt:     "3 5 7 -> 22: "
    completion: "3*5+7"

Why this task: it has verifiable rewards, several distinct correct answers per problem (so pass@k can
exceed pass@1 and diversity matters), a difficulty that is known exactly (the share of all candidate
expressions that hit the target), and it is learnable by a tiny model on a CPU.

The uniform baseline. A sampler that draws k expression trees uniformly from a problem's candidates
solves it with probability 1 - (1 - share)^k (:func:`uniform_pass_at_k`), exactly. With 3 numbers from
1..9 that is pass@1/8/32/128 ~ .06/.37/.77/.98: the level saturates pass@128 for any sampler, so a
testbed with headroom at large k needs a harder level: 4 numbers (3240 trees per problem; ~.013/.09/
.27/.58). :class:`Level` is one difficulty level (numbers per problem and their range);
:func:`generate_splits` draws the train / validation / test splits of several levels, disjoint.

Generation is deterministic by seed and keeps only reachable targets with at least ``min_solutions``
distinct correct expressions. Checking parses the expression with :mod:`ast` and walks a whitelist of
node types: nothing is ever ``eval``-ed.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

OPS = ("+", "-", "*")
MAX_EXPRESSION_CHARS = 64


@dataclass(frozen=True)
class CountdownProblem:
    """One countdown problem. ``difficulty`` is the share of candidate expressions hitting the target
    (1.0 = every expression works, near 0 = few do); ``num_solutions`` counts distinct correct strings."""

    numbers: tuple[int, ...]
    target: int
    num_solutions: int
    num_candidates: int
    difficulty: float
    example_solution: str
    level: str = ""

    @property
    def key(self) -> tuple[tuple[int, ...], int]:
        """(sorted numbers, target): two problems with the same key are the same problem."""
        return tuple(sorted(self.numbers)), self.target

    @property
    def prompt(self) -> str:
        return format_prompt(self.numbers, self.target)


def format_prompt(numbers: tuple[int, ...] | list[int], target: int) -> str:
    """The prompt text of a problem: ``"3 5 7 -> 22: "``."""
    return " ".join(str(n) for n in numbers) + f" -> {target}: "


def _combine(a: tuple[str, int, int], b: tuple[str, int, int]) -> list[tuple[str, int, int]]:
    """All ways to join two sub-expressions (text, value, precedence) with one operator."""
    out = []
    for op in OPS:
        prec = 1 if op in "+-" else 2
        la = a[0] if a[2] >= prec else f"({a[0]})"
        # right operand needs parentheses at equal precedence for '-' (a-(b+c)) and always when lower
        need_r = b[2] < prec or (b[2] == prec and op == "-")
        rb = f"({b[0]})" if need_r else b[0]
        val = a[1] + b[1] if op == "+" else a[1] - b[1] if op == "-" else a[1] * b[1]
        out.append((f"{la}{op}{rb}", val, prec))
    return out


def candidate_expressions(numbers: Sequence[int]) -> tuple[tuple[str, int], ...]:
    """Every expression tree that uses each number exactly once (all orders, operators and shapes).

    Returns (text, value) pairs, one per tree (so the count is the size of the candidate space the
    difficulty is measured over; different trees may print the same text). The set does not depend on
    the order of ``numbers`` (every permutation is enumerated); it is computed once per multiset.
    """
    return _candidates_of_multiset(tuple(sorted(int(n) for n in numbers)))


@lru_cache(maxsize=8192)
def _candidates_of_multiset(numbers: tuple[int, ...]) -> tuple[tuple[str, int], ...]:

    def build(items: tuple[tuple[str, int, int], ...]) -> list[tuple[str, int, int]]:
        if len(items) == 1:
            return [items[0]]
        res = []
        for split in range(1, len(items)):
            for left in build(items[:split]):
                for right in build(items[split:]):
                    res.extend(_combine(left, right))
        return res

    out: list[tuple[str, int]] = []
    for perm in itertools.permutations(numbers):  # repeated numbers repeat trees: the count is per ordering
        leaves = tuple((str(n), n, 3) for n in perm)
        out.extend((t, v) for t, v, _ in build(leaves))
    return tuple(out)


def analyse(numbers: tuple[int, ...], target: int) -> tuple[int, int, float, str]:
    """(distinct correct texts, candidates, share of candidates hitting target, one correct text)."""
    cands = candidate_expressions(numbers)
    hits = [t for t, v in cands if v == target]
    example = min(hits, key=lambda s: (len(s), s)) if hits else ""
    return len(set(hits)), len(cands), len(hits) / len(cands), example


def uniform_pass_at_k(share: float | np.ndarray, k: int) -> float | np.ndarray:
    """pass@k of the uniform sampler: the chance that k trees drawn uniformly (with replacement) from a
    problem's candidates include a correct one, 1 - (1 - share)^k, exactly (``share`` = difficulty)."""
    if k < 1:
        raise ValueError(f"uniform_pass_at_k: k must be >= 1, got {k}")
    out = 1.0 - (1.0 - np.asarray(share, dtype=np.float64)) ** k
    return float(out) if out.ndim == 0 else out


@lru_cache(maxsize=8192)
def qualifying_targets(numbers: tuple[int, ...], min_solutions: int) -> tuple[int, ...]:
    """Positive targets reachable from the multiset ``numbers`` with at least ``min_solutions`` distinct
    correct texts, ascending (the targets a problem of these numbers may have)."""
    texts: dict[int, set[str]] = {}
    for text, value in candidate_expressions(numbers):
        if value > 0:
            texts.setdefault(value, set()).add(text)
    return tuple(sorted(v for v, t in texts.items() if len(t) >= min_solutions))


def generate(
    n: int,
    *,
    num_numbers: int = 3,
    max_number: int = 9,
    min_solutions: int = 2,
    seed: int = 0,
    exclude: set[tuple[tuple[int, ...], int]] | None = None,
    level: str = "",
) -> list[CountdownProblem]:
    """``n`` distinct problems, deterministic by ``seed``: numbers drawn uniformly from 1..max_number, the
    target uniformly among the positive values with at least ``min_solutions`` distinct correct
    expressions. ``exclude`` holds keys (:attr:`CountdownProblem.key`) to skip, so a held-out split never
    repeats another split's problem; ``level`` names the problems' difficulty level."""
    if num_numbers < 2:
        raise ValueError("num_numbers must be >= 2")
    rng = random.Random(seed)
    seen: set[tuple[tuple[int, ...], int]] = set(exclude or ())
    out: list[CountdownProblem] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 200 * n + 1000:
            raise ValueError(
                f"could only generate {len(out)} of {n} distinct countdown problems with "
                f"num_numbers={num_numbers}, max_number={max_number}, min_solutions={min_solutions}"
            )
        numbers = tuple(rng.randint(1, max_number) for _ in range(num_numbers))
        options = qualifying_targets(tuple(sorted(numbers)), min_solutions)
        if not options:
            continue
        target = options[rng.randrange(len(options))]
        key = (tuple(sorted(numbers)), target)
        if key in seen:
            continue
        n_sol, n_cand, share, example = analyse(numbers, target)
        seen.add(key)
        out.append(CountdownProblem(numbers, target, n_sol, n_cand, share, example, level))
    return out


# ------------------------------------------------------------------------------------------ levels
SPLITS = ("train", "validation", "test")
"""The splits of the built-in task. validation: choosing hyper-parameters (the study's learning rates);
test: every reported number."""
HELD_OUT_FIRST = ("test", "validation", "train")
"""The order splits are drawn in, each excluding the ones before: the held-out splits do not change when
the training split grows."""


@dataclass(frozen=True)
class Level:
    """One difficulty level: ``num_numbers`` integers from 1..``max_number``; ``share`` of every split."""

    num_numbers: int
    max_number: int
    share: float


def level_sizes(total: int, shares: Sequence[float]) -> list[int]:
    """``total`` split over levels in proportion to ``shares`` (largest remainders; sums to ``total``)."""
    w = np.asarray(shares, dtype=np.float64)
    if w.size == 0 or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"level shares must be >= 0 with a positive sum, got {list(shares)}")
    exact = total * w / w.sum()
    sizes = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - sizes), kind="stable")[: total - int(sizes.sum())]:
        sizes[i] += 1
    return sizes.tolist()


def split_seed(seed: int, level: str, split: str) -> int:
    """The generator seed of one (level, split): a stable hash of the task seed and both names."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{level}/{split}".encode()).digest()[:8], "little")


def generate_splits(
    levels: Mapping[str, Level],
    sizes: Mapping[str, int],
    *,
    min_solutions: int = 2,
    seed: int = 0,
) -> dict[str, list[CountdownProblem]]:
    """Every split of ``sizes`` ({split: total problems}) over ``levels`` ({name: Level}), deterministic by
    ``seed``. Each split holds round(total * share) problems of each level, level by level in the
    mapping's order; no problem appears in two splits (splits are drawn held-out first,
    :data:`HELD_OUT_FIRST`, each excluding the problems already drawn)."""
    unknown = sorted(set(sizes) - set(SPLITS))
    if unknown:
        raise ValueError(f"unknown split(s) {unknown}; the splits are {list(SPLITS)}")
    names = list(levels)
    per_level = {split: level_sizes(total, [levels[x].share for x in names]) for split, total in sizes.items()}
    out: dict[str, list[CountdownProblem]] = {split: [] for split in sizes}
    for i, name in enumerate(names):
        lv, taken = levels[name], set()
        for split in (s for s in HELD_OUT_FIRST if s in sizes):
            probs = generate(per_level[split][i], num_numbers=lv.num_numbers, max_number=lv.max_number,
                             min_solutions=min_solutions, seed=split_seed(seed, name, split), exclude=taken,
                             level=name)
            taken |= {p.key for p in probs}
            out[split].extend(probs)
    return out


# ------------------------------------------------------------------------------------------ checker
class _Reject(Exception):
    pass


def _walk(node: ast.AST, used: list[int]) -> int:
    if isinstance(node, ast.Expression):
        return _walk(node.body, used)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        a = _walk(node.left, used)
        b = _walk(node.right, used)
        return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
        used.append(node.value)
        return node.value
    raise _Reject(f"disallowed element {type(node).__name__}")


def extract_expression(completion: str) -> str:
    """The answer part of a completion: its first line, stripped."""
    return completion.strip().split("\n", 1)[0].strip()


def check(completion: str, numbers: tuple[int, ...] | list[int], target: int) -> tuple[bool, str]:
    """Whether ``completion`` is a correct answer; returns (ok, reason).

    Rules: only digits, ``+ - *``, parentheses and spaces; every given number used exactly once
    (as a multiset); the value equals the target. Parsed with :mod:`ast`, never evaluated as code.
    """
    expr = extract_expression(completion)
    if not expr:
        return False, "empty"
    if len(expr) > MAX_EXPRESSION_CHARS:
        return False, "too long"
    if any(ch not in "0123456789+-*() " for ch in expr):
        return False, "invalid character"
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False, "syntax error"
    used: list[int] = []
    try:
        value = _walk(tree, used)
    except _Reject as e:
        return False, str(e)
    if Counter(used) != Counter(int(n) for n in numbers):
        return False, "numbers not used exactly once"
    if value != target:
        return False, "wrong value"
    return True, "ok"
