"""A local Prefect server for tests: 127.0.0.1 only, a free port, telemetry off, its own process group.

Every `fade` command a test runs in a subprocess would otherwise start (and stop) a temporary server of
its own, several seconds each; the integration tests share one for the session instead
(conftest.py's ``prefect_api``), which is also how a user with a long-running server runs fade.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

TELEMETRY_ENV = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DVC_NO_ANALYTICS": "1"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM the process group started for ``proc``, then SIGKILL what is left."""
    if proc is None:
        return
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = None
    if pgid is not None:
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            # The leader is gone; children (uvicorn) may still be in the group.
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=5)


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prefect server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"prefect server at {url} not healthy after {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def server_env(home: Path, port: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server on 127.0.0.1:port with PREFECT_HOME=home (and of its clients)."""
    env = {k: v for k, v in (base if base is not None else os.environ).items() if not k.startswith("PREFECT_")}
    env.update(TELEMETRY_ENV)
    env.update(PREFECT_HOME=str(home), PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_SERVER_API_HOST="127.0.0.1",
               PREFECT_SERVER_API_PORT=str(port), PREFECT_SERVER_UI_ENABLED="false")
    return env


def start_server(folder: Path, env: dict[str, str], port: int, *, services: bool = False) -> subprocess.Popen[bytes]:
    """`prefect server start` on 127.0.0.1:port in its own session, logging to folder/server.log; returns
    once /api/health answers. Stop it with :func:`kill_group`."""
    log = folder / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port), "--no-ui",
             *([] if services else ["--no-services"])],
            cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}/api", proc, log)
    except BaseException:
        kill_group(proc)
        raise
    return proc
