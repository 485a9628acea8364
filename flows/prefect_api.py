"""One Prefect API per `fade` command: started once, shared by every worker and subprocess, stopped at the end.

Without it every process that talks to Prefect (the command, and each Dask worker of `fade run`) starts a
temporary server of its own, each with Prefect's 20-second start-up bound, which a loaded machine misses.
Instead, a command that runs flows calls :func:`start` once (``flows.options.load_config`` does, after the
config validated, when ``flows.cli`` armed it with :func:`arm`):

* ``PREFECT_API_URL`` set (a user's server, Prefect Cloud): that API is used; a local one (127.0.0.1 or
  localhost) is probed first, so a server that is down fails in one line instead of in every task.
* otherwise: one Prefect server (Prefect's own ASGI app under uvicorn, no UI, on 127.0.0.1 and a free port)
  is started in a session of its own with a wall-clock start-up bound that fits a loaded machine
  (``FADE_API_STARTUP_TIMEOUT``, default :data:`DEFAULT_STARTUP_TIMEOUT` s), retried on a fresh port when it
  exits or misses the bound, and ``PREFECT_API_URL`` is set to it in this process's environment (so Dask
  workers, torchrun ranks and ``fade`` subprocesses inherit it) and in Prefect's settings.

:func:`stop` ends the server (SIGTERM, then SIGKILL); ``flows.cli`` calls it in a ``finally`` (a failed run,
Ctrl-C and SIGTERM included). The server is also given ``PR_SET_PDEATHSIG``, so it ends when the fade process
that started it dies without running its ``finally`` (SIGKILL): no orphaned uvicorn.

Nothing here imports Prefect until the server answers (the server is a subprocess).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from flows.errors import ApiUnavailable, log_dir

DEFAULT_STARTUP_TIMEOUT = 180.0
"""Seconds the local API may take to answer /health (wall clock): Prefect's own bound is 20 s, which a
2-core machine at load average 5-9 misses (measured in issue 16); 180 s was enough there."""
ATTEMPTS = 2
"""Start-ups tried (each on a fresh port) before the command fails."""
STOP_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL when the server is stopped."""

_armed = False
_server: subprocess.Popen[bytes] | None = None
_settings_cm: Any = None
_env_before: str | None = None
_url: str | None = None


def startup_timeout() -> float:
    """The start-up bound: ``FADE_API_STARTUP_TIMEOUT`` (seconds), else Prefect's
    ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` when it is larger, else :data:`DEFAULT_STARTUP_TIMEOUT`."""
    for var in ("FADE_API_STARTUP_TIMEOUT", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"):
        raw = os.environ.get(var)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                raise ApiUnavailable(f"{var}={raw!r} is not a number of seconds") from None
            if var == "FADE_API_STARTUP_TIMEOUT" or value > DEFAULT_STARTUP_TIMEOUT:
                return value
    return DEFAULT_STARTUP_TIMEOUT


def arm() -> None:
    """Make the next :func:`start_if_armed` start (or reuse) the API: the CLI arms commands that run flows."""
    global _armed
    _armed = True


def start_if_armed() -> str | None:
    """:func:`start` when :func:`arm` was called (once); None otherwise (a library call, `fade params`)."""
    if not _armed or _url is not None:
        return _url
    return start()


def current_url() -> str | None:
    """The API this process uses, once :func:`start` ran."""
    return _url


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def healthy(api_url: str, timeout: float = 5.0) -> bool:
    """Whether ``<api_url>/health`` answers 200."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def _is_local(url: str) -> bool:
    from urllib.parse import urlparse

    return (urlparse(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def _die_with_parent() -> None:
    """In the child before exec: its own session (Ctrl-C in the terminal reaches fade, which stops it in
    order), and SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG = 1)."""
    os.setsid()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def _server_command(port: int) -> list[str]:
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise ApiUnavailable("Prefect is not installed in this environment (run `bash setup.sh`)")
    app_dir = Path(list(spec.submodule_search_locations)[0]).parent
    return [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
            "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on"]


def _launch(port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT_SERVER_UI_ENABLED": "false",
           "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    with log.open("ab") as out:
        return subprocess.Popen(_server_command(port), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, preexec_fn=_die_with_parent)  # noqa: PLW1509 (no threads yet: CLI start)


def _wait_ready(proc: subprocess.Popen[bytes], api_url: str, bound: float) -> str | None:
    """None when the server answers within ``bound`` seconds; else why not."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"exited with code {proc.returncode}"
        if healthy(api_url, timeout=min(10.0, max(1.0, deadline - time.monotonic()))):
            return None
        time.sleep(0.25)
    return f"did not answer within {bound:.0f} s"


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_GRACE)


