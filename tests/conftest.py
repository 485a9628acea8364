"""Test-wide settings: telemetry off, Prefect on its ephemeral local API, `slow` tests opt-in."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.pop("PREFECT_API_URL", None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `slow` tests unless asked for; when they run, they run first (stable order otherwise), so that
    with pytest-xdist (`-n 2 --dist worksteal`, the README's test command) the long ones start at once on
    both workers and the many short ones fill the gaps, instead of one long test starting last."""
    if config.getoption("--runslow") or os.environ.get("FADE_RUN_SLOW") == "1":
        items.sort(key=lambda item: "slow" not in item.keywords)
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or FADE_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _restore_denormals():
    """The trainer flushes denormal floats to zero (torch.set_flush_denormal, a process-wide CPU flag);
    put the flag back after each test so later tests (hypothesis floats) see IEEE-754 behaviour."""
    yield
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_flush_denormal(False)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Prefect stops its in-process temporary API server at interpreter exit and logs that to a console
    stream pytest has already closed; without this, a passing run ends with a '--- Logging error ---'
    traceback that looks like a failure."""
    import logging

    logging.raiseExceptions = False
