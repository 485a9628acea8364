"""The code judge (kinds ``code_stdio`` / ``code_call``): the program runs in :mod:`fade_core.sandbox`
against the row's tests.

The program is the last fenced ```python block of the completion if it has one, else the raw text
(:func:`extract_code`). HumanEval rows (tests of testtype "humaneval") run ``prompt + completion`` (or
``prompt`` + the last fenced block that defines the entry point, when one does) against the ``check``
program. TACO and LiveCodeBench programs run after their harness's imports
(:mod:`fade_core.verifiers.preludes`). The output judge comes from the row's metadata
(:func:`fade_core.sandbox.compare.judge_from_metadata`): a special-judge row with a ``checker``
program is decided by that program, run in a sandbox of its own (:func:`run_checker`); one that
nothing can decide scores 0 with status ``undecidable`` without running (``fade prepare`` leaves such
rows out unless asked); one included with the lenient rule passes with status ``passed_lenient``.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

from fade_core.sandbox import compare
from fade_core.verifiers import fields
from fade_core.verifiers.preludes import prelude_for
from fade_core.verifiers.result import Score, failed, passed

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def code_blocks(completion: str) -> list[str]:
    """The completion's ```python (or ```py) fenced blocks in order; if it has none, its fenced blocks of
    any language; an unclosed last fence runs to the end."""
    blocks = _FENCE.findall(completion)
    py = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    return py or [body for _, body in blocks]


def extract_code(completion: str) -> str:
    """The last ```python (or ```py) fenced block; else the last fenced block of any language; else
    the raw completion."""
    blocks = code_blocks(completion)
    return blocks[-1] if blocks else completion


# ---------------------------------------------------------------------------------------- checkers
CHECKER_FUNCTION = "check"
_checker_sandbox = None
_checker_lock = threading.Lock()


def unsafe_requested() -> bool:
    """Whether the process-wide sandbox settings allow running without isolation (``sandbox.unsafe``)."""
    return os.environ.get("FADE_SANDBOX_UNSAFE") == "1"


def run_checker(checker: str, test_input: str, output: str, expected: str) -> tuple[bool, str]:
    """Decide one test of a special-judge problem with the problem's checker program.

    The checker defines ``check(input: str, output: str, expected: str) -> bool`` (the test's input,
    the candidate's stdout, the reference output); only a returned ``True`` accepts. It runs in call
    mode in a sandbox pool of its own, never in the candidates' pool (the candidate's slot is held
    while its output is judged) and never in this process: the candidate's output is untrusted input
    to the checker. A checker that fails to load, raises or times out rejects."""
    global _checker_sandbox
    from fade_core.sandbox import Sandbox

    with _checker_lock:
        if _checker_sandbox is None:
            _checker_sandbox = Sandbox(unsafe=unsafe_requested())
            atexit.register(close_checker_sandbox)
        box = _checker_sandbox
    test = {"input": [test_input, output, expected], "output": True, "testtype": "functional"}
    v = box.run(checker, [test], kind="call", fn_name=CHECKER_FUNCTION)
    if v.passed:
        return True, "accepted by the checker"
    if v.status == "wrong_answer":
        return False, "rejected by the checker"
    return False, f"the checker failed ({v.status}): {v.detail}"[:500]


def close_checker_sandbox() -> None:
    """Stop the checkers' sandbox (it restarts on next use)."""
    global _checker_sandbox
    with _checker_lock:
        box, _checker_sandbox = _checker_sandbox, None
    if box is not None:
        box.close()


compare.set_checker_runner(run_checker)


# ---------------------------------------------------------------------------------------- programs
def code_job(problem: Mapping[str, Any], completion: str, *, extract: bool = True):
    """The sandbox :class:`~fade_core.sandbox.Job` of a code problem and completion (``extract``:
    take the program out of the completion's fenced block; False: ``completion`` is the program, as
    for reference solutions)."""
    from fade_core.sandbox import Job

    kind = fields.get(problem, "kind")
    tests = fields.tests(problem)
    fn_name = fields.get(problem, "fn_name") or None
    md = fields.metadata(problem)
    judge, tol = compare.judge_from_metadata(md)
    prompt = str(fields.get(problem, "prompt") or "")
    if any(t.get("testtype") == "humaneval" for t in tests):
        # chat models answer with the function in a block and often a usage example in a later one: the
        # program is the last block that defines the entry point (one program runs, so the choice gives the
        # model no second try), else the completion as a continuation of the prompt
        defining = [b for b in code_blocks(completion) if fn_name and re.search(
            rf"^\s*def\s+{re.escape(fn_name)}\s*\(", b, re.M)] if extract and "```" in completion else []
        program = prompt + "\n" + defining[-1] if defining else prompt + completion
        return Job(program, tests, "call", fn_name=fn_name, prompt=prompt, judge=judge, float_tol=tol)
    code = extract_code(completion) if extract else completion
    sb_kind = "stdio" if kind == "code_stdio" else "call"
    if sb_kind == "call" and not fn_name:
        raise ValueError(f"problem {problem.get('problem_id')!r}: code_call problem without fn_name")
    prelude = prelude_for(problem, md)
    if prelude is not None:
        code = prelude.apply(code, stdio=sb_kind == "stdio")
    if judge == "checker":
        if sb_kind == "stdio":
            tests = [
                {**t, "output": compare.checker_envelope(md["checker"], t["input"], t["output"])}
                for t in tests
            ]
        else:  # call-mode tests compare returned values; a checker decides stdout only
            judge = "no_checker"
    return Job(code, tests, sb_kind, fn_name=fn_name, judge=judge, float_tol=tol)


def undecidable(job) -> Score | None:
    """The score of a job that must not run: a special-judge problem nothing can decide."""
    return failed("undecidable", compare.NO_CHECKER_REASON) if job.judge == "no_checker" else None


def from_verdict(v, judge: str = "lines") -> Score:
    """The score of a sandbox :class:`~fade_core.sandbox.Verdict` judged with ``judge``."""
    detail = f"{v.tests_passed}/{v.tests_total} tests; {v.detail}"
    if judge == "special_lenient":
        detail += f"; {compare.LENIENT_LABEL}"
        return Score(1.0, True, "passed_lenient", detail) if v.passed else failed(v.status, detail)
    return passed(detail) if v.passed else failed(v.status, detail)


def score_code(
    problem: Mapping[str, Any], completion: str, *, unsafe: bool = False, extract: bool = True
) -> Score:
    """One completion of a code problem, run in the process-wide sandbox (see :func:`code_job`)."""
    from fade_core.sandbox import default_sandbox

    job = code_job(problem, completion, extract=extract)
    skipped = undecidable(job)
    if skipped is not None:
        return skipped
    return from_verdict(default_sandbox(unsafe=unsafe).run_batch([job])[0], job.judge)
