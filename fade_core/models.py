"""Models: the built-in tiny Llama-style policy with a character tokenizer, and any local HF causal LM.

The built-in default (``model.name_or_path = "builtin:tiny"``) is a small Llama (RMSNorm, rotary
positions, SwiGLU MLP, untied output head) created from ``model.tiny`` in the config, with a
character-level tokenizer that covers exactly what the countdown task writes: digits, ``+ - *``,
parentheses, space, ``-``, ``>``, ``:``, ``=`` and newline, plus ``<pad> <bos> <eos> <unk>``. The
tokenizer is a real ``tokenizers`` object wrapped in :class:`~transformers.PreTrainedTokenizerFast`,
so the tiny model saves with ``save_pretrained`` (config.json, model.safetensors, tokenizer.json) and
loads with ``AutoModelForCausalLM`` / ``AutoTokenizer`` -- the same code path that loads a user's
local Qwen2.5 or CWM checkpoint. Nothing is ever downloaded: a name that is not ``builtin:tiny`` must
be a local folder.

The output head is untied from the embeddings so that the rank-1 diagnostics of its update
(:mod:`fade_core.metrics`) measure the head alone.
"""

from __future__ import annotations

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


def load(
    name_or_path: str | Path,
    *,
    tiny: Any = None,
    dtype: str = "float32",
    seed: int = 0,
) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) from ``builtin:tiny`` (fresh weights from ``tiny``) or a local HF folder.

    A folder must hold config.json, the weights (safetensors) and the tokenizer files. The tokenizer
    gets a pad token (its EOS) when it has none, so batched sampling works for any checkpoint.
    """
    if str(name_or_path) == BUILTIN_TINY:
        if tiny is None:
            raise ValueError("models.load('builtin:tiny') needs the model.tiny config section (tiny=...)")
        model, tokenizer = build_tiny(tiny, seed=seed)
        return model.to(DTYPES[dtype]), tokenizer
    path = Path(name_or_path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"model {str(name_or_path)!r} is neither 'builtin:tiny' nor a local folder "
            "(fade never downloads weights; point model.name_or_path at a local Hugging Face checkpoint)"
        )
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: no config.json (not a Hugging Face model folder)")
    if dtype not in DTYPES:
        raise ValueError(f"model.dtype={dtype!r}; expected one of {sorted(DTYPES)}")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype], local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
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
