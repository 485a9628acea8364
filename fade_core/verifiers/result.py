"""What every judge returns: :class:`Score`, and the two ways to make one."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Score:
    """reward in [0, 1]; passed; status (passed, passed_lenient, wrong_answer, no_answer, timeout,
    runtime_error, compile_error, memory_limit, output_limit, sandbox_error, undecidable, error);
    detail (free text). ``passed_lenient``: passed under the lenient special-judge rule, which also
    passes some invalid answers (see fade_core.sandbox.compare)."""

    reward: float
    passed: bool
    status: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def passed(detail: str = "ok") -> Score:
    """Reward 1.0, status ``passed``."""
    return Score(1.0, True, "passed", detail)


def failed(status: str, detail: str = "") -> Score:
    """Reward 0.0 with ``status`` saying why."""
    return Score(0.0, False, status, detail)
