"""A study's run-time ledger: ``runtime.json`` in the study's folder holds one entry per sitting of
`fade study run` (when it finished, its seconds, whether it was a --quick run or was stopped, and the seconds of
each stage it finished), so that a study resumed over several sittings states what it took in all.

    {"total_seconds": 9385.2,
     "sittings": [{"finished": "...", "seconds": 6087.1, "quick": false, "interrupted": true,
                   "stages": {"lr sweep": 2886.0, ..., "stopped sittings (their stage split not recorded)": 2986.3}},
                  ...]}
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def read_sittings(path: Path) -> list[dict[str, Any]]:
    """The sittings recorded in a study's runtime.json (none when it does not exist yet)."""
    if not path.exists():
        return []
    try:
        return list(json.loads(path.read_text()).get("sittings", []))
    except (ValueError, AttributeError) as e:
        raise ValueError(f"{path}: not a study runtime record ({e}); move it away to start the count anew") from e


INTERRUPTED_STAGE = "stopped sittings (their stage split not recorded)"
"""The stage name under which a stopped sitting's time after its last finished stage is counted."""


def record_sitting(root: Path, seconds: float, quick: bool, stages: dict[str, float] | None = None,
                   interrupted: bool = False) -> tuple[float, int]:
    """Add this sitting (its seconds and, when known, its per-stage seconds) to root/runtime.json; return
    (total seconds, sittings) of the study in that folder. ``interrupted``: the sitting stopped before the study
    was written (a failure, Ctrl-C, SIGTERM); its time counts in the total all the same."""
    path = root / "runtime.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    sittings = read_sittings(path)
    sittings.append({"finished": datetime.now(UTC).isoformat(timespec="seconds"), "seconds": round(seconds, 1),
                     "quick": quick, **({"interrupted": True} if interrupted else {}),
                     **({"stages": {k: round(float(v), 1) for k, v in stages.items()}} if stages else {})})
    total = sum(float(s.get("seconds", 0.0)) for s in sittings)
    path.write_text(json.dumps({"total_seconds": round(total, 1), "sittings": sittings}, indent=2) + "\n")
    return total, len(sittings)


def stage_seconds(root: Path) -> tuple[dict[str, float] | None, bool]:
    """Per-stage seconds of the study in root, summed over its sittings: (stages, True) when every sitting
    recorded its stages; else (the last sitting's stages or None, False)."""
    sittings = read_sittings(root / "runtime.json")
    if sittings and all(isinstance(s.get("stages"), dict) for s in sittings):
        total: dict[str, float] = {}
        for s in sittings:
            for k, v in s["stages"].items():
                total[k] = total.get(k, 0.0) + float(v)
        return total, True
    last = sittings[-1].get("stages") if sittings else None
    return (dict(last) if isinstance(last, dict) else None), False
