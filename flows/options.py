"""Command-line options shared by every `fade` subcommand, and the two ways a flow gets its config.

Every flow takes one validated :class:`~fade_core.config.Config` (``config``). The CLI builds it once from
``--params`` and ``--set`` (:func:`load_config`); a deployment that passes ``config: null`` gets the params.yaml
of the worker's working directory (:func:`config_or_params`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fade_core import config as fconfig

PARAMS_FILE = "params.yaml"

# `fade run --quick`: the same pipeline on a smaller budget (a few minutes on 2 cores), for a first look.
QUICK_OVERRIDES = [
    "warmstart.steps=300",
    "train.steps=20",
    "train.checkpoint_every=10",
    "eval.n_samples=16",
    "eval.ks=[1, 4, 16]",
    "eval.max_problems=40",
    "pipeline.seeds=[0]",
]

SWEEP_DEFAULTS = ["eval.checkpoints=last", "eval.skip_existing=true"]
"""A sweep's defaults on top of params.yaml (``--set`` wins): evaluate each run's last checkpoint, and keep
evaluations already stored (a nightly sweep re-evaluates nothing it has)."""
QUICK_HELP = ("A first look on a smaller budget (minutes on 2 cores): sets " + ", ".join(QUICK_OVERRIDES)
              + " (a --set of the same key wins).")
"""`fade run --quick`'s help: what it shrinks, from :data:`QUICK_OVERRIDES` itself."""
PARAMS_HELP = ("Params file to read. Without --params: ./params.yaml, or every default when there is none; "
               "a file named here must exist (--params /dev/null: every default).")
"""--params' help, as fade_core.config.load treats the file."""
ParamsOpt = Annotated[Path, typer.Option("--params", "-p", help=PARAMS_HELP)]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a key, e.g. --set train.method=power --set train.params.alpha=2."),
]


def load_config(params: Path, overrides: list[str] | None) -> fconfig.Config:
    """Validate params + overrides once (a ConfigError names the offending keys: the CLI's error handler
    prints it and exits 2 before any work); then, under a `fade` command that runs flows, start (or reuse)
    the one Prefect API of the command (flows.prefect_api)."""
    from flows import prefect_api

    cfg = apply_sandbox_settings(fconfig.load(params, overrides or []))
    prefect_api.start_if_armed()
    return cfg


def apply_sandbox_settings(cfg: fconfig.Config) -> fconfig.Config:
    """Make the config's ``sandbox`` section the default of this process and of every process it starts
    (Dask workers, torchrun ranks, ``fade`` subprocesses inherit the environment it sets)."""
    from fade_core.sandbox import use_settings

    # unsafe/cgroup: a config value adds to what the environment already says, never clears it
    use_settings(backend=cfg.sandbox.backend, unsafe=True if cfg.sandbox.unsafe else None,
                 cgroup_parent=cfg.sandbox.cgroup_parent)
    return cfg


def config_or_params(config: fconfig.Config | None, overrides: list[str] | None = None) -> fconfig.Config:
    """``config``, or (None: a deployment run) params.yaml of the working directory with ``overrides``."""
    cfg = config if config is not None else fconfig.load(PARAMS_FILE, list(overrides or []))
    return apply_sandbox_settings(cfg)


def command_overrides(args: list[str]) -> tuple[Path, list[str]] | None:
    """(params file, overrides) that the command line ``args`` (after ``fade``) validates first, as its command
    does (with `fade run --quick`'s, `fade sweep`'s and `fade train --method`'s presets before the user's
    ``--set``), read without importing the command's module; None when the command takes no config or asks
    for help. The CLI checks them before it imports any stage module, so a bad key costs no heavy import."""
    if not args or args[0] in ("verify", "study") or "--help" in args or "-h" in args:
        return None  # verify takes no config; study adds defaults of its own after the user's keys
    params, sets, presets = Path(PARAMS_FILE), [], []
    rest = iter(args[1:])
    for arg in rest:
        name, eq, value = arg.partition("=")
        if name in ("--set", "-s", "--params", "-p") or (args[0] == "train" and name in ("--method", "-m")):
            value = value if eq else next(rest, "")
            if name in ("--set", "-s"):
                sets.append(value)
            elif name in ("--params", "-p"):
                params = Path(value)
            else:
                presets.append(f"train.method={value}")
        elif arg == "--quick" and args[0] == "run":
            presets = QUICK_OVERRIDES + presets
    if args[0] == "sweep":
        presets = SWEEP_DEFAULTS + presets
    return params, presets + sets


def fail(command: str, error: Exception, code: int = 2) -> Exception:
    """The error to raise for bad input a command found (``raise fail(...) from None``): the CLI's one
    handler (flows/errors.py) prints ``fade <command>: <error>`` and exits 2. ``command`` and ``code`` are
    kept for the callers' sake; every bad input exits 2 now (issue 16: one answer per kind of error)."""
    from flows.errors import UserError

    if isinstance(error, fconfig.ConfigError | UserError):
        return error
    return UserError(str(error))
