"""How fade names what it puts in Prefect: task runs by arm, seed and step; artifact keys by pipeline.

Task runs: ``train-<arm>-s<seed>-to-step<steps>``, ``evaluate-<arm>-s<seed>-step<step>``,
``prepare-<benchmark>`` instead of Prefect's ``<task>-<3 hex>``, so a flow run's task list says which
run is which. Artifact keys: an artifact key is Prefect's "latest" slot, so two pipelines (two studies,
or two projects on one Prefect database) writing the same key would overwrite each other's latest;
every fade key is prefixed by the pipeline's name (``pipeline.name``): ``<pipeline>-pass-at-k``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_NOT_KEY = re.compile(r"[^a-z0-9-]+")


def artifact_key(pipeline: str, what: str) -> str:
    """``<pipeline>-<what>`` as a valid Prefect key (lowercase letters, digits and dashes; anything else
    becomes a dash): ``artifact_key("My_Study", "pass-at-k") == "my-study-pass-at-k"``."""
    key = _NOT_KEY.sub("-", f"{pipeline}-{what}".lower()).strip("-")
    return re.sub(r"-{2,}", "-", key)


def train_run_name(parameters: dict[str, Any]) -> str:
    """A training task run's name from the task's ``config``: ``train-<arm>-s<seed>-to-step<train.steps>``,
    the arm's label as in the run id (e.g. ``train-power2-s0-to-step200``)."""
    from fade_core import runs

    cfg = parameters["config"]
    label = runs.run_label(cfg.train.method, cfg.train.params, cfg.train.label)
    return f"train-{label}-s{cfg.train.seed}-to-step{cfg.train.steps}"


def evaluate_run_name(parameters: dict[str, Any]) -> str:
    """An evaluation task run's name: ``evaluate-<arm>-s<seed>-step<step>`` of the task's ``checkpoint``
    (``evaluate-base-s0-step0`` for the base model; a model fade did not train (``foreign``) by its folder
    or hub id). A checkpoint whose run cannot be read is named by its folder (the task then says why)."""
    from fade_core import evaluate as ev
    from fade_core import runs

    checkpoint = str(parameters["checkpoint"])
    try:
        if parameters.get("foreign"):
            return f"evaluate-{ev.model_ident(checkpoint).run_id}"
        ident = runs.identify_checkpoint(checkpoint)
    except (OSError, ValueError):
        return f"evaluate-{Path(checkpoint).name}"
    return f"evaluate-{ident.method}-s{ident.seed}-step{ident.step}"
