"""The built-in task: countdown.

A problem gives a few small integers and a target; the answer is an arithmetic expression that uses
each integer exactly once, with ``+ - *`` and parentheses only, and evaluates to the target::

    prompt:     "3 5 7 -> 22: "
    completion: "3*5+7"

Why this task: it has verifiable rewards, several distinct correct answers per problem (so pass@k can
exceed pass@1 and diversity matters), a difficulty that is known exactly (the share of all candidate
expressions that hit the target), and it is learnable by a tiny model on a CPU.

Generation is deterministic by seed and keeps only reachable targets with at least ``min_solutions``
distinct correct expressions. Checking parses the expression with :mod:`ast` and walks a whitelist of
node types: nothing is ever ``eval``-ed.
"""

from __future__ import annotations

import ast
import itertools
import random
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

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


@lru_cache(maxsize=65536)
def candidate_expressions(numbers: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """Every expression tree that uses each number exactly once (all orders, operators and shapes).

    Returns (text, value) pairs, one per tree (so the count is the size of the candidate space the
    difficulty is measured over; different trees may print the same text).
    """

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
    for perm in itertools.permutations(numbers):
        leaves = tuple((str(n), n, 3) for n in perm)
        out.extend((t, v) for t, v, _ in build(leaves))
    return tuple(out)


def analyse(numbers: tuple[int, ...], target: int) -> tuple[int, int, float, str]:
    """(distinct correct texts, candidates, share of candidates hitting target, one correct text)."""
    cands = candidate_expressions(tuple(numbers))
    hits = [t for t, v in cands if v == target]
    example = min(hits, key=lambda s: (len(s), s)) if hits else ""
    return len(set(hits)), len(cands), len(hits) / len(cands), example


def generate(
    n: int,
    *,
    num_numbers: int = 3,
    max_number: int = 9,
    min_solutions: int = 2,
    seed: int = 0,
    exclude: set[tuple[tuple[int, ...], int]] | None = None,
) -> list[CountdownProblem]:
    """``n`` distinct problems, deterministic by ``seed``; targets are positive, reachable values with at
    least ``min_solutions`` distinct correct expressions. ``exclude`` holds (sorted numbers, target)
    pairs to skip, so a test split never repeats a training problem."""
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
        values = Counter(v for _, v in candidate_expressions(numbers) if v > 0)
        options = sorted(values)
        target = options[rng.randrange(len(options))] if options else 0
        key = (tuple(sorted(numbers)), target)
        if target <= 0 or key in seen:
            continue
        n_sol, n_cand, share, example = analyse(numbers, target)
        if n_sol < min_solutions:
            continue
        seen.add(key)
        out.append(CountdownProblem(numbers, target, n_sol, n_cand, share, example))
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
