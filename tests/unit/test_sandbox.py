"""fade_core.sandbox: comparison, plain data, statuses, kinds, backends, refusal without isolation."""

from __future__ import annotations

import math
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fade_core import sandbox
from fade_core.sandbox import compare, isolation, plaindata
from fade_core.sandbox.pool import Limits

FAST = Limits(cpu_s=2, wall_s=4, mem_mb=512)


@pytest.fixture(scope="module")
def sb():
    with sandbox.Sandbox(2, limits=FAST) as s:
        yield s


# ------------------------------------------------------------------------------------- comparison
@pytest.mark.parametrize(
    "actual,expected,ok",
    [
        ("3\n", "3", True),
        ("  3  \n\n", "3\n", True),
        ("1 2\r\n3\n", "1 2\n3", True),
        ("0.5000001\n", "0.5", True),
        ("0.51\n", "0.5", False),
        ("1e-9", "0", True),
        ("4", "3", False),
        ("3\n4", "3", False),
        ("", "3", False),
        ("nan", "nan", True),
        ("inf", "1e308", False),
    ],
)
def test_compare_stdout_lines(actual, expected, ok):
    assert compare.compare_stdout(actual, expected)[0] is ok


def test_compare_judges():
    assert compare.compare_stdout("b\na", "a\nb", "lines_unordered")[0]
    assert not compare.compare_stdout("b\na", "a\nb", "lines")[0]
    assert compare.compare_stdout("3 1 2", "1 2\n3", "tokens_unordered")[0]
    ok, why = compare.compare_stdout("2 1", "1 2", "special")
    assert ok and "special judge" in why
    assert compare.compare_stdout("3 \n", "3", "exact")[0]
    assert not compare.compare_stdout(" 3", "3", "exact")[0]
    assert compare.judge_from_metadata({"special_judge": True}) == ("special", compare.DEFAULT_FLOAT_TOL)
    assert compare.judge_from_metadata({"judge": "exact", "float_tol": 0.1}) == ("exact", 0.1)
    assert compare.judge_from_metadata(None)[0] == "lines"
    with pytest.raises(ValueError, match="judge"):
        compare.judge_from_metadata({"judge": "nope"})


def test_values_equal_is_strict_about_types():
    assert compare.values_equal((1, 2), [1, 2])
    assert compare.values_equal([1.0000000001], [1])
    assert not compare.values_equal(True, 1)
    assert not compare.values_equal(1, True)
    assert not compare.values_equal("1", 1)
    assert compare.values_equal({1: "a"}, {"1": "a"})
    assert not compare.values_equal(None, 0)
    assert compare.values_equal(float("nan"), float("nan"))

    class Liar:
        def __eq__(self, other):
            return True

    assert not compare.values_equal(Liar(), 3)


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(plain)
def test_plaindata_roundtrip(x):
    assert plaindata.loads(plaindata.dumps(x)) == x


def test_plaindata_special_values_and_subclasses():
    vals = [float("inf"), {1: 2, (1, 2): "t"}, {1, 2}, frozenset([3]), b"\x00\xff", 1 + 2j, {"__t": "x"}]
    for v in vals:
        assert plaindata.loads(plaindata.dumps(v)) == v
    assert math.isnan(plaindata.loads(plaindata.dumps(float("nan"))))

    class EvilInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    enc = plaindata.encode(EvilInt(5))
    assert type(enc) is int and enc == 5
    with pytest.raises(plaindata.Unencodable):
        plaindata.encode(object())
    with pytest.raises(plaindata.Unencodable):
        plaindata.encode(x for x in [])


# ---------------------------------------------------------------------------------------- running
def test_stdio_pass_and_fail(sb):
    code = "a, b = map(int, input().split())\nprint(a + b)\n"
    tests = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}, {"input": "5 6", "output": "11", "testtype": "stdin"}]
    v = sb.run(code, tests, kind="stdio")
    assert v.passed and v.status == "passed" and v.tests_passed == 2 and v.tests_total == 2
    v = sb.run("print(3)", tests, kind="stdio")
    assert not v.passed and v.status == "wrong_answer" and v.tests_passed == 1
    assert v.stdout.strip() == "3"


@pytest.mark.parametrize(
    "code,status",
    [
        ("print(", "compile_error"),
        ("raise ValueError('boom')", "runtime_error"),
        ("import sys; sys.exit(3)", "runtime_error"),
        ("while True: pass", "timeout"),
        ("import time; time.sleep(30)", "timeout"),
        ("x = bytearray(2 * 1024**3)", "memory_limit"),
    ],
)
def test_stdio_statuses(sb, code, status):
    v = sb.run(code, [{"input": "", "output": "1"}], kind="stdio", limits=Limits(cpu_s=1, wall_s=2, mem_mb=256))
    assert not v.passed
    assert v.status == status, v


