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
ParamsOpt = Annotated[Path, typer.Option("--params", "-p", help="params.yaml to read (missing: all defaults).")]
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


def fail(command: str, error: Exception, code: int = 2) -> Exception:
    """The error to raise for bad input a command found (``raise fail(...) from None``): the CLI's one
    handler (flows/errors.py) prints ``fade <command>: <error>`` and exits 2. ``command`` and ``code`` are
    kept for the callers' sake; every bad input exits 2 now (issue 16: one answer per kind of error)."""
    from flows.errors import UserError

    if isinstance(error, fconfig.ConfigError | UserError):
        return error
    return UserError(str(error))
