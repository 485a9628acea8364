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
import sys
from collections.abc import Callable
from typing import Any

import typer

# Telemetry off in everything fade runs, before Prefect or DVC is imported.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from flows import errors, prefect_api  # noqa: E402  (light: no Prefect, torch or flows imported)

HELP = "fade: compare, explain and reproduce RLVR advantage functions (FADE and static baselines)."

COMMANDS: dict[str, str] = {
    "run": "Run the whole comparison (prepare, warmstart, train every arm x seed, evaluate, aggregate, report).",
    "params": "Validate and print the resolved parameters (or write them, with one line of help per key).",
    "atlas": "Write atlas.csv (every method's exact m_S(p), m_F(p)) and atlas.png / atlas.svg into --out.",
    "import-model": "Import model.source (a GGUF file) once as the HF folder model.name_or_path, with its provenance.",
    "prepare": "Write data/problems/<benchmark>.parquet for each configured benchmark, and the data card.",
    "warmstart": "Pre-train the built-in tiny model on countdown (correct_fraction knob) -> warmstart.out_dir.",
    "train": "RL-train the base model with an advantage method; records metrics and checkpoints under runs/<run_id>/.",
    "evaluate": "Sample eval.n_samples completions per problem from checkpoints, score them, store one row per sample.",
    "aggregate": "pass@k (SQL, unbiased), frontier, steps-to-peak, seed statistics -> results.duckdb + exports.",
    "report": "Figures (PNG/SVG) and a self-contained index.html of the aggregated results and the runs' records.",
    "verify": "Score a samples file against a problems file and print a summary (or, with --self-test, print what "
              "the sandbox guarantees here).",
    "sweep": "Sweep the static baselines: methods x seeds x grid, cached and retried; then evaluate and report.",
    "study": "The FADE paper's claims checked on fade's own runs (see `fade study run --help`).",
}
"""Every command and its one-line help, in pipeline order: what `fade --help` prints without importing the
stage modules (each imports Prefect, and most torch and transformers). tests/unit/test_cli.py checks
it against the commands the modules register."""


def new_app() -> typer.Typer:
    return typer.Typer(name="fade", help=HELP, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False)


def build_app() -> typer.Typer:
    """The full CLI: every stage module's commands (imported here, where they are used), each guarded."""
    from flows import (
        aggregate,
        atlas,
        evaluate,
        import_model,
        params,
        pipeline,
        prepare,
        report,
        study,
        sweep,
        train,
        verify,
        warmstart,
    )

    full = new_app()
    for module in (pipeline, params, atlas, import_model, prepare, warmstart, train, evaluate, aggregate, report, verify, sweep,
                   study):
        module.register(full)
    guard_commands(full)
    return full


LIGHT_COMMANDS = ("params", "verify")
"""Commands whose module imports neither Prefect nor torch at import time: built alone (:func:`light_app`),
so that they (and their errors: a bad key, a missing file) answer in about a second, not after every stage
module's imports."""


def light_app(command: str) -> typer.Typer:
    """A CLI of the one command ``command`` of :data:`LIGHT_COMMANDS` (its module ``flows.<command>``), guarded."""
    import importlib

    light = new_app()
    importlib.import_module(f"flows.{command}").register(light)

    @light.callback()
    def _group() -> None:  # keeps `params` a subcommand
        pass

    guard_commands(light)
    return light


_full_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    """``flows.cli.app``: the full CLI, built on first use (tests and ``python -m flows.cli``)."""
    global _full_app
    if name == "app":
        if _full_app is None:
            _full_app = build_app()
        return _full_app
    raise AttributeError(name)


def print_help() -> None:
    """`fade --help` from :data:`COMMANDS` (the same text the full CLI's help gives, without its imports)."""
    width = max(map(len, COMMANDS))
    lines = ["Usage: fade [OPTIONS] COMMAND [ARGS]...", "", f"  {HELP}", "", "Options:",
             "  --help  Show this message and exit.", "", "Commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    lines += ["", "  fade COMMAND --help shows a command's options."]
    print("\n".join(lines))


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


def main() -> None:
    """The `fade` entry point: SIGTERM stops the command like Ctrl-C (exit 143), and commands that run flows
    share one Prefect API. `fade --help`, `fade params` and a command whose config does not validate answer
    without importing the stage modules."""
    global _in_cli_process
    _in_cli_process = True
    signal.signal(signal.SIGTERM, _on_sigterm)
    args = sys.argv[1:]
    if not args or args[0] in ("--help", "-h"):
        print_help()
        raise SystemExit(0 if args else 2)
    if args[0] not in COMMANDS and not args[0].startswith("-"):
        raise SystemExit(unknown_command(args[0]))
    if args[0] in COMMANDS and args[0] != "params":
        precheck_config(args)
    command = " ".join(args[:2]) if args[0] == "study" else args[0]
    if command in API_COMMANDS and "--help" not in args and "-h" not in args:
        errors.route_library_logs(command)  # Prefect's INFO lines to the log file, before Prefect is imported
    try:
        (light_app(args[0]) if args[0] in LIGHT_COMMANDS else __getattr__("app"))(prog_name="fade")
    finally:
        prefect_api.stop()


def unknown_command(name: str) -> int:
    """Print one line for a command fade does not have (the nearest one it has, when one is close) and return
    the exit code (2): answered from :data:`COMMANDS`, before any stage module is imported."""
    import difflib

    near = difflib.get_close_matches(name, list(COMMANDS), n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    print(f"fade: no such command '{name}'{hint}; `fade --help` lists the commands", file=sys.stderr)
    return errors.BAD_INPUT


def precheck_config(args: list[str]) -> None:
    """Validate the config a command line names (flows.options.command_overrides) before any stage module is
    imported: a bad key exits 2 in well under a second instead of after the imports (issue 16 point 3). A
    config that validates is validated again by the command itself; this only answers sooner."""
    from fade_core.config import ConfigError, load
    from flows.options import command_overrides

    named = command_overrides(args)
    if named is None:
        return
    try:
        load(*named)
    except ConfigError as e:
        raise SystemExit(errors.report(args[0], e)) from None


if __name__ == "__main__":
    main()
