"""Any Hugging Face causal LM as the policy: tiny Qwen2 (tied embeddings, ChatML) and Llama (untied,
Llama-3-style BOS) made from configs with a locally trained BPE tokenizer; loading options and one-line
errors for a folder whose tokenizer cannot end or pad a completion."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from fade_core import models
from fade_core.rollout import build_engine
from fade_core.rollout.base import encode_prompts
from tests.hf_models import tiny_llama, tiny_qwen2


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    return {"qwen2": tiny_qwen2(root / "qwen2"), "llama": tiny_llama(root / "llama")}


def test_any_causal_lm_loads_with_its_tokenizer(folders: dict[str, Path]) -> None:
    qwen, qtok = models.load(folders["qwen2"], attn_implementation="eager")
    llama, ltok = models.load(folders["llama"], dtype="bfloat16")
    assert type(qwen).__name__ == "Qwen2ForCausalLM" and type(llama).__name__ == "LlamaForCausalLM"
    assert qwen.config._attn_implementation == "eager"
    assert next(llama.parameters()).dtype == torch.bfloat16
    # tied: the output head is the embedding matrix; untied: its own
    assert models.output_head(qwen).data_ptr() == qwen.get_input_embeddings().weight.data_ptr()
    assert models.output_head(llama).data_ptr() != llama.get_input_embeddings().weight.data_ptr()
    assert qtok.eos_token == "<|im_end|>" and qtok.pad_token == "<|endoftext|>" and qtok.chat_template
    ids = build_engine("hf", llama, ltok).encode_prompts(["plain", ltok.bos_token + "chat"])
    assert [row.count(ltok.bos_token_id) for row in ids] == [1, 1]  # added once, never doubled


def test_encode_prompts_adds_bos_only_when_the_text_lacks_it(folders: dict[str, Path]) -> None:
    tok = models.load_tokenizer(folders["llama"])
    plain, chat = encode_prompts(tok, ["x = 1", tok.bos_token + "x = 1"])
    assert plain == chat and plain[0] == tok.bos_token_id and plain.count(tok.bos_token_id) == 1


def _copy(src: Path, dst: Path, drop: tuple[str, ...]) -> Path:
    shutil.copytree(src, dst)
    for name in ("tokenizer_config.json", "config.json", "generation_config.json"):
        p = dst / name
        if p.exists():
            d = json.loads(p.read_text())
            for key in drop:
                d.pop(key, None)
            p.write_text(json.dumps(d))
    return dst


def test_tokenizer_without_eos_or_pad(folders: dict[str, Path], tmp_path: Path) -> None:
    no_eos = _copy(folders["llama"], tmp_path / "no-eos", ("eos_token", "eos_token_id", "pad_token", "pad_token_id"))
    with pytest.raises(ValueError, match="no EOS token") as err:
        models.load(no_eos)
    assert str(no_eos) in str(err.value) and "\n" not in str(err.value)
    no_pad = _copy(folders["llama"], tmp_path / "no-pad", ("pad_token", "pad_token_id"))
    _, tok = models.load(no_pad)
    assert tok.pad_token == tok.eos_token == "<|eot_id|>"  # pads with EOS, as batched sampling needs


def test_chat_template_file_replaces_the_tokenizers(folders: dict[str, Path], tmp_path: Path) -> None:
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant] ")
    _, tok = models.load(folders["qwen2"], chat_template=str(template))
    assert tok.chat_template == template.read_text()
    _, default = models.load(folders["qwen2"], chat_template="none")  # none: the folder's stays, prompts skip it
    assert "<|im_start|>" in default.chat_template


def test_gradient_checkpointing_gives_the_same_logprobs_and_gradients(folders: dict[str, Path]) -> None:
    """model.gradient_checkpointing turns the layers' KV cache off: the update's forward then runs prompt +
    completion per row, with the shared-prefix forward's log-probs and gradients."""
    from fade_core.train.policy import completion_logprobs, recomputes_activations

    model, tok = models.load(folders["qwen2"])
    prompts = [tok("Read two integers.")["input_ids"], tok("x")["input_ids"]]
    rows = torch.tensor([0, 0, 1])
    comp = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0], [11, 12, 13, 0]])
    results = []
    for checkpointing in (False, True):
        model.zero_grad()
        if checkpointing:
            models.enable_activation_checkpointing(model)
        model.train()
        assert recomputes_activations(model) == checkpointing
        lp, ent = completion_logprobs(model, prompts, rows, comp, pad_id=tok.pad_token_id, with_entropy=True)
        lp.sum().backward()
        results.append((lp.detach(), ent.detach(), models.output_head(model).grad.clone()))
    (a, ea, ga), (b, eb, gb) = results
    assert torch.allclose(a, b, atol=1e-5) and torch.allclose(ea, eb, atol=1e-5) and torch.allclose(ga, gb, atol=1e-5)
    assert ga.abs().sum() > 0
