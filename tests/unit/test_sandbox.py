"""fade_core.sandbox: comparison, plain data, statuses, kinds, backends, refusal without isolation."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import struct

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from fade_core import sandbox
from fade_core.sandbox import Limits, compare, isolation, plaindata, pool, syscall_filter, workers

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
        ("1e-9", "0", False),  # the expected token is an integer: exact
        ("1e-9", "0.0", True),
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
    assert compare.compare_stdout("3 \n", "3", "exact")[0]
    assert not compare.compare_stdout(" 3", "3", "exact")[0]
    assert compare.judge_from_metadata({"special_judge": True})[0] == "no_checker"
    assert compare.judge_from_metadata({"judge": "exact", "float_tol": 0.1}) == ("exact", 0.1)
    assert compare.judge_from_metadata(None)[0] == "lines"
    with pytest.raises(ValueError, match="judge"):
        compare.judge_from_metadata({"judge": "nope"})


def test_values_equal_is_strict_about_types():
    assert compare.values_equal((1, 2), [1, 2])
    assert not compare.values_equal([1.0000000001], [1])  # an expected int compares exactly
    assert compare.values_equal([1.0000000001], [1.0])
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
    # the memory case gets time to spare so that only the ceiling can end it (first-touching 256 MiB took over
    # a second of CPU on a fresh CI VM, and the program was stopped for time first)
    roomy = status == "memory_limit"
    lim = Limits(cpu_s=10 if roomy else 1, wall_s=20 if roomy else 2, mem_mb=256)
    v = sb.run(code, [{"input": "", "output": "1"}], kind="stdio", limits=lim)
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
    monkeypatch.setattr(pool, "tested", lambda backend, parent=None: isolation.Guarantees(backend, failures=("test",)))
    with pytest.raises(isolation.SandboxUnavailable, match="unsafe"):
        pool.resolve("auto")
    with pytest.warns(RuntimeWarning, match="WITHOUT namespace isolation"):
        iso = pool.resolve("auto", unsafe=True)
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
        # /tmp is fresh and empty, but for the mount point of a Python that lives under /tmp (read-only)
        tmp = sorted({d.split("/")[2] for d in isolation.python_dirs() if d.startswith("/tmp/")})
        v = s.run(code, [{"input": "", "output": f"['lo']\n{tmp}"}], kind="stdio")
        assert v.passed, v
        assert s.run("def f(x): return x * 2", [{"input": [2], "output": 4}], kind="call", fn_name="f").passed


def test_module_level_run():
    assert sandbox.run("print(sum(map(int, input().split())))", [{"input": "1 2 3", "output": "6"}], kind="stdio").passed


# ------------------------------------------------------------------------------- hardening (issue 13)
def test_bounded_parse_refuses_deep_and_big_frames():
    deep = b"[" * 990 + b"]" * 990
    with pytest.raises(ValueError, match="deeper"):
        plaindata.loads_bounded(deep, max_bytes=1 << 20)
    with pytest.raises(ValueError, match="cap"):
        plaindata.loads_bounded(b"[1]" * 10, max_bytes=8)
    with pytest.raises(ValueError):
        plaindata.loads_bounded(b"\xff\xfe{", max_bytes=100)
    # brackets inside strings do not count; a wide, shallow value is fine
    assert plaindata.loads_bounded(b'["' + b"[" * 5000 + b'"]', max_bytes=1 << 20) == ["[" * 5000]
    assert plaindata.loads_bounded(b"[" + b",".join([b"[1]"] * 5000) + b"]", max_bytes=1 << 20) == [[1]] * 5000
    assert plaindata.json_depth_exceeds(b'["\\\\", [[[]]]]', 3) and not plaindata.json_depth_exceeds(b'["\\\\", [[[]]]]', 4)


def test_status_rests_on_the_kernel_not_on_stderr():
    lim = Limits()
    forged = {"exit": 1, "signal": None, "killed": None, "oom": False, "cpu": 0.1, "stderr": "MemoryError\nstd::bad_alloc"}
    assert workers.classify(forged, lim) == "runtime_error"
    assert workers.classify({**forged, "oom": True, "signal": 9, "exit": None}, lim) == "memory_limit"
    assert workers.classify({**forged, "killed": "cpu"}, lim) == "timeout"
    assert workers.classify({**forged, "killed": "output"}, lim) == "output_limit"
    assert workers.classify({"exit": 0, "signal": None, "killed": None, "oom": "yes"}, lim) is None  # only True counts


def test_seccomp_filter_program():
    prog = syscall_filter.build("x86_64")
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096
    code, _, _, k = struct.unpack("HBBI", prog[8:16])  # second instruction: the architecture check
    assert k == syscall_filter.AUDIT_ARCH["x86_64"]
    assert len(syscall_filter.build("aarch64")) % 8 == 0
    with pytest.raises(syscall_filter.FilterUnavailable):
        syscall_filter.build("sparc")


@pytest.mark.skipif(syscall_filter.machine() not in syscall_filter.SYSCALLS, reason="no syscall table for this machine")
def test_seccomp_filter_in_a_child():
    """Denied calls get EPERM (clone3 ENOSYS), everything a program needs still works."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            import ctypes
            import threading

            syscall_filter.install()
            libc = ctypes.CDLL(None, use_errno=True)
            nr = syscall_filter.SYSCALLS[syscall_filter.machine()]
            out = []
            for name, args in (("keyctl", (0, -4, 0)), ("unshare", (0x10000000,)), ("ptrace", (16, 1, 0, 0)), ("clone3", (0, 0))):
                rc = libc.syscall(nr[name], *args)
                out.append(ctypes.get_errno() if rc < 0 else 0)
            out.append(libc.syscall(nr["unshare"], 0x400))  # CLONE_FILES: no namespace, allowed
            t = threading.Thread(target=lambda: None)
            t.start()
            t.join()
            child = os.fork()
            if child == 0:
                os._exit(7)
            out.append(os.waitpid(child, 0)[1] >> 8)
            os.write(w, repr(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 1000).decode()
    os.waitpid(pid, 0)
    assert got == repr([errno.EPERM, errno.EPERM, errno.EPERM, errno.ENOSYS, 0, 7])


def test_thread_idiom_and_endless_thread(sb):
    """Issue 14.5: main() in a thread is joined before output is collected; an endless thread times out."""
    idiom = ("import sys, threading\ndef main():\n    a, b = map(int, input().split())\n    print(a + b)\n"
             "threading.stack_size(64 * 1024 * 1024)\nthreading.Thread(target=main).start()\n")  # fmt: skip
    assert sb.run(idiom, [{"input": "2 3", "output": "5"}], kind="stdio").passed
    endless = "import threading, time\nthreading.Thread(target=time.sleep, args=(100,)).start()\nprint(5)\n"
    v = sb.run(endless, [{"input": "", "output": "5"}], kind="stdio", limits=Limits(cpu_s=1, wall_s=1))
    assert v.status == "timeout", v
    v = sb.run("import threading\ndef f(x):\n    threading.Thread(target=print, args=('late',)).start()\n    return x\n",
               [{"input": [1], "output": 1}], kind="call", fn_name="f")  # fmt: skip
    assert v.passed and "late" in v.stdout, v


def test_a_stale_reply_resets_the_slot(sb):
    """A reply the parent did not ask for (here: a desynchronised request) is an anomaly: the slot's
    workers are replaced, the verdict is sandbox_error, and the next program is judged normally."""
    assert sb.run("print(1)", [{"input": "", "output": "1"}], kind="stdio").passed
    for slot in sb._all:
        if slot.cand is not None:
            slot.cand.send({"op": "nonsense"})  # its reply will arrive before the next real one
    vs = [sb.run("print(1)", [{"input": "", "output": "1"}], kind="stdio") for _ in sb._all]
    assert any(v.status == "sandbox_error" and "worker reported" in v.detail for v in vs), vs
    assert all(v.passed or v.status == "sandbox_error" for v in vs)
    assert sb.run("print(2)", [{"input": "", "output": "1"}], kind="stdio").status == "wrong_answer"
    assert sb.run("print(1)", [{"input": "", "output": "1"}], kind="stdio").passed


def test_auto_logs_the_choice_and_why(monkeypatch, caplog):
    good = isolation.Guarantees("unshare", filesystem=True, network=True, sample_state=True, python=True)
    bad = isolation.Guarantees("bwrap", network=True, failures=("host file visible",))
    monkeypatch.setattr(pool, "tested", lambda b, parent=None: bad if b == "bwrap" else good)
    monkeypatch.delenv("FADE_SANDBOX_UNSAFE", raising=False)
    with caplog.at_level("INFO", logger="fade_core.sandbox.pool"):
        iso = pool.resolve("auto")
    assert iso.backend == "unshare" and iso.guarantees is good
    assert "bwrap refused: no filesystem, sample_state, python (host file visible)" in caplog.text
    with pytest.raises(isolation.SandboxUnavailable, match="bwrap refused"):
        pool.resolve("bwrap")
    with pytest.warns(RuntimeWarning, match="unsafe"):
        assert pool.resolve("bwrap", unsafe=True).backend == "bwrap"


def test_self_test_refuses_a_memory_limit_that_did_not_stop_the_program(monkeypatch):
    """The self-test's memory probe, run through the slot as the pool runs programs: a program that is
    not stopped leaves memory per process; a worker lost on it is a sandbox_error, not a crash."""
    from fade_core.sandbox import selftest

    backend = next((b for b in isolation.PREFERENCE if isolation.available(b) is None), None)
    layout, why = isolation.cgroup_layout(None)
    if backend is None or layout is None:
        pytest.skip(f"needs an isolation backend and per-sample cgroups here ({backend=}, {why})")
    monkeypatch.setattr(selftest, "MEMORY_HOG", "print(1)\n")
    g = selftest.self_test(backend)
    assert not g.memory_per_sample and g.filesystem and g.tasks_per_sample, g.lines()
    assert any("did not stop a 96 MiB program" in f and "(ran to the end)" in f for f in g.failures), g.failures
    real_run = selftest._run

    def lose_the_worker_on_the_hog(slot, code, lim):
        if code == selftest.MEMORY_HOG:
            slot.cand.close()
            raise workers.WorkerLost("worker exited")
        return real_run(slot, code, lim)

    monkeypatch.setattr(selftest, "_run", lose_the_worker_on_the_hog)
    g = selftest.self_test(backend)
    assert not g.memory_per_sample and g.tasks_per_sample, g.lines()  # a fresh worker ran the task probe
    assert any("(sandbox_error)" in f for f in g.failures), g.failures


def test_use_settings_sets_the_process_wide_defaults(monkeypatch):
    for k in ("FADE_SANDBOX_BACKEND", "FADE_SANDBOX_UNSAFE", "FADE_SANDBOX_CGROUP"):
        monkeypatch.delenv(k, raising=False)
    sandbox.use_settings(backend="unshare", unsafe=True, cgroup_parent="/fade")
    assert (os.environ["FADE_SANDBOX_BACKEND"], os.environ["FADE_SANDBOX_UNSAFE"], os.environ["FADE_SANDBOX_CGROUP"]) == (
        "unshare", "1", "/fade")
    sandbox.use_settings(unsafe=False, cgroup_parent="")
    assert "FADE_SANDBOX_UNSAFE" not in os.environ and "FADE_SANDBOX_CGROUP" not in os.environ


def test_guarantees_here(sb):
    """On this machine the chosen backend shows every required guarantee (the CI runs as root)."""
    g = sb.guarantees
    assert g is not None and g.missing() == [], g.lines()
    assert g.syscall_filter and g.worker_unreachable


def test_score_batch_survives_a_deeply_nested_reply():
    """Issue 13, class 5: a 990-deep return value used to raise RecursionError in the parent and lose
    every verdict of the batch (run_batch, score_batch, `fade verify`)."""
    from fade_core import verifiers

    he_prompt = 'def f(x):\n    """x + 1"""\n'
    he_tests = json.dumps([{"input": "def check(candidate):\n    assert candidate(1) == 2\n", "output": None, "testtype": "humaneval"}])
    call = {"problem_id": "deep", "kind": "code_call", "fn_name": "f", "tests": json.dumps([{"input": [1], "output": 2}])}
    he = {"problem_id": "he", "kind": "code_call", "fn_name": "f", "prompt": he_prompt, "tests": he_tests}
    deep = "def f(x):\n    v = []\n    for _ in range(990):\n        v = [v]\n    return v\n"
    he_deep = "    v = []\n    for _ in range(990):\n        v = [v]\n    return v\n"
    problems = [call, call, he, he, he]
    completions = [deep, "def f(x):\n    return x + 1\n", he_deep, "    return x\n", "    return x + 1\n"]
    try:
        scores = verifiers.score_batch(problems, completions, workers=1)
    finally:
        verifiers.shutdown()
    assert [s.passed for s in scores] == [False, True, False, False, True], scores
    assert scores[0].status != "sandbox_error" and scores[2].status != "sandbox_error", scores


def test_verify_self_test_prints_the_guarantees(monkeypatch):
    """`fade verify --self-test`: every backend's findings and the one in force; exit 2 without one."""
    from typer.testing import CliRunner

    from flows import verify as verify_flow

    monkeypatch.delenv("FADE_SANDBOX_UNSAFE", raising=False)
    lines, ok = verify_flow.self_test_report("auto")
    text = "\n".join(lines)
    assert ok and "[bwrap]" in text and "[unshare]" in text and "in force (auto): " in text, text
    assert "per-sample cgroups:" in text and "seccomp filter: yes" in text
    app = typer.Typer()
    app.callback()(lambda: None)
    verify_flow.register(app)
    refused = isolation.Guarantees("x", failures=("test",))
    monkeypatch.setattr(pool, "tested", lambda b, parent=None: refused)
    res = CliRunner().invoke(app, ["verify", "--self-test"])
    assert res.exit_code == 2 and "in force: NONE" in res.output, res.output


@pytest.mark.parametrize(
    "frame,why",
    [
        (b"\xff\xff\xff\xffgarbage", "exceeds the cap"),
        (struct.pack(">I", 7) + b"garbage", "malformed reply"),
        (struct.pack(">I", 1980) + b"[" * 990 + b"]" * 990, "deeper"),
        (struct.pack(">I", 3) + b"[1]", "not an object"),
        (struct.pack(">I", 28) + b'{"sandbox_error": "boom!!!"}', "worker reported: boom"),
    ],
)
def test_parent_refuses_a_bad_reply_without_raising_anything_else(frame, why):
    """Class 5: whatever arrives on the protocol socket, the parent raises WorkerLost (the slot is then
    reset), never RecursionError, MemoryError or a JSON error."""
    import socket
    import time

    w = workers.Worker.__new__(workers.Worker)
    w.sock, theirs = socket.socketpair()
    w.fd = w.sock.fileno()
    try:
        theirs.sendall(frame)
        with pytest.raises(workers.WorkerLost, match=why):
            w.recv(time.monotonic() + 2, cap=1 << 20)
    finally:
        w.sock.close()
        theirs.close()
