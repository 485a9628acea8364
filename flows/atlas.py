"""`fade atlas`: the gradient-mass atlas of every advantage method (an analysis tool, not a pipeline stage).

Thin: parses options, calls :func:`fade_core.atlas.write_atlas`, prints the paths it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fade_core.config import Arm
from flows.options import ParamsOpt, SetOpt, load_config


def register(app: typer.Typer) -> None:
    """Add the ``atlas`` command to the fade CLI."""

    @app.command("atlas")
    def atlas_command(
        methods: Annotated[
            str | None,
            typer.Option(
                "--methods", "-m",
                help="Comma list of methods, NAME or NAME(key=value,...), e.g. 'grpo,power(alpha=3),fade'. "
                "Default: every method at the paper's settings.",
            ),
        ] = None,
        group_size: Annotated[
            int | None,
            typer.Option("--group-size", "-g", min=1, help="Rollouts per group G (default: train.group_size)."),
        ] = None,
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")] = Path("atlas"),
        arms: Annotated[
            bool, typer.Option("--arms", help="Also draw the config's pipeline.arms (what `fade run` compares).")
        ] = False,
        points: Annotated[int, typer.Option("--points", min=3, help="Points of the solve-rate grid.")] = 201,
        params: ParamsOpt = Path("params.yaml"),
        set_: SetOpt = None,
    ) -> None:
        """Write atlas.csv (every method's exact m_S(p), m_F(p)) and atlas.png / atlas.svg into --out."""
        from fade_core import atlas

        cfg = load_config(params, set_)
        size = group_size if group_size is not None else cfg.train.group_size
        try:
            entries = atlas.parse_methods(methods)
            if arms:
                entries += [
                    atlas.AtlasEntry(a.method, dict(a.params), _arm_label(name, a), "arms")
                    for name, a in cfg.pipeline.arms.items()
                ]
            paths = atlas.write_atlas_entries(out, entries, group_size=size, points=points)
        except ValueError as e:
            typer.secho(f"fade atlas: {e}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        for kind in ("csv", "png", "svg"):
            typer.echo(f"{kind}: {paths[kind]}")


def _arm_label(name: str, arm: Arm) -> str:
    """'arm: <display>'; a scheduled FADE arm is drawn at its start state, and says so."""
    from fade_core import advantages

    label = f"arm {name}: {arm.label}"
    adv = advantages.build(arm.method, **arm.params)
    if arm.method == "fade":
        label += f" (start: α={adv.alpha:g}, δ={adv.delta:g})"
    return label
