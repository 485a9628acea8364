"""The `import-model` stage: model.source (a GGUF file) -> the HF folder model.name_or_path, once.

Reads config section model (source, name_or_path, dtype, chat_template). Writes ``<model.name_or_path>/``:
config.json, generation_config.json, model.safetensors, the tokenizer files with the chat template,
source.json (provenance: the source, the file's sha256, the package and version) and SHA256SUMS
(fade_core.model_source.import_gguf). A folder that already holds this file's import at this dtype is kept.

`fade import-model` runs it; `fade run` runs it before training when model.source is set; presets/dvc.yaml's
``import_smollm2`` stage calls the command (the folder is that stage's DVC output). No Prefect flow: it is one call into fade_core, and it needs no API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fade_core import config as fconfig
from flows.options import ParamsOpt, SetOpt, fail, load_config


def import_model(cfg: fconfig.Config, *, force: bool = False) -> tuple[Path, dict[str, Any], bool]:
    """Import ``cfg.model.source`` into ``cfg.model.name_or_path``: (the folder, its provenance record, whether
    it was written now). Raises ConfigError when model.source is unset, ModelSourceError for a bad file."""
    from fade_core import model_source

    if not cfg.model.source:
        raise fconfig.ConfigError("model.source is not set: there is nothing to import (set it to a GGUF file, "
                                  "docs/byo-model.md)")
    return model_source.import_gguf(cfg.model.source, cfg.model.name_or_path, dtype=cfg.model.dtype,
                                    need_chat_template=cfg.model.chat_template == "auto", force=force)


def register(app: typer.Typer) -> None:
    """Add `fade import-model` to the CLI."""

    @app.command("import-model")
    def import_model_command(
        force: Annotated[bool, typer.Option("--force", help="Import again even when the folder is current.")] = False,
        params: ParamsOpt = Path("params.yaml"),
        overrides: SetOpt = None,
    ) -> None:
        """Import model.source (a GGUF file) once as the HF folder model.name_or_path, with its provenance."""
        from fade_core import model_source

        cfg = load_config(params, overrides)
        try:
            folder, record, written = import_model(cfg, force=force)
        except (fconfig.ConfigError, model_source.ModelSourceError) as e:
            raise fail("import-model", e) from None
        verb = "imported" if written else "is current (same file, same dtype, checksums verify): not redone"
        typer.echo(f"model: {folder} {verb}: {model_source.describe(record)}")
