"""`fade params`: show the resolved configuration (params.yaml + --set overrides), validated, with help.

    fade params                               # the resolved config as YAML
    fade params --set train.method=power      # check an override before a long run
    fade params --write params.yaml           # (re)write a params file with every key documented
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fade_core.params_yaml import render_yaml
from flows.options import ParamsOpt, SetOpt, load_config


def params(
    params: ParamsOpt = Path("params.yaml"),
    set_: SetOpt = None,
    write: Annotated[Path | None, typer.Option("--write", help="Write the resolved params, documented, to this file.")] = None,
) -> None:
    """Validate and print the resolved parameters (or write them, with one line of help per key)."""
    cfg = load_config(params, set_)
    if write is not None:
        write.write_text(render_yaml(cfg))
        typer.echo(f"wrote {write}")
    else:
        typer.echo(render_yaml(cfg), nl=False)


def register(app: typer.Typer) -> None:
    app.command("params")(params)
