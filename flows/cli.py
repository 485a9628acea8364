"""The `fade` command line.

Every pipeline stage is a subcommand that runs that stage's flow (so `dvc repro` and `fade run` do the
same work). Each stage module in `flows/` defines ``register(app)``, which adds its commands here.
"""

from __future__ import annotations

import importlib
import os

import typer

# Telemetry off in everything fade runs, before Prefect or DVC is imported.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

app = typer.Typer(
    name="fade",
    help="fade: compare, explain and reproduce RLVR advantage functions (FADE and static baselines).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Stage modules that register commands; listed in pipeline order.
COMMAND_MODULES = [
    "flows.pipeline",
    "flows.params",
    "flows.atlas",
    "flows.prepare",
    "flows.warmstart",
    "flows.train",
    "flows.evaluate",
    "flows.aggregate",
    "flows.report",
    "flows.verify",
    "flows.sweep",
    "flows.study",
]

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
