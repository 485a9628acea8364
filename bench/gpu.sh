#!/usr/bin/env bash
# GPU rollout bench: vLLM against HF generate (and fade's own sampling loop) on the same small model.
# One prepared script that finishes well under 8 minutes on one GPU. Run it from the repository root on
# a GPU machine where fade is installed with the gpu extra (FADE_EXTRAS=dev,gpu bash setup.sh):
#
#   bash bench/gpu.sh                 # built-in tiny Llama (fresh weights), bf16
#   MODEL=/path/to/local/hf-model bash bench/gpu.sh   # any local checkpoint vLLM supports
#
# Writes bench/rollout_gpu.json (tokens/s of each engine and their ratios to hf-generate) and prints
# a table; copy the numbers into BENCHMARKS.md with this command line.
# NOT YET RUN: no GPU has been lent to this project's sessions so far (see BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export DO_NOT_TRACK=1 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c "import vllm; print('vllm', vllm.__version__)" || { echo "gpu.sh: vllm is not installed (pip install -e '.[gpu]')"; exit 2; }
timeout 450 "$PY" bench/rollout.py --device cuda --engines hf-generate,fade-hf,vllm \
  --prompts "${PROMPTS:-64}" --group "${GROUP:-16}" --new-tokens "${NEW_TOKENS:-128}" --repeats 3 \
  ${MODEL:+--model "$MODEL"} --out bench/rollout_gpu.json
