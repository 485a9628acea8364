"""The built-in tiny model and its tokenizer: HF format round trips, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from fade_core import countdown_task, models

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "max_position": 48}


def test_tokenizer_is_character_level_and_round_trips() -> None:
    tok = models.build_tokenizer()
    assert len(tok) == len(models.SPECIAL_TOKENS) + len(models.CHARACTERS)
    for p in countdown_task.generate(20, seed=3):
        text = p.prompt + p.example_solution
        ids = tok(text)["input_ids"]
        assert ids[0] == tok.bos_token_id and len(ids) == len(text) + 1  # one token per character, BOS first
        assert tok.decode(ids, skip_special_tokens=True) == text
        # prompt and completion tokenised separately concatenate to the joint tokenisation
        assert tok(p.prompt)["input_ids"] + tok(p.example_solution, add_special_tokens=False)["input_ids"] == ids
    assert tok.unk_token_id in tok("x")["input_ids"]
    assert tok.decode([tok.convert_tokens_to_ids("7"), tok.eos_token_id], skip_special_tokens=True) == "7"


def test_save_and_load_through_auto_classes(tmp_path: Path) -> None:
    model, tok = models.build_tiny(TINY, seed=1)
    models.save(model, tok, tmp_path / "m")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (tmp_path / "m" / name).exists(), name
    auto_model = AutoModelForCausalLM.from_pretrained(tmp_path / "m", local_files_only=True)
    auto_tok = AutoTokenizer.from_pretrained(tmp_path / "m", local_files_only=True)
    loaded, loaded_tok = models.load(tmp_path / "m")
    x = torch.tensor([tok("3 5 7 -> 22: 3*5+7")["input_ids"]])
    with torch.no_grad():
        ref = model(input_ids=x).logits
        assert torch.equal(loaded(input_ids=x).logits, ref)
        assert torch.equal(auto_model(input_ids=x).logits, ref)
    assert auto_tok("3 5 -> 8: ")["input_ids"] == tok("3 5 -> 8: ")["input_ids"] == loaded_tok("3 5 -> 8: ")["input_ids"]
    assert models.output_head(loaded).shape == (len(tok), TINY["hidden_size"])
    assert models.output_head(loaded).data_ptr() != loaded.get_input_embeddings().weight.data_ptr()  # untied


def test_build_is_deterministic_by_seed_and_shaped_by_config() -> None:
    a, _ = models.build_tiny(TINY, seed=0)
    b, _ = models.build_tiny(TINY, seed=0)
    c, _ = models.build_tiny(TINY, seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(models.output_head(a), models.output_head(c))
    assert a.config.num_hidden_layers == 2 and a.config.hidden_size == 32 and a.config.max_position_embeddings == 48
    assert models.num_parameters(a) == sum(p.numel() for p in a.parameters())


def test_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))  # nothing cached: offline must fail
    with pytest.raises(FileNotFoundError) as hub:
        models.load("Qwen/Qwen2.5-7B")
    assert "Qwen/Qwen2.5-7B" in str(hub.value) and "HF_HUB_OFFLINE" in str(hub.value)
    assert "\n" not in str(hub.value)
    with pytest.raises(FileNotFoundError, match="no such folder") as missing:
        models.load(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(missing.value) and "\n" not in str(missing.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        models.load(tmp_path / "empty")
    with pytest.raises(ValueError, match="model.tiny"):
        models.load("builtin:tiny")
    with pytest.raises(ValueError, match="divisible"):
        models.build_tiny({**TINY, "num_heads": 3})
