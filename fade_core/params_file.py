"""Reading a params file strictly: UTF-8 text, YAML, every key once, a mapping of sections.

PyYAML keeps the last of two equal keys silently and a file in another encoding fails with a bare
UnicodeDecodeError; here each is a :class:`ParamsFileError` naming the file (and the line or byte), which
fade_core.config.load, reading params.yaml through :func:`read_params_file`, reports as a ParamsFileError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class ParamsFileError(ValueError):
    """A params file that cannot be read as a mapping of sections; the message names the file."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml's safe loader, except that a key given twice in one mapping is an error (PyYAML keeps the last
    silently)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise ParamsFileError(f"{loader.name}: line {line}: key {key!r} given twice (first at line {seen[key]}); "
                              "keep one")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def read_params_file(path: Path) -> dict[str, Any]:
    """The mapping of a params file, or a ParamsFileError naming the file: not UTF-8 text (with the byte
    offset), not YAML, a key given twice, or not a mapping of sections."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParamsFileError(f"{path}: not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r}); "
                          "save it as UTF-8") from None
    try:
        loader = _UniqueKeyLoader(text)
        loader.name = str(path)
        try:
            raw = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        raise ParamsFileError(f"{path}: not valid YAML: {e}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ParamsFileError(f"{path}: expected a mapping of sections (data:, train:, ...), got {type(raw).__name__}")
    return raw
