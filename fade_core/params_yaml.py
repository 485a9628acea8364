"""params.yaml as text: every section and key of a :class:`fade_core.config.Config`, each with its one-line
help as a comment (``fade params --write``, ``fade study params --write``; the committed params.yaml files are
this function's output)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel

from fade_core.config import Config, PipelineConfig, TrainConfig


def render_yaml(cfg: Config) -> str:
    """params.yaml text for ``cfg``: every section and key, each with its one-line help as a comment, and
    under ``train.params`` and ``pipeline.arms`` the parameters of the methods in use (advantages.describe)."""
    lines: list[str] = [
        "# fade parameters: one section per pipeline stage. Every key is documented here and validated",
        "# by fade_core.config.Config; `fade params --set KEY=VALUE` shows the resolved result.",
    ]

    def scalar(v: Any) -> str:
        return yaml.safe_dump(v, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()

    def method_help(methods: list[str], pad: str) -> None:
        """The parameters of ``methods`` with their defaults, rules and help (advantages.describe), as comments."""
        from fade_core import advantages

        for method in dict.fromkeys(methods):
            lines.extend(f"{pad}# {line}" for line in advantages.describe(method).splitlines())

    def walk(model: BaseModel, indent: int) -> None:
        for name, field in type(model).model_fields.items():
            value = getattr(model, name)
            pad = "  " * indent
            help_ = f"  # {field.description}" if field.description else ""
            if isinstance(value, BaseModel):
                if indent == 0:
                    lines.append("")
                lines.append(f"{pad}{name}:{help_}")
                walk(value, indent + 1)
            elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
                lines.append(f"{pad}{name}:{help_}")
                for key, item in value.items():
                    d = {k: v for k, v in item.model_dump(mode="json").items() if v not in (None, {})}
                    lines.append(f"{pad}  {key}: {scalar(d)}")
                if isinstance(model, PipelineConfig):  # the parameters each arm's method accepts
                    method_help([a.method for a in value.values() if a.method != cfg.train.method], pad + "  ")
            else:
                if isinstance(value, BaseModel):
                    value = value.model_dump(mode="json")
                lines.append(f"{pad}{name}: {scalar(value)}{help_}")
                if isinstance(model, TrainConfig) and name == "params":  # what train.method accepts
                    method_help([model.method], pad + "  ")

    walk(cfg, 0)
    return "\n".join(lines) + "\n"
