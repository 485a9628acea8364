"""Verifiers: one entry point that turns (problem, completion) into a reward.

``score(problem, completion) -> Score`` dispatches on ``problem["kind"]`` (the problem table's
columns, see fade_core/data/schema.py):

- ``expression`` (countdown): :mod:`.expression`, :func:`fade_core.countdown_task.check` in-process
  (an AST whitelist, nothing evaluated); the numbers and target come from the row's metadata, else
  from the prompt text.
- ``math``: :mod:`.math_answers`, math-verify with the gold answer first, on the main thread of
  long-lived worker processes (threads and pools may call :func:`score` freely); integer answers
  compare as integers. Answers may be given in ``\\boxed{}``, ``\\fbox{}`` or ``\\framebox{}``.
- ``code_stdio`` / ``code_call``: :mod:`.programs`, the completion's program run in
  :mod:`fade_core.sandbox` against the row's tests, after the official harness's imports for TACO
  and LiveCodeBench (:mod:`.preludes`), judged as the row's metadata says (special judges by their
  ``checker`` program in a sandbox of its own; ``undecidable`` and ``passed_lenient`` rows).

Reward is 1.0 when the answer is verified correct, else 0.0 (``Score.passed``, :mod:`.result`);
``status`` says why. :func:`score_batch` runs many at once: countdown in-process, math in the
process pool, code in the sandbox's worker pool. :func:`shutdown` stops every pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from fade_core.verifiers import fields
from fade_core.verifiers.expression import score_expression
from fade_core.verifiers.math_answers import (
    MATH_TIMEOUT_S,
    MathPool,
    as_boxed,
    close_pool,
    collect,
    fast_score,
    last_boxed,
    score_math,
    submit,
)
from fade_core.verifiers.preludes import (
    LIVECODEBENCH_PRELUDE,
    PRELUDES,
    TACO_PRELUDE,
    Prelude,
    prelude_for,
    referenced_names,
)
from fade_core.verifiers.programs import (
    CHECKER_FUNCTION,
    close_checker_sandbox,
    code_job,
    extract_code,
    from_verdict,
    run_checker,
    score_code,
    undecidable,
    unsafe_requested,
)
from fade_core.verifiers.result import Score

KINDS = ("code_stdio", "code_call", "math", "expression")


def shutdown() -> None:
    """Stop the math workers, the checker sandbox and the default sandbox (all restart on next use)."""
    close_pool()
    close_checker_sandbox()
    from fade_core.sandbox import pool

    pool.close_default()


def _kind(problem: Mapping[str, Any]) -> str:
    kind = problem.get("kind")
    if kind not in KINDS:
        raise ValueError(f"problem {problem.get('problem_id')!r}: kind={kind!r} is not one of {KINDS}")
    return kind


def score(problem: Mapping[str, Any], completion: str) -> Score:
    """Score one completion against its problem (see the module docstring). Thread-safe."""
    kind = _kind(problem)
    if kind == "expression":
        return score_expression(problem, completion)
    if kind == "math":
        return score_math(problem, completion)
    return score_code(problem, completion, unsafe=unsafe_requested())


def score_batch(
    problems: Sequence[Mapping[str, Any]],
    completions: Sequence[str],
    workers: int | None = None,
    *,
    progress: bool = False,
    extract: bool = True,
) -> list[Score]:
    """Score ``completions[i]`` against ``problems[i]`` for every i; results in input order.
    ``workers``: sandbox slots and math processes (default: one per CPU). ``extract=False``: the
    completions of code problems are programs as they are (reference solutions)."""
    if len(problems) != len(completions):
        raise ValueError(f"{len(problems)} problems but {len(completions)} completions")
    out: list[Score | None] = [None] * len(problems)
    math_futs: dict[int, Future] = {}
    code_idx, jobs = [], []
    for i, (p, c) in enumerate(zip(problems, completions, strict=True)):
        kind = _kind(p)
        if kind == "expression":
            out[i] = score_expression(p, c)
        elif kind == "math":
            gold = fields.get(p, "answer")
            if gold is None or str(gold).strip() == "":
                raise ValueError(f"problems[{i}] ({p.get('problem_id')!r}): math problem without an answer")
            fast = fast_score(str(gold), c)
            if fast is not None:
                out[i] = fast
            else:
                math_futs[i] = submit(str(gold), c, workers)
        else:
            job = code_job(p, c, extract=extract)
            skipped = undecidable(job)
            if skipped is not None:
                out[i] = skipped
            else:
                code_idx.append(i)
                jobs.append(job)
    if jobs:
        from fade_core.sandbox import default_sandbox

        verdicts = default_sandbox(workers, unsafe=unsafe_requested()).run_batch(jobs, progress=progress)
        for i, job, v in zip(code_idx, jobs, verdicts, strict=True):
            out[i] = from_verdict(v, job.judge)
    for i, fut in math_futs.items():
        out[i] = collect(fut)
    return [s for s in out if s is not None]


__all__ = [
    "CHECKER_FUNCTION", "KINDS", "LIVECODEBENCH_PRELUDE", "MATH_TIMEOUT_S", "PRELUDES", "TACO_PRELUDE", "MathPool",
    "Prelude", "Score", "as_boxed", "code_job", "extract_code", "last_boxed", "prelude_for", "referenced_names",
    "run_checker", "score", "score_batch", "score_code", "score_expression", "score_math", "shutdown",
]  # fmt: skip
