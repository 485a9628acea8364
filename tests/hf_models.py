"""Tiny Hugging Face models for the bring-your-own-model tests, made here with no download.

A byte-level BPE tokenizer is trained with the ``tokenizers`` library on a small corpus this module writes
(the prompt templates' wording, code and math), and saved with a chat template:

    chatml   Qwen2-style: <|im_start|>role ... <|im_end|>; EOS <|im_end|>, pad <|endoftext|>, no BOS
    llama3   Llama-3-style: the tokenizer adds <|begin_of_text|>, which the chat template also writes
             (so a prompt must not get it twice); EOS <|eot_id|>

Models are random-weight architectures from their configs: a Qwen2 with tied embeddings (as small
Qwen2/2.5 and Llama-3.2 checkpoints) and a Llama with an untied head. Each folder loads with
``AutoModelForCausalLM`` / ``AutoTokenizer`` like a downloaded checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import torch

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
CORPUS = [
    "You are an expert Python programmer. You will be given a question (problem specification) and will generate "
    "a correct Python program that matches the specification and passes all tests.",
    "### Question:\nRead two integers a and b on one line and print their sum.\n\n### Format: Read the inputs from "
    "stdin solve the problem and write the answer to stdout.\n```python\n# YOUR CODE HERE\n```\n\n### Answer:",
    "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
    "```python\ndef add(a, b):\n    return a + b\n```\nclass Solution:\n    def sort_it(self, xs):\n        return sorted(xs)",
    "Find the number of ordered pairs. Please reason step by step, and put your final answer within \\boxed{}.",
    "The answer is \\boxed{16}. So x = \\frac{1}{2} and y = 0.5, 3 5 7 -> 22: 3*5+7",
]


def train_tokenizer(style: str = "chatml", vocab_size: int = 400):
    """A BPE tokenizer trained on :data:`CORPUS`, wrapped as a transformers fast tokenizer with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if style == "chatml":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    elif style == "llama3":
        specials = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|pad|>"]
    else:
        raise ValueError(style)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    if style == "chatml":
        return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                       chat_template=CHATML, model_max_length=4096)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   pad_token="<|pad|>", chat_template=LLAMA3, model_max_length=4096)


def tiny_qwen2(out: Path, *, seed: int = 0) -> Path:
    """A 2-layer Qwen2 with tied embeddings and the ChatML tokenizer, saved to ``out``."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = train_tokenizer("chatml")
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      bos_token_id=None)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def tiny_llama(out: Path, *, seed: int = 0) -> Path:
    """A 2-layer Llama with an untied head and the Llama-3-style tokenizer, saved to ``out``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = train_tokenizer("llama3")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
