"""The official harnesses' import preludes: TACO and LiveCodeBench programs run after the same block
of standard imports as under their own harness; HumanEval programs (and unknown benchmarks) get none."""

from __future__ import annotations

import builtins
import json

import pytest

from fade_core import config as fconfig
from fade_core import data, verifiers
from fade_core.verifiers import LIVECODEBENCH_PRELUDE, PRELUDES, TACO_PRELUDE, Prelude


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    verifiers.shutdown()


def stdio(benchmark: str, metadata: dict | None = None, tests: list | None = None) -> dict:
    tests = tests or [{"input": "a b a c\n", "output": "2\n", "testtype": "stdin"}]
    return {"problem_id": f"{benchmark}/p", "benchmark": benchmark, "kind": "code_stdio", "fn_name": None,
            "metadata": json.dumps(metadata or {}), "tests": json.dumps(tests)}  # fmt: skip


def call(benchmark: str, tests: list) -> dict:
    return {"problem_id": f"{benchmark}/c", "benchmark": benchmark, "kind": "code_call", "fn_name": "f",
            "metadata": "{}", "tests": json.dumps(tests)}  # fmt: skip


# programs that are correct only with the official harness's imports in scope
USES_COUNTER = "print(Counter(input().split())['a'])"
USES_DEQUE_AND_LRU = (
    "@lru_cache(None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    "q = deque(input().split())\nprint(fib(len(q) - 1))"
)
USES_COMBINATIONS = "print(len(list(combinations(input().split(), 3))) // 2)"


def test_standard_names_without_imports() -> None:
    """Issue: correct solutions using Counter, deque, combinations or lru_cache without importing them
    failed with NameError; both official code harnesses import them first. HumanEval's does not."""
    programs = [USES_COUNTER, USES_DEQUE_AND_LRU, USES_COMBINATIONS]
    benches = ["taco", "livecodebench", "humaneval"]
    cases = [(b, p) for b in benches for p in programs]
    scores = verifiers.score_batch([stdio(b) for b, _ in cases], [p for _, p in cases])
    got = {(b, programs.index(p)): (s.passed, s.status) for (b, p), s in zip(cases, scores, strict=True)}
    assert got == {
        **{("taco", i): (True, "passed") for i in range(3)},
        **{("livecodebench", i): (True, "passed") for i in range(3)},
        **{("humaneval", i): (False, "runtime_error") for i in range(3)},  # NameError, as HumanEval's harness
    }


def test_call_mode_gets_the_prelude_too() -> None:
    tests = [{"input": [[3, 1, 3]], "output": [3, 1], "testtype": "functional"}]
    program = "class Solution:\n    def f(self, xs: List[int]) -> List[int]:\n        return [k for k, _ in Counter(xs).most_common()]"
    assert verifiers.score(call("livecodebench", tests), program).passed
    assert verifiers.score(call("taco", tests), program).passed


def test_metadata_prelude_overrides_the_benchmark_default() -> None:
    assert not verifiers.score(stdio("taco", {"prelude": None}), USES_COUNTER).passed  # turned off
    assert verifiers.score(stdio("humaneval", {"prelude": "taco"}), USES_COUNTER).passed
    with pytest.raises(ValueError, match="metadata.prelude='nope'"):
        verifiers.score(stdio("taco", {"prelude": "nope"}), USES_COUNTER)


def test_future_imports_stay_first() -> None:
    program = "from __future__ import annotations\nx: Counter = Counter(input().split())\nprint(x['a'])"
    assert verifiers.score(stdio("taco"), program).passed
    assert TACO_PRELUDE.apply(program, stdio=True).startswith(
        "from __future__ import annotations\nfrom collections import Counter\n"
    )


def test_harness_specific_names() -> None:
    # lcb_runner star-imports these modules: bisect_left, reduce and math's names are bare names there
    program = "print(bisect_left([1, 2, 4], 3) + reduce(lambda a, b: a * b, [1, 2]) + floor(pi))"
    tests = [{"input": "", "output": "7\n", "testtype": "stdin"}]
    assert verifiers.score(stdio("livecodebench", tests=tests), program).passed
    assert not verifiers.score(stdio("taco", tests=tests), program).passed  # TACO's list has no bisect
    # TACO binds stdin/stdout to sys's for stdio programs
    echo = [{"input": "hi\n", "output": "hi\n", "testtype": "stdin"}]
    assert verifiers.score(stdio("taco", tests=echo), "stdout.write(stdin.readline())").passed
    # LiveCodeBench raises the recursion limit to 50000
    deep = "def r(n):\n    return 0 if n == 0 else 1 + r(n - 1)\nprint(r(20000))"
    deep_tests = [{"input": "", "output": "20000\n", "testtype": "stdin"}]
    assert verifiers.score(stdio("livecodebench", tests=deep_tests), deep).passed