def _use(url: str) -> str:
    """Point this process (environment and, if Prefect is loaded, its settings) at ``url``."""
    global _url, _settings_cm, _env_before
    _env_before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    if "prefect.context" in sys.modules:  # Prefect froze its settings at import: override them too
        from prefect.settings import PREFECT_API_URL, temporary_settings

        _settings_cm = temporary_settings(updates={PREFECT_API_URL: url})
        _settings_cm.__enter__()
    _url = url
    return url


def start() -> str:
    """Reuse ``PREFECT_API_URL`` or start one local API (see the module docstring); return its URL.
    Raises :class:`~flows.errors.ApiUnavailable` with one line saying what to do."""
    global _server
    if _url is not None:
        return _url
    given = os.environ.get("PREFECT_API_URL")
    if given:
        if _is_local(given):
            deadline = time.monotonic() + min(30.0, startup_timeout())
            while not healthy(given):
                if time.monotonic() > deadline:
                    raise ApiUnavailable(f"PREFECT_API_URL={given} does not answer; start that server "
                                         "(`prefect server start`) or unset PREFECT_API_URL to let fade start one")
                time.sleep(1.0)
        return _use(given)
    bound = startup_timeout()
    log = log_dir() / f"prefect-api-{os.getpid()}.log"
    problems = []
    for _ in range(ATTEMPTS):
        port = free_port()
        url = f"http://127.0.0.1:{port}/api"
        proc = _launch(port, log)
        why = _wait_ready(proc, url, bound)
        if why is None:
            _server = proc
            os.environ[TEMPORARY_API] = url  # the report says its links die with this server
            return _use(url)
        _terminate(proc)
        problems.append(why)
    raise ApiUnavailable(
        f"the local Prefect API did not start ({'; '.join(problems)}; its log: {log}); on a busy machine raise "
        f"the bound (FADE_API_STARTUP_TIMEOUT={int(bound * 3)}), or start one yourself (`prefect server start`) "
        "and set PREFECT_API_URL=http://127.0.0.1:4200/api"
    )


TEMPORARY_API = "FADE_TEMPORARY_PREFECT_API"
"""Set (to its URL) while the API is a server this command started and stops when it ends: every process the
command starts inherits it, so the report can say that its Prefect links will not open afterwards."""


def stop() -> None:
    """Stop the server :func:`start` started (if any) and restore the environment; safe to call twice."""
    global _server, _settings_cm, _url, _armed
    if _server is not None:
        _drain_prefect_clients()
    if _settings_cm is not None:
        with contextlib.suppress(Exception):
            _settings_cm.__exit__(None, None, None)
        _settings_cm = None
    if _url is not None:
        if _env_before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = _env_before
    if _server is not None:
        _terminate(_server)
        _server = None
        os.environ.pop(TEMPORARY_API, None)
    _url = None
    _armed = False


def _drain_prefect_clients(timeout: float = 10.0) -> None:
    """Send the logs and events Prefect still holds to the API before it stops (else Prefect's exit hook
    prints 'Error logging to API' after the server is gone)."""
    for module, name in (("prefect.logging.handlers", "APILogWorker"), ("prefect.events.worker", "EventsWorker")):
        worker = getattr(sys.modules.get(module), name, None)
        if worker is not None:
            with contextlib.suppress(Exception):
                worker.drain_all(timeout=timeout)


def server_pid() -> int | None:
    """Pid of the server this process started (None: reused or not started)."""
    return _server.pid if _server is not None else None
