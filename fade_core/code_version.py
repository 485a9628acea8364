"""The git state of the code that is running: which commit, whether tracked files had uncommitted changes, which
branch. A report names it for itself (fade_core.report.provenance) and every training run records it at each
(re)start (``code.jsonl`` in the run folder, fade_core.runs), so a report built later, after more commits, still
says what code trained its runs. Outside a git checkout (an installed wheel) or without git: all None."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The checkout holding fade_core (when fade runs from one)."""


def _git(repo: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(repo: str | Path = REPO) -> tuple[str | None, bool | None, str | None]:
    """(commit, has uncommitted changes to tracked files, branch) of the git checkout holding ``repo``;
    Nones outside a checkout (an installed wheel) or without git."""
    repo = Path(repo)
    commit = _git(repo, "rev-parse", "HEAD")
    if commit is None:
        return None, None, None
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    branch = _git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    return commit, (bool(status) if status is not None else None), branch
