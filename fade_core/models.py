"""Models: the built-in tiny Llama-style policy with a character tokenizer, and any local HF causal LM.

The built-in default (``model.name_or_path = "builtin:tiny"``) is a small Llama (RMSNorm, rotary
positions, SwiGLU MLP, untied output head) created from ``model.tiny`` in the config, with a
character-level tokenizer that covers exactly what the countdown task writes: digits, ``+ - *``,
parentheses, space, ``-``, ``>``, ``:``, ``=`` and newline, plus ``<pad> <bos> <eos> <unk>``. The
tokenizer is a real ``tokenizers`` object wrapped in :class:`~transformers.PreTrainedTokenizerFast`,
so the tiny model saves with ``save_pretrained`` (config.json, model.safetensors, tokenizer.json) and
loads with ``AutoModelForCausalLM`` / ``AutoTokenizer`` -- the same code path that loads a user's
Qwen2.5, Llama or own checkpoint. A name that is not ``builtin:tiny`` is a local folder or a hub id; a hub
id is taken from the local Hugging Face cache, or fetched when the hub is reachable and HF_HUB_OFFLINE is
unset (:func:`resolve_model_path`); every loading error is one line naming the model.

The output head is untied from the embeddings so that the rank-1 diagnostics of its update
(:mod:`fade_core.metrics`) measure the head alone.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)
from transformers.utils import logging as hf_logging

from fade_core.config import BUILTIN_TINY
from fade_core.config import HUB_ID_RE as HUB_ID_PATTERN

hf_logging.disable_progress_bar()  # fade draws its own progress; no per-file bars when saving checkpoints

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
CHARACTERS = "0123456789+-*() >:=\n"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The character tokenizer of the built-in task (24 tokens); prepends ``<bos>`` to every text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = {tok: i for i, tok in enumerate(list(SPECIAL_TOKENS) + list(CHARACTERS))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")  # one token per character
    tok.decoder = decoders.Fuse()  # join characters back without separators
    bos = vocab["<bos>"]
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", bos)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=4096,
    )


def tiny_config(tiny: Any, tokenizer: PreTrainedTokenizerFast) -> LlamaConfig:
    """A LlamaConfig from the ``model.tiny`` section (a TinyModel or a mapping with the same keys)."""
    get = (lambda k: tiny[k]) if isinstance(tiny, dict) else (lambda k: getattr(tiny, k))
    hidden, heads = int(get("hidden_size")), int(get("num_heads"))
    if hidden % heads:
        raise ValueError(f"model.tiny.hidden_size={hidden} is not divisible by model.tiny.num_heads={heads}")
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=int(get("intermediate_size")),
        num_hidden_layers=int(get("num_layers")),
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=int(get("max_position")),
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attention_dropout=0.0,
        initializer_range=0.02,
    )


def build_tiny(tiny: Any, *, seed: int = 0) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """A freshly initialised tiny Llama (deterministic by ``seed``) and its tokenizer."""
    tokenizer = build_tokenizer()
    cfg = tiny_config(tiny, tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.float().eval(), tokenizer


HUB_ID_RE = re.compile(HUB_ID_PATTERN)
HUB_FILES = ["*.json", "*.safetensors", "*.bin", "*.model", "*.txt", "*.jinja", "*.py", "*.tiktoken"]
"""The files of a hub model fade fetches: config, weights, tokenizer (not e.g. a Llama's original/*.pth copy)."""


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE forbids the network (read at call time, not when huggingface_hub was imported)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_model_path(name_or_path: str | Path) -> Path:
    """The local folder of a model: the folder itself, or a hub id's snapshot in the Hugging Face cache
    (fetched when the hub is reachable and HF_HUB_OFFLINE is unset). Raises FileNotFoundError with a
    one-line message naming the model when there is none."""
    name = str(name_or_path)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"model {name}: no config.json (not a Hugging Face model folder)")
        return path
    if name.startswith((".", "/", "~")) or not HUB_ID_RE.match(name):
        raise FileNotFoundError(f"model {name}: no such folder (and not a hub id such as Qwen/Qwen2.5-7B-Instruct)")
    from huggingface_hub import snapshot_download

    offline = hub_offline()
    try:
        folder = snapshot_download(name, local_files_only=offline, allow_patterns=HUB_FILES)
    except Exception as e:  # offline, unreachable, unknown repo, gated: say which and stop
        why = ("HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache" if offline
               else f"it could not be fetched from the hub nor found in the local cache ({type(e).__name__})")
        raise FileNotFoundError(f"model {name}: not a local folder, and {why}") from None
    return Path(folder)


def declared_eos_ids(folder: str | Path) -> list[int]:
    """The EOS ids a model folder declares itself: generation_config.json's, else config.json's (read as
    written, so a config class's default id does not count)."""
    for name in ("generation_config.json", "config.json"):
        p = Path(folder) / name
        if p.exists():
            try:
                eos = json.loads(p.read_text()).get("eos_token_id")
            except ValueError:
                continue
            ids = [eos] if isinstance(eos, int) else [i for i in eos or [] if isinstance(i, int)]
            if ids:
                return ids
    return []


def check_tokenizer(tokenizer: Any, eos_ids: list[int], where: str) -> None:
    """Give the tokenizer a pad token (its EOS) when it has none; raise a one-line ValueError when neither
    the tokenizer nor the model folder (``eos_ids``: :func:`declared_eos_ids`) names an EOS token, since
    completions could then never end."""
    if tokenizer.eos_token_id is None and not eos_ids:
        raise ValueError(f"model {where}: the tokenizer has no EOS token (set eos_token in tokenizer_config.json), "
                         "so completions could never end")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token if tokenizer.eos_token is not None else (
            tokenizer.convert_ids_to_tokens(eos_ids[0]))


