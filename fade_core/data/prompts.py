"""The prompt: the one rule, shared by training and evaluation, for the text a policy is conditioned on.

Training (fade_core.train) and evaluation (fade_core.evaluate) both call :func:`prompt_text`, so a policy
is evaluated on exactly the text it was trained on. The text is the problem's ``prompt`` column (see
fade_core.data.schema), plus its starter code for code problems whose prompt does not already end with
it (HumanEval prompts already end with the function signature; LiveCodeBench / TACO call-based problems
give the signature separately as ``starter_code``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CODE_KINDS = ("code_stdio", "code_call")


def prompt_text(problem: Mapping[str, Any]) -> str:
    """The text the policy is conditioned on for one problem row (a mapping with ``prompt``, and
    optionally ``kind`` and ``starter_code``)."""
    prompt = str(problem["prompt"])
    starter = problem.get("starter_code") or ""
    if problem.get("kind") in CODE_KINDS and starter and not prompt.rstrip().endswith(starter.rstrip()):
        prompt = prompt.rstrip("\n") + "\n\n" + starter
    return prompt