def test_call_function_and_solution_class(sb):
    tests = [{"input": [[2, 7, 11, 15], 9], "output": [0, 1]}, {"input": [[3, 3], 6], "output": [0, 1]}]
    code = (
        "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
        "        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n"
        "            seen[x] = i\n"
    )
    assert sb.run(code, tests, kind="call", fn_name="twoSum").passed
    assert sb.run("def twoSum(n, t):\n    return (0, 1)\n", tests, kind="call", fn_name="twoSum").passed
    v = sb.run("def twoSum(n, t):\n    return [1, 0]\n", tests, kind="call", fn_name="twoSum")
    assert v.status == "wrong_answer" and v.tests_passed == 0
    v = sb.run("def other(): pass\n", tests, kind="call", fn_name="twoSum")
    assert v.status == "runtime_error" and "not defined" in v.detail
    v = sb.run("def twoSum(n, t):\n    return n[10]\n", tests, kind="call", fn_name="twoSum")
    assert v.status == "runtime_error" and "IndexError" in v.detail
    v = sb.run("def twoSum(n, t):\n    while True: pass\n", tests, kind="call", fn_name="twoSum", limits=Limits(cpu_s=1, wall_s=2))
    assert v.status == "timeout"


def test_call_float_tolerance_and_single_arg(sb):
    v = sb.run("def f(x):\n    return x / 3\n", [{"input": [1], "output": 0.3333333333}, {"input": 3, "output": 1}], kind="call", fn_name="f")
    assert v.passed, v


def test_stdout_captured_and_truncated_in_verdict(sb):
    v = sb.run("print('x' * 5000)", [{"input": "", "output": "y"}], kind="stdio")
    assert v.status == "wrong_answer" and len(v.stdout) < 2200 and "more chars" in v.stdout


def test_batch_keeps_order(sb):
    jobs = [sandbox.Job(f"print({i})", [{"input": "", "output": str(i if i % 3 else -1)}], "stdio") for i in range(12)]
    vs = sb.run_batch(jobs)
    assert [v.passed for v in vs] == [bool(i % 3) for i in range(12)]


def test_workers_survive_the_thread_that_started_them():
    """bwrap's --die-with-parent fires when the starting *thread* ends; batches use short-lived threads."""
    with sandbox.Sandbox(2, limits=FAST) as s:
        jobs = [sandbox.Job("print(1)", [{"input": "", "output": "1"}], "stdio")] * 4
        assert all(v.passed for v in s.run_batch(jobs))
        pids = [slot.cand.proc.pid for slot in s._all if slot.cand]
        assert all(v.passed for v in s.run_batch(jobs))
        assert [slot.cand.proc.pid for slot in s._all if slot.cand] == pids


def test_no_tests_and_bad_kind(sb):
    assert sb.run("print(1)", [], kind="stdio").status == "sandbox_error"
    with pytest.raises(ValueError, match="kind"):
        sb.run("print(1)", [{"input": "", "output": "1"}], kind="nope")
    with pytest.raises(ValueError, match="fn_name"):
        sb.run("def f(): pass", [{"input": [], "output": None}], kind="call")


def test_humaneval_pass_and_fail(sb):
    prompt = 'def add(a: int, b: int) -> int:\n    """Add."""\n'
    test = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
    tests = [{"input": test, "output": None, "testtype": "humaneval"}]
    v = sb.run(prompt + "    return a + b\n", tests, kind="call", fn_name="add", prompt=prompt)
    assert v.passed, v
    v = sb.run(prompt + "    return a - b\n", tests, kind="call", fn_name="add", prompt=prompt)
    assert v.status == "wrong_answer" and "assertion failed" in v.detail
    v = sb.run(prompt + "    return a +\n", tests, kind="call", fn_name="add", prompt=prompt)
    assert v.status == "compile_error"


# -------------------------------------------------------------------------------------- isolation
def test_backend_is_isolated_here(sb):
    assert sb.isolation.backend in ("bwrap", "unshare")
    v = sb.run("import socket\nprint(sorted(n for _, n in socket.if_nameindex()))", [{"input": "", "output": "['lo']"}], kind="stdio")
    assert v.passed, v  # a fresh network namespace: loopback only


def test_refuses_without_isolation(monkeypatch):
    monkeypatch.delenv("FADE_SANDBOX_UNSAFE", raising=False)
    monkeypatch.setattr(isolation, "tested", lambda backend, parent=None: isolation.Guarantees(backend, failures=("test",)))
    with pytest.raises(isolation.SandboxUnavailable, match="unsafe"):
        isolation.resolve("auto")
    with pytest.warns(RuntimeWarning, match="WITHOUT namespace isolation"):
        iso = isolation.resolve("auto", unsafe=True)
    assert iso.backend == "none" and not iso.isolated


def test_unsafe_backend_still_runs_and_limits(monkeypatch):
    with pytest.warns(RuntimeWarning):
        s = sandbox.Sandbox(1, backend="none", unsafe=True, limits=FAST)
    with s:
        assert s.run("print(input())", [{"input": "hi", "output": "hi"}], kind="stdio").passed
        assert s.run("while True: pass", [{"input": "", "output": ""}], kind="stdio", limits=Limits(cpu_s=1, wall_s=2)).status == "timeout"


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) is not installed")
def test_unshare_backend():
    with sandbox.Sandbox(1, backend="unshare", limits=FAST) as s:
        assert s.guarantees.missing() == [], s.guarantees.lines()
        code = "import socket, os\nprint(sorted(n for _, n in socket.if_nameindex()))\nprint(sorted(os.listdir('/tmp')))"
        v = s.run(code, [{"input": "", "output": "['lo']\n[]"}], kind="stdio")
        assert v.passed, v
        assert s.run("def f(x): return x * 2", [{"input": [2], "output": 4}], kind="call", fn_name="f").passed


def test_module_level_run():
    assert sandbox.run("print(sum(map(int, input().split())))", [{"input": "1 2 3", "output": "6"}], kind="stdio").passed
