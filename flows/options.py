"""Command-line options shared by every `fade` subcommand, and the config loader they feed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fade_core import config as fconfig

ParamsOpt = Annotated[Path, typer.Option("--params", "-p", help="params.yaml to read (missing: all defaults).")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a key, e.g. --set train.method=power --set train.params.alpha=2."),
]


def load_config(params: Path, overrides: list[str] | None) -> fconfig.Config:
    """Validate params + overrides once; on error print the offending keys and exit 2 before any work."""
    try:
        return fconfig.load(params, overrides or [])
    except fconfig.ConfigError as e:
        typer.secho(f"fade: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
