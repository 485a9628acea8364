"""The countdown judge (kind ``expression``): :func:`fade_core.countdown_task.check` in-process, an AST
whitelist, nothing evaluated."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fade_core import countdown_task as countdown
from fade_core.verifiers import fields
from fade_core.verifiers.result import Score, failed, passed

_PROMPT_RE = re.compile(r"^\s*([\d\s]+?)\s*->\s*(-?\d+)\s*:")


def score_expression(problem: Mapping[str, Any], completion: str) -> Score:
    """Countdown: numbers and target from metadata (or the prompt), checked by countdown.check."""
    md = fields.metadata(problem)
    numbers, target = md.get("numbers"), md.get("target")
    if numbers is None or target is None:
        m = _PROMPT_RE.match(str(problem.get("prompt", "")))
        if not m:
            raise ValueError(
                f"problem {problem.get('problem_id')!r}: no numbers/target in metadata or prompt"
            )
        numbers, target = [int(x) for x in m.group(1).split()], int(m.group(2))
    ok, reason = countdown.check(completion, numbers, int(target))
    return passed() if ok else failed("wrong_answer" if reason != "empty" else "no_answer", reason)
