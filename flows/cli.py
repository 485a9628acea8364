"""The `fade` command line.

Every pipeline stage is a subcommand that runs that stage's flow (so `dvc repro` and `fade run` do the
same work). Each stage module in `flows/` defines ``register(app)``, which adds its commands here.

Every command goes through one error handler (flows/errors.py, installed by :func:`guard_commands`): bad
input or configuration exits 2, a failed run 1, Ctrl-C 130 and SIGTERM 143, each with one line
``fade <command>: ...`` that names the log file holding the traceback. A command that runs flows
(:data:`API_COMMANDS`) shares one Prefect API with every worker and subprocess it starts
(flows/prefect_api.py): started after its config validated, stopped when it ends, however it ends.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable
from typing import Any

import typer

# Telemetry off in everything fade runs, before Prefect or DVC is imported.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from flows import (  # noqa: E402  (after the telemetry switches)
    aggregate,
    atlas,
    errors,
    evaluate,
    params,
    pipeline,
    prefect_api,
    prepare,
    report,
    study,
    sweep,
    train,
    verify,
    warmstart,
)

app = typer.Typer(
    name="fade",
    help="fade: compare, explain and reproduce RLVR advantage functions (FADE and static baselines).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Stage modules that register commands; listed in pipeline order.
COMMAND_MODULES = [pipeline, params, atlas, prepare, warmstart, train, evaluate, aggregate, report, verify, sweep,
                   study]

API_COMMANDS = frozenset({"run", "prepare", "warmstart", "train", "evaluate", "aggregate", "report", "sweep",
                          "study run"})
"""Commands that run Prefect flows, and so get one Prefect API for the whole command (under `fade`)."""

_in_cli_process = False  # True under main(): the process is the `fade` command (not a test's CliRunner)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise errors.Interrupted(signum)


def guarded(name: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` of command ``name`` under the one error handler (and, for :data:`API_COMMANDS` run as
    the `fade` process, inside one Prefect API session)."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        use_api = _in_cli_process and name in API_COMMANDS
        try:
            if use_api:
                prefect_api.arm()
            errors.quiet_console_tracebacks(name)
            return callback(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except errors.Interrupted as e:
            typer.echo(f"fade {name}: stopped by {signal.Signals(e.signum).name}", err=True)
            raise typer.Exit(128 + e.signum) from None
        except KeyboardInterrupt:
            typer.echo(f"fade {name}: interrupted (Ctrl-C)", err=True)
            raise typer.Exit(128 + signal.SIGINT) from None
        except Exception as e:  # noqa: BLE001 (the one handler: every error becomes one line and an exit code)
            raise typer.Exit(errors.report(name, e)) from None
        finally:
            if use_api:
                prefect_api.stop()

    return run


def guard_commands(typer_app: typer.Typer, prefix: str = "") -> None:
    """Wrap every registered command (and those of sub-groups, e.g. `fade study run`) with :func:`guarded`."""
    for info in typer_app.registered_commands:
        name = (prefix + " " + (info.name or info.callback.__name__)).strip()
        info.callback = guarded(name, info.callback)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            guard_commands(group.typer_instance, (prefix + " " + (group.name or "")).strip())


for _module in COMMAND_MODULES:
    _module.register(app)
guard_commands(app)


def main() -> None:
    """The `fade` entry point: SIGTERM stops the command like Ctrl-C (exit 143), and commands that run flows
    share one Prefect API."""
    global _in_cli_process
    _in_cli_process = True
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        app()
    finally:
        prefect_api.stop()


if __name__ == "__main__":
    main()