def load_tokenizer(path: str | Path, *, trust_remote_code: bool = False, chat_template: str = "auto") -> Any:
    """The tokenizer of a local model folder, checked (:func:`check_tokenizer`), with ``chat_template``
    ("auto" / "none": the folder's own; else a Jinja file that replaces it) set."""
    path = Path(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"model {path}: cannot load its tokenizer ({first})") from None
    if isinstance(tokenizer, bool) or tokenizer is None:
        raise ValueError(f"model {path}: no tokenizer files (tokenizer.json / tokenizer_config.json)")
    check_tokenizer(tokenizer, declared_eos_ids(path), str(path))
    if chat_template not in ("auto", "none"):
        tokenizer.chat_template = Path(chat_template).read_text()
    return tokenizer


def load_options(model_cfg: Any) -> dict[str, Any]:
    """The keyword options of :func:`load` from a config's ``model`` section."""
    return {
        "dtype": model_cfg.dtype,
        "attn_implementation": model_cfg.attn_implementation,
        "trust_remote_code": model_cfg.trust_remote_code,
        "chat_template": model_cfg.chat_template,
    }


def load(
    name_or_path: str | Path,
    *,
    tiny: Any = None,
    dtype: str = "float32",
    seed: int = 0,
    attn_implementation: str = "auto",
    trust_remote_code: bool = False,
    chat_template: str = "auto",
) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) from ``builtin:tiny`` (fresh weights from ``tiny``), a local HF folder or a hub id
    (:func:`resolve_model_path`). Any causal LM that transformers loads; the tokenizer comes from the same
    folder and gets a pad token (its EOS) when it has none (:func:`check_tokenizer`). ``attn_implementation``
    "auto" lets transformers choose; ``chat_template`` a Jinja file replaces the tokenizer's template.
    Errors are one line naming the model."""
    if dtype not in DTYPES:
        raise ValueError(f"model.dtype={dtype!r}; expected one of {sorted(DTYPES)}")
    if str(name_or_path) == BUILTIN_TINY:
        if tiny is None:
            raise ValueError("models.load('builtin:tiny') needs the model.tiny config section (tiny=...)")
        model, tokenizer = build_tiny(tiny, seed=seed)
        if chat_template not in ("auto", "none"):
            tokenizer.chat_template = Path(chat_template).read_text()
        return model.to(DTYPES[dtype]), tokenizer
    path = resolve_model_path(name_or_path)
    tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code, chat_template=chat_template)
    extra: dict[str, Any] = {} if attn_implementation == "auto" else {"attn_implementation": attn_implementation}
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype], local_files_only=True,
                                                     trust_remote_code=trust_remote_code, **extra)
    except (OSError, ValueError, ImportError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"model {name_or_path}: transformers cannot load it as a causal LM ({first})") from None
    if getattr(model.generation_config, "pad_token_id", None) is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer


def save(model: torch.nn.Module, tokenizer: Any, out_dir: str | Path) -> Path:
    """Write model (safetensors) + tokenizer in HF format to ``out_dir``; returns the folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = getattr(model, "module", model)  # unwrap DDP / DeepSpeed engines
    target.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def num_parameters(model: torch.nn.Module) -> int:
    """Number of parameters (shared tensors counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def output_head(model: torch.nn.Module) -> torch.nn.Parameter:
    """The output projection's weight [vocab, hidden] (the default target of the rank-1 diagnostics)."""
    target = getattr(model, "module", model)
    head = target.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(target).__name__} has no output embeddings")
    return head.weight


# ---------------------------------------------------------------- KV cache: the transformers-version shim
def cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the KV-cache argument of ``model.forward``: "cache" (transformers >= 5.x) or "past_key_values"."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"


def output_cache(out: Any) -> Any:
    """The KV cache of a model output under either naming."""
    cache = out.get("cache") if hasattr(out, "get") else None
    return cache if cache is not None else out.past_key_values


def repeat_cache(cache: Any, n: int) -> None:
    """Repeat every row of a KV cache ``n`` times in place (row i -> rows i*n .. i*n+n-1)."""
    if hasattr(cache, "batch_repeat_interleave"):
        cache.batch_repeat_interleave(n)
        return
    raise TypeError(f"cannot repeat a KV cache of type {type(cache).__name__}; use a transformers DynamicCache model")


def select_cache_rows(cache: Any, rows: torch.Tensor) -> None:
    """Keep (and repeat) the cache rows ``rows`` [B] long in place: row i of the result is old row rows[i]."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(rows)
        return
    raise TypeError(f"cannot select rows of a KV cache of type {type(cache).__name__}; use a DynamicCache model")


# ------------------------------------------------------ activation checkpointing: the transformers-version shim
def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Recompute activations in the backward pass (model.gradient_checkpointing), non-reentrant;
    ``activation_checkpointing_enable`` on transformers >= 5.x, ``gradient_checkpointing_enable`` before."""
    target = getattr(model, "module", model)
    if hasattr(target, "activation_checkpointing_enable"):
        target.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        target.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def checkpoints_activations(model: torch.nn.Module) -> bool:
    """Whether activation (gradient) checkpointing is on for ``model`` (either transformers naming)."""
    target = getattr(model, "module", model)
    if hasattr(type(target), "is_activation_checkpointing"):
        return bool(target.is_activation_checkpointing)
    return bool(getattr(target, "is_gradient_checkpointing", False))
