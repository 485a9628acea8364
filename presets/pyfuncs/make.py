"""Write pyfuncs.jsonl: small Python-function problems to RL-train a real chat model on, disjoint from HumanEval.

Each problem is one of the families below with its own parameters (a threshold, a divisor, a letter, ...),
so two problems of a family differ in the answer they need, not only in wording. Every row is in fade's
generic code layout (fade_core/data/generic_code.py): ``prompt``, ``fn_name``, ``starter_code``, ``tests``
(a list of {input: [arguments], output: return value}), ``split`` and ``difficulty``. The expected outputs are
computed here by each family's reference function on seeded random inputs, so the file is reproducible::

    python presets/pyfuncs/make.py            # rewrites presets/pyfuncs/pyfuncs.jsonl (same seed, same file)

The families were written for fade (not taken from a benchmark); `fade prepare` with data.decontaminate
checks them against HumanEval by word n-grams and the data card reports what it dropped.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("pyfuncs.jsonl")
SEED = 20261206
TESTS_PER_PROBLEM = 6
TEST_EVERY = 5  # every 5th problem of a family is held out (split test)


def ints(rng: random.Random, lo: int = -20, hi: int = 50) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(0, 9))]


def word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdeiklmnoprstu") for _ in range(rng.randint(1, 7)))


def sentence(rng: random.Random) -> str:
    return " ".join(word(rng) for _ in range(rng.randint(0, 6)))


Family = tuple[str, str, str, Callable[[random.Random], dict[str, Any]], Callable[..., Callable[..., Any]],
               Callable[[random.Random], list[Any]]]
"""(name, statement with {param} fields, signature, draw params, reference factory, draw arguments)."""

FAMILIES: list[Family] = [
    ("sum_above", "Given a list of integers `xs`, return the sum of the elements that are strictly greater than {k}.",
     "def {fn}(xs: list[int]) -> int:", lambda r: {"k": r.randint(-5, 30)},
     lambda k: lambda xs: sum(x for x in xs if x > k), lambda r: [ints(r)]),
    ("count_divisible", "Given a list of integers `xs`, return how many of them are divisible by {k}.",
     "def {fn}(xs: list[int]) -> int:", lambda r: {"k": r.randint(2, 9)},
     lambda k: lambda xs: sum(1 for x in xs if x % k == 0), lambda r: [ints(r)]),
    ("scale_list", "Given a list of integers `xs`, return a new list where every element is multiplied by {k}.",
     "def {fn}(xs: list[int]) -> list[int]:", lambda r: {"k": r.randint(-4, 9)},
     lambda k: lambda xs: [x * k for x in xs], lambda r: [ints(r)]),
    ("first_n_sum", "Given a list of integers `xs`, return the sum of its first {k} elements (all of them if it is "
     "shorter).", "def {fn}(xs: list[int]) -> int:", lambda r: {"k": r.randint(1, 6)},
     lambda k: lambda xs: sum(xs[:k]), lambda r: [ints(r)]),
    ("index_of", "Given a list of integers `xs`, return the index of the first element equal to {k}, or -1 if "
     "there is none.", "def {fn}(xs: list[int]) -> int:", lambda r: {"k": r.randint(0, 9)},
     lambda k: lambda xs: xs.index(k) if k in xs else -1, lambda r: [ints(r, 0, 9)]),
    ("count_letter", "Given a string `s`, return how many times the letter '{c}' occurs in it.",
     "def {fn}(s: str) -> int:", lambda r: {"c": r.choice("aeiklmnorst")},
     lambda c: lambda s: s.count(c), lambda r: [sentence(r)]),
    ("long_words", "Given a sentence `s` of words separated by single spaces, return the number of words with "
     "more than {k} letters.", "def {fn}(s: str) -> int:", lambda r: {"k": r.randint(1, 5)},
     lambda k: lambda s: sum(1 for w in s.split() if len(w) > k), lambda r: [sentence(r)]),
    ("pad_left", "Given a string `s`, return it padded on the left with '{c}' characters to a length of {k} (unchanged "
     "if it is already at least that long).", "def {fn}(s: str) -> str:",
     lambda r: {"c": r.choice("*#.-0"), "k": r.randint(3, 9)},
     lambda c, k: lambda s: s.rjust(k, c), lambda r: [word(r)]),
    ("replace_mult", "Given a positive integer `n`, return the list of the numbers 1 to n in order, with every "
     "multiple of {k} replaced by 0.", "def {fn}(n: int) -> list[int]:", lambda r: {"k": r.randint(2, 7)},
     lambda k: lambda n: [0 if i % k == 0 else i for i in range(1, n + 1)], lambda r: [r.randint(1, 15)]),
    ("clip_list", "Given a list of integers `xs`, return a new list where every element smaller than {lo} becomes "
     "{lo} and every element larger than {hi} becomes {hi}.", "def {fn}(xs: list[int]) -> list[int]:",
     lambda r: (lambda lo: {"lo": lo, "hi": lo + r.randint(3, 20)})(r.randint(-10, 10)),
     lambda lo, hi: lambda xs: [min(max(x, lo), hi) for x in xs], lambda r: [ints(r)]),
    ("digit_sum_mod", "Given a non-negative integer `n`, return the sum of its decimal digits modulo {k}.",
     "def {fn}(n: int) -> int:", lambda r: {"k": r.randint(2, 11)},
     lambda k: lambda n: sum(int(d) for d in str(n)) % k, lambda r: [r.randint(0, 10**6)]),
    ("every_kth", "Given a list of integers `xs`, return the list of every {k}-th element, starting with the first "
     "(the elements at indices 0, {k}, {k2}, ...).", "def {fn}(xs: list[int]) -> list[int]:",
     lambda r: (lambda k: {"k": k, "k2": 2 * k})(r.randint(2, 4)),
     lambda k, k2: lambda xs: xs[::k], lambda r: [ints(r)]),
]
PROBLEMS_PER_FAMILY = 10


def build() -> list[dict[str, Any]]:
    """Every problem row, deterministic for SEED."""
    rng = random.Random(SEED)
    rows = []
    for name, statement, signature, draw_params, reference, draw_args in FAMILIES:
        seen: set[str] = set()
        i = 0
        for _ in range(200):  # a family with fewer distinct parameter sets than PROBLEMS_PER_FAMILY has fewer problems
            if i == PROBLEMS_PER_FAMILY:
                break
            params = draw_params(rng)
            key = json.dumps(params, sort_keys=True)
            if key in seen:  # a family's problems differ in their parameters
                continue
            seen.add(key)
            fn = f"{name}_{i}"
            ref = reference(**params)
            tests = []
            for _ in range(TESTS_PER_PROBLEM):
                args = draw_args(rng)
                tests.append({"input": args, "output": ref(*args)})
            rows.append({
                "id": fn, "prompt": statement.format(**params), "fn_name": fn,
                "starter_code": signature.format(fn=fn) + "\n    ", "tests": tests,
                "split": "test" if i % TEST_EVERY == TEST_EVERY - 1 else "train", "difficulty": "easy",
                "source": "fade pyfuncs (presets/pyfuncs/make.py)",
            })
            i += 1
    return rows


if __name__ == "__main__":
    rows = build()
    OUT.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    print(f"{OUT}: {len(rows)} problems ({sum(r['split'] == 'test' for r in rows)} test)")
