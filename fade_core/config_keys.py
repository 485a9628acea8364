"""The valid config key nearest to an unknown one, for the one-line config error (fade_core.config)."""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel


def nearest_key(key: str, root: type[BaseModel]) -> str | None:
    """The valid dotted key closest to the unknown ``key`` (difflib) among the keys of its section (read
    from the models' fields, nothing validated); None when none is close or the section is not a model."""
    def model_in(ann: Any) -> type[BaseModel] | None:
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            return ann
        if typing.get_origin(ann) is dict:
            return None
        return next((m for a in typing.get_args(ann) if (m := model_in(a)) is not None), None)

    head, _, last = key.rpartition(".")
    model: type[BaseModel] | None = root
    parts = head.split(".") if head else []
    while parts and model is not None:
        field = model.model_fields.get(parts.pop(0))
        ann = field.annotation if field is not None else None
        if typing.get_origin(ann) is dict and parts:  # a mapping of sections (pipeline.arms.<name>)
            ann = typing.get_args(ann)[1]
            parts.pop(0)
        model = model_in(ann)
    if model is None:
        return None
    names = difflib.get_close_matches(last, list(model.model_fields), n=1, cutoff=0.6)
    return (f"{head}.{names[0]}" if head else names[0]) if names else None
