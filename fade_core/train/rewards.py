"""Rewards of rollouts inside the training loop: the verifiers' scores, a verdict per rollout, a few examples.

Every rollout is scored by :func:`fade_core.verifiers.score_batch`, the function evaluation uses: code in
the sandbox (the program is taken out of the completion's fenced block, as at evaluation), math with
math-verify, countdown in-process. Each score also gets a **verdict**, one of :data:`VERDICTS`, so that a
user sees why rewards are zero while the run trains (the step record's ``verdict/<name>`` counts)::

    passed          the verifier accepted it (passed, or passed_lenient for a lenient special judge)
    wrong_answer    ran, wrong output or answer
    compile_error   the program does not compile (a fenced block that is not valid Python)
    runtime_error   the program raised
    timeout         a test ran out of time
    resource_limit  memory or output limit
    no_code         a code completion with no fenced block whose text is not a program (prose, empty)
    no_answer       math / countdown: no answer could be parsed (e.g. no \\boxed{}, nothing written)
    other           sandbox error, a special-judge problem nothing can decide, any other failure

A step also keeps :data:`EXAMPLES_PER_STEP` example rollouts (:func:`pick_examples`): the prompt, the
completion, the reward and the verdict, of different verdicts where the step has them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

VERDICTS = (
    "passed", "wrong_answer", "compile_error", "runtime_error", "timeout", "resource_limit", "no_code",
    "no_answer", "other",
)
VERDICT_INDEX = {v: i for i, v in enumerate(VERDICTS)}
EXAMPLES_PER_STEP = 2
EXAMPLE_MAX_CHARS = 2000
_STATUS_VERDICT = {
    "passed": "passed", "passed_lenient": "passed", "wrong_answer": "wrong_answer",
    "compile_error": "compile_error", "runtime_error": "runtime_error", "timeout": "timeout",
    "memory_limit": "resource_limit", "output_limit": "resource_limit", "no_answer": "no_answer",
}
_FENCE = re.compile(r"```")


@dataclass(frozen=True)
class Reward:
    """One rollout's score: ``reward`` and ``passed`` as the verifier gave them, its ``status``, the
    :data:`VERDICTS` name ``verdict`` and the verifier's ``detail``."""

    reward: float
    passed: bool
    status: str
    verdict: str
    detail: str = ""


def is_humaneval(problem: Mapping[str, Any]) -> bool:
    """A problem judged by HumanEval's check program (its completions may be bare function bodies)."""
    tests = problem.get("tests") or ""
    return '"humaneval"' in tests if isinstance(tests, str) else any(t.get("testtype") == "humaneval" for t in tests)


def verdict_of(problem: Mapping[str, Any], completion: str, status: str, passed: bool) -> str:
    """The verdict (:data:`VERDICTS`) of a verifier ``status`` for ``completion`` of ``problem``."""
    if passed:
        return "passed"
    if problem.get("kind") in ("code_stdio", "code_call") and not is_humaneval(problem):
        if not _FENCE.search(completion) and (status == "compile_error" or not completion.strip()):
            return "no_code"
    return _STATUS_VERDICT.get(status, "other")


def score_rollouts(
    problems: Sequence[Mapping[str, Any]], completions: Sequence[str], *, workers: int | None = None,
    score_batch: Callable[..., list[Any]] | None = None,
) -> list[Reward]:
    """Score ``completions[i]`` against ``problems[i]`` with the verifiers (``score_batch`` overrides
    :func:`fade_core.verifiers.score_batch`, for tests) and give each its verdict."""
    if score_batch is None:
        from fade_core.verifiers import score_batch
    if not problems:
        return []
    scores = score_batch(problems, completions, workers=workers)
    if len(scores) != len(completions):
        raise RuntimeError(f"score_batch returned {len(scores)} scores for {len(completions)} completions")
    return [
        Reward(float(s.reward), bool(s.passed), str(s.status), verdict_of(p, c, str(s.status), bool(s.passed)),
               str(getattr(s, "detail", "")))
        for p, c, s in zip(problems, completions, scores, strict=True)
    ]


def verdict_counts(verdicts: Iterable[str]) -> dict[str, int]:
    """``{"verdict/<name>": count}`` for every name of :data:`VERDICTS` (zeros included, so every step's
    record has the same columns)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        counts[v if v in counts else "other"] += 1
    return {f"verdict/{k}": n for k, n in counts.items()}


def clip_text(text: str, limit: int = EXAMPLE_MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"


def pick_examples(
    problem_ids: Sequence[str], prompts: Sequence[str], completions: Sequence[str], rewards: Sequence[Reward],
    k: int = EXAMPLES_PER_STEP,
) -> list[dict[str, Any]]:
    """Up to ``k`` rollouts as {problem_id, prompt, completion, reward, verdict}: the first rollout of each
    verdict in order (a passed and a failed one when the step has both), then the first ones left.
    Prompts and completions are clipped to :data:`EXAMPLE_MAX_CHARS` characters."""
    chosen: list[int] = []
    seen: set[str] = set()
    for i, r in enumerate(rewards):
        if len(chosen) < k and r.verdict not in seen:
            chosen.append(i)
            seen.add(r.verdict)
    chosen += [i for i in range(len(rewards)) if i not in chosen][: max(0, k - len(chosen))]
    return [
        {"problem_id": problem_ids[i], "prompt": clip_text(prompts[i]), "completion": clip_text(completions[i]),
         "reward": rewards[i].reward, "verdict": rewards[i].verdict}
        for i in sorted(chosen)
    ]