def test_lazy_module_binding_imports_on_first_use() -> None:
    """TACO's harness imports numpy as np; the prelude binds np to a stand-in that imports it on first
    use, so programs that never touch it pay nothing (shown here with json standing in for numpy)."""
    prelude = Prelude(source="test", statements=(), lazy=(("js", "json"),))
    ns: dict = {}
    exec(prelude.text(stdio=False), ns)
    assert type(ns["js"]).__name__ == "_FadeLazyModule"
    assert ns["js"].dumps([1]) == "[1]"
    assert ns["js"].__name__ == "json"  # the stand-in replaced itself with the module
    assert "_FadeLazyModule" not in ns


@pytest.mark.parametrize("prelude", [TACO_PRELUDE, LIVECODEBENCH_PRELUDE], ids=["taco", "livecodebench"])
def test_only_the_names_a_program_uses_are_bound_to_the_same_objects(prelude: Prelude) -> None:
    """The part of the block a program gets binds each name it refers to exactly as the whole block
    does (the whole block's ~1,500 star-imported names cost ~1.5 ms per forked test)."""
    full: dict = {}
    exec(prelude.text(stdio=True), full)
    program = (
        "import sys\n"
        "def f(xs: List[int]) -> int:\n    return gcd(*xs) + len(deque(xs)) + int(sqrt(4))\n"
        "print(f([4, 6]), Counter('aab')['a'], floor(2.5), pow(2, 3), stdin.readline())\n"
    )
    names = verifiers.referenced_names(program)
    assert {"List", "gcd", "deque", "sqrt", "Counter", "floor", "stdin"} <= names
    part: dict = {}
    exec(prelude.text_for(names, stdio=True), part)
    for name in names:  # what the program would find: the block's binding, else the builtin
        assert part.get(name, getattr(builtins, name, None)) is full.get(name, getattr(builtins, name, None)), name
    bound = {n for n in part if not n.startswith("_")}
    assert bound <= names | {"sys"} and len(bound) < 20
    assert len(prelude.text(stdio=True)) > 3 * len(prelude.text_for(names, stdio=True))


def test_programs_that_look_names_up_dynamically_get_the_whole_block() -> None:
    for program in ("print(eval('Counter')('aa'))", "print(globals()['floor'](2.5))", "exec('x = 1')"):
        assert verifiers.referenced_names(program) is None
        assert TACO_PRELUDE.apply(program, stdio=True).startswith(TACO_PRELUDE.text(stdio=True))
    assert verifiers.referenced_names("print(1)") == {"print"}
    assert TACO_PRELUDE.apply("print(1)", stdio=False) == "print(1)"  # nothing needed


def test_prelude_texts_list_each_harness_modules() -> None:
    taco = TACO_PRELUDE.text(stdio=True)
    for line in ("from collections import ChainMap, Counter, OrderedDict, defaultdict, deque",
                 "from functools import lru_cache", "from heapq import *", "stdin = _fade_sys.stdin"):  # fmt: skip
        assert line in taco
    assert "stdin =" not in TACO_PRELUDE.text(stdio=False)
    lcb = LIVECODEBENCH_PRELUDE.text(stdio=False)
    assert lcb.index("from builtins import *") > lcb.index("from math import *")  # builtins restored
    assert lcb.index("import datetime") > lcb.index("from datetime import *")  # the module wins
    assert "setrecursionlimit(50000)" in lcb
    assert set(PRELUDES) == {"taco", "livecodebench"}


def test_loaders_write_the_prelude_choice_from_the_config() -> None:
    fix = "tests/fixtures/data"
    cfg = fconfig.from_dict({"data": {"code_prelude": ["livecodebench"]}})
    opts = data.options_from_config("taco", cfg.data)
    assert opts["prelude"] is False
    df = data.load("taco", f"{fix}/taco", **{k: v for k, v in opts.items() if k != "gold"})
    assert {json.loads(m)["prelude"] for m in df["metadata"]} == {None}
    lcb = data.load("livecodebench", f"{fix}/livecodebench")
    assert {json.loads(m)["prelude"] for m in lcb["metadata"]} == {"livecodebench"}
    with pytest.raises(fconfig.ConfigError, match="data.code_prelude"):
        fconfig.from_dict({"data": {"code_prelude": ["humaneval"]}})
