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
    """Validate params + overrides once; on error print the offending keys and exit 2 before any work."""
    try:
        return apply_sandbox_settings(fconfig.load(params, overrides or []))
    except fconfig.ConfigError as e:
        typer.secho(f"fade: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


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


def fail(command: str, error: Exception, code: int = 2) -> typer.Exit:
    """Print ``fade <command>: <error>`` in red and return the Exit to raise (2: bad input, 1: missing input)."""
    typer.secho(f"fade {command}: {error}", fg=typer.colors.RED, err=True)
    return typer.Exit(code)
