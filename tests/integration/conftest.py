"""Integration-test fixtures: one local Prefect server (127.0.0.1) shared by the tests that run `fade`
commands in subprocesses, so that each command talks to it instead of starting a temporary one."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prefect_local import free_port, kill_group, server_env, start_server  # noqa: E402


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The API URL of a Prefect server on 127.0.0.1 started for this test session (killed at its end)."""
    folder = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    proc = start_server(folder, server_env(folder / "home", port), port)
    try:
        yield f"http://127.0.0.1:{port}/api"
    finally:
        kill_group(proc)
