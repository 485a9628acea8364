"""The one place where the `fade` CLI turns an exception into an exit code and one line of text.

    exit 0    done
    exit 1    the run failed (a bug, a crashed worker, the Prefect API could not be reached)
    exit 2    bad input or configuration: a key, a file or a folder the user named is wrong, missing or damaged
    exit 130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM (the command's finally blocks run first: workers,
              the Prefect API server)

Every error prints ``fade <command>: <what>`` once, on stderr; the full traceback goes to the command's
log file (:func:`log_path`), whose path the line names. Nothing else prints tracebacks: Prefect's console
handlers drop records that carry one (:class:`ConsoleTracebackFilter`), which the log file keeps.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

BAD_INPUT = 2
FAILED = 1
KEEP_LOGS = 50  # newest log files kept in the log folder

_log_file: Path | None = None


class UserError(ValueError):
    """Bad input a command found itself (an option, a file, a folder): exit 2 with its message."""


class ApiUnavailable(RuntimeError):
    """The Prefect API could not be started or reached; the message says what to do."""


class Interrupted(BaseException):
    """SIGTERM arrived: raised in the main thread by flows.cli's signal handler (a BaseException, so
    that ``except Exception`` in a library does not swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def bad_input_types() -> tuple[type[BaseException], ...]:
    """Exception types that mean the user's input is wrong (exit 2): config errors, missing or unreadable
    files and folders, damaged files, malformed data. Imported here only when an error is being handled."""
    from fade_core.config import ConfigError
    from fade_core.integrity import DamagedFile

    types: list[type[BaseException]] = [UserError, ConfigError, DamagedFile, FileNotFoundError, NotADirectoryError,
                                        IsADirectoryError, PermissionError, UnicodeDecodeError]
    for module, name in (("fade_core.data.schema", "DataError"), ("fade_core.store", "StoreError")):
        mod = sys.modules.get(module)  # only a module that ran can have raised its error
        if mod is not None and hasattr(mod, name):
            types.append(getattr(mod, name))
    return tuple(types)


def log_dir() -> Path:
    """Where fade's command logs go: $FADE_LOG_DIR, else $XDG_STATE_HOME/fade/logs (~/.local/state/fade/logs),
    else a folder in the temporary directory when those are not writable."""
    configured = os.environ.get("FADE_LOG_DIR")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    for candidate in ([Path(configured)] if configured else []) + [Path(state) / "fade" / "logs"]:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            if os.access(candidate, os.W_OK):
                return candidate
        except OSError:
            continue
    fallback = Path(tempfile.gettempdir()) / f"fade-logs-{os.getuid()}"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def log_path(command: str) -> Path:
    """This process's log file (made on first use): ``<log_dir>/<time>-<command>-<pid>.log``. Older logs
    beyond the newest :data:`KEEP_LOGS` are removed."""
    global _log_file
    if _log_file is None:
        folder = log_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        _log_file = folder / f"{stamp}-{command.replace(' ', '-') or 'fade'}-{os.getpid()}.log"
        _log_file.touch()
        for old in sorted(folder.glob("*.log"), key=lambda p: p.stat().st_mtime)[:-KEEP_LOGS]:
            old.unlink(missing_ok=True)
            old.with_suffix(".logging.yml").unlink(missing_ok=True)  # route_library_logs' config beside it
    return _log_file


def one_line(error: BaseException) -> str:
    """The error's message on one line (a multi-line message, e.g. several config keys, keeps its lines
    indented under the first)."""
    text = str(error).strip() or type(error).__name__
    if isinstance(error, OSError) and error.filename and error.strerror:  # "[Errno 2] ...: 'x'" -> "x: ..."
        text = f"{error.filename}: {error.strerror}"
    if isinstance(error, UnicodeDecodeError):
        text = f"not UTF-8 text ({error.reason} at byte {error.start})"
    return text


def report(command: str, error: BaseException) -> int:
    """Write the traceback of ``error`` to the log file, print the one line, and return the exit code."""
    prefix = f"fade {command}" if command else "fade"
    path = None
    try:
        path = log_path(command)
        with path.open("a") as f:
            f.write(f"\n--- fade {command}: {type(error).__name__} ---\n")
            f.write("".join(traceback.format_exception(error)))
    except OSError:
        pass
    where = f" (traceback: {path})" if path else ""
    if isinstance(error, ApiUnavailable):
        print(f"{prefix}: {error}{where}", file=sys.stderr)
        return FAILED
    if isinstance(error, bad_input_types()):
        print(f"{prefix}: {one_line(error)}{where}", file=sys.stderr)
        return BAD_INPUT
    print(f"{prefix}: failed: {type(error).__name__}: {one_line(error)}{where}", file=sys.stderr)
    return FAILED


class FadeLogFile(logging.FileHandler):
    """The command's log file as a logging handler (named in :func:`route_library_logs`'s logging config, so
    that Dask workers and subprocesses append to the same file)."""

    _fade_log = True


CONSOLE_LEVEL = "WARNING"
"""What Prefect's console handler still prints under `fade`: warnings and errors (errors without their
traceback, :class:`ConsoleTracebackFilter`); INFO lines (flow and task runs, their dead "View at" links of a
server that stops with the command) go to the log file only."""


def library_logging_config(log_file: Path, prefect_yml: Path) -> dict:
    """Prefect's own logging config (``prefect_yml``, its templates left for Prefect to fill) with the console
    at :data:`CONSOLE_LEVEL` and every record also written to ``log_file`` (:class:`FadeLogFile`)."""
    import yaml

    cfg = yaml.safe_load(prefect_yml.read_text())
    cfg["handlers"]["console"]["level"] = CONSOLE_LEVEL
    cfg["handlers"]["fade_log"] = {"class": f"{__name__}.FadeLogFile", "formatter": "standard", "level": 0,
                                   "filename": str(log_file)}
    cfg["root"]["handlers"] = [*cfg["root"].get("handlers", []), "fade_log"]
    for logger in cfg.get("loggers", {}).values():
        if logger.get("propagate") is False and logger.get("handlers"):
            logger["handlers"] = [*logger["handlers"], "fade_log"]
    return cfg


def route_library_logs(command: str) -> Path | None:
    """Before Prefect is imported by a command that runs flows: Prefect's INFO lines go to this command's log
    file, not the terminal, in this process and every process it starts (Dask workers and subprocesses inherit
    ``PREFECT_LOGGING_SETTINGS_PATH``); Dask's own INFO lines (workers registering, the dashboard) are dropped
    (``DASK_LOGGING__DISTRIBUTED``). A logging config or Dask level the user set is kept. Returns the config
    written (None: Prefect not installed, or the user's own config)."""
    import importlib.util

    import yaml

    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", CONSOLE_LEVEL.lower())
    spec = importlib.util.find_spec("prefect")
    if os.environ.get("PREFECT_LOGGING_SETTINGS_PATH") or spec is None or not spec.submodule_search_locations:
        return None
    prefect_yml = Path(next(iter(spec.submodule_search_locations))) / "logging" / "logging.yml"
    if not prefect_yml.is_file():
        return None
    log_file = log_path(command)
    out = log_file.with_suffix(".logging.yml")
    out.write_text(yaml.safe_dump(library_logging_config(log_file, prefect_yml), sort_keys=False))
    os.environ["PREFECT_LOGGING_SETTINGS_PATH"] = str(out)
    os.environ[COMMAND_LOG] = str(log_file)
    return out


COMMAND_LOG = "FADE_COMMAND_LOG"
"""The command's log file, for the processes it starts (the report links it: the flow and task lines that a
temporary Prefect server does not keep)."""


class ConsoleTracebackFilter(logging.Filter):
    """Keeps tracebacks and errors off the console (the log file and :func:`report` have them): drops
    records at ERROR and above and records carrying exception info."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR and not record.exc_info


def quiet_console_tracebacks(command: str) -> None:
    """Once Prefect has set up logging: add :class:`ConsoleTracebackFilter` to every console handler in the
    logging tree (Prefect's and the root's) and send every record to this command's log file too, so a
    failed flow prints no traceback on the console (the one line of :func:`report` names the file)."""
    if "prefect.main" not in sys.modules:  # Prefect configures its handlers when prefect.main is imported
        return
    loggers = [logging.getLogger()] + [lg for lg in logging.root.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for h in lg.handlers:
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler) \
                    and not any(isinstance(f, ConsoleTracebackFilter) for f in h.filters):
                h.addFilter(ConsoleTracebackFilter())
    root = logging.getLogger()
    if not any(isinstance(h, logging.FileHandler) and getattr(h, "_fade_log", False) for h in root.handlers):
        try:
            handler = logging.FileHandler(log_path(command))
        except OSError:
            return
        handler._fade_log = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        for lg in loggers:  # loggers that do not propagate (Prefect's) write to the file too
            if not lg.propagate and lg.handlers:
                lg.addHandler(handler)
