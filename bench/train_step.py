"""Seconds per RL step: fade's trainer vs TRL's GRPOTrainer vs a hand-written floor, in one run.

Same tiny model (the warm-started base when it exists, else the built-in tiny model fresh from the
config), same batch (32 prompts x 16 rollouts, 10 new tokens), same method (GRPO advantage,
token-mean loss, no KL, one optimizer step per rollout batch: TRL's defaults ``loss_type="dapo"``,
``beta=0``, ``num_iterations=1``), same learning rate, on this machine, one after the other:

    fade        fade_core.train.Trainer (its defaults: zero-contribution rows skipped)
    fade-full   the same with every row forwarded (skip off), to show what the skip buys
    trl         trl.GRPOTrainer with its defaults (gradient checkpointing on) and with it off
    floor       hand-written: one ``model.generate`` (KV cache) over the 512 rollouts plus one
                forward/backward/AdamW step over the 512 prompt+completion sequences
    floor_engine  the same with fade's sampling loop instead of ``model.generate`` (isolates the update)

A step is measured wall-clock from the end of one step to the end of the next (scoring, advantages,
logging included), after ``--warmup`` steps; the median over ``--steps`` is reported. fade can go below
the floor: it reuses the sampler's log-probs (no second forward when on-policy), runs each prompt once
for its 16 rollouts (shared prefix) and skips rows whose advantage is 0.

Usage: python bench/train_step.py [--steps 8] [--warmup 2] [--threads 1] [--out bench/train_step.json]
The CPU is shared: run it on an idle machine for clean numbers (the JSON records the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fade_core import config as fconfig  # noqa: E402
from fade_core import countdown_task, models  # noqa: E402
from fade_core.train import Trainer, load_problems  # noqa: E402

PROMPTS, GROUP, NEW_TOKENS, LR = 32, 16, 10, 1e-6


def base_model(tmp: Path, path: str | None) -> str:
    if path and (Path(path) / "config.json").exists():
        return path
    cfg = fconfig.Config()
    model, tok = models.build_tiny(cfg.model.tiny, seed=0)
    return str(models.save(model, tok, tmp / "tiny"))


def timed_steps(run_step, steps: int, warmup: int) -> list[float]:
    times = []
    last = time.perf_counter()
    for i in range(warmup + steps):
        run_step(i)
        now = time.perf_counter()
        if i >= warmup:
            times.append(now - last)
        last = now
    return times


def bench_fade(base: str, tmp: Path, steps: int, warmup: int, skip: bool) -> dict:
    cfg = fconfig.load(None, [
        "train.method=grpo", "train.loss_agg=token-mean", f"train.prompts_per_step={PROMPTS}", f"train.group_size={GROUP}",
        f"rollout.max_new_tokens={NEW_TOKENS}", "train.minibatches=1", "train.ppo_epochs=1", f"train.lr={LR}",
        f"train.steps={steps + warmup + 1}", "train.checkpoint_every=100000", "train.rank1_every=100000",
        f"train.runs_dir={tmp / ('runs-skip' if skip else 'runs-full')}", f"data.out_dir={tmp / 'nodata'}",
    ])
    stamps: list[float] = []
    records: list[dict] = []

    def on_step(step: int, rec: dict) -> None:
        stamps.append(time.perf_counter())
        records.append(rec)

    trainer = Trainer(cfg, base_model=base, on_step=on_step, stop_after=steps + warmup)
    trainer.skip_zero_rows = skip
    t0 = time.perf_counter()
    trainer.train()
    edges = [t0] + stamps
    times = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)][warmup:]
    split = {k: statistics.median(r[k] for r in records[warmup:]) for k in ("time_rollout", "time_scoring", "time_update", "time_log")}
    return {"seconds": times, "median": statistics.median(times), "split_median": split,
            "reward_mean": statistics.mean(r["reward_mean"] for r in records)}


def bench_trl(base: str, tmp: Path, steps: int, warmup: int, checkpointing: bool) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from fade_core import verifiers

    cfg = fconfig.Config()
    problems = load_problems(fconfig.load(None, [f"data.out_dir={tmp / 'nodata'}"]))
    by_prompt = {p["prompt"]: p for p in problems}
    dataset = Dataset.from_list([{"prompt": p["prompt"]} for p in problems])

    def reward(prompts, completions, **_):
        return [verifiers.score(by_prompt[p], c).reward for p, c in zip(prompts, completions, strict=True)]

    model, tok = models.load(base, dtype=cfg.model.dtype)
    args = GRPOConfig(
        output_dir=str(tmp / f"trl-{checkpointing}"), use_cpu=True, bf16=False, per_device_train_batch_size=PROMPTS * GROUP,
        num_generations=GROUP, max_completion_length=NEW_TOKENS, learning_rate=LR, max_steps=steps + warmup,
        logging_steps=10_000, save_strategy="no", report_to=[], gradient_checkpointing=checkpointing,
        temperature=1.0, top_p=1.0, beta=0.0, num_iterations=1, dataloader_num_workers=0, seed=0,
        disable_tqdm=True,
    )
    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003
            stamps.append(time.perf_counter())

    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tok,
                          callbacks=[Clock()])
    t0 = time.perf_counter()
    trainer.train()
    edges = [t0] + stamps
    times = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)][warmup:]
    return {"seconds": times, "median": statistics.median(times), "gradient_checkpointing": checkpointing}


def bench_floor(base: str, steps: int, warmup: int, sampler: str = "generate") -> dict:
    """One generate (KV cache) + one forward/backward/AdamW over the whole batch, nothing else.

    sampler "generate": transformers' ``model.generate`` (the floor as the issue defines it);
    "engine": fade's hf sampling loop (prefix prefilled once per prompt), so the difference to fade is
    the update alone (fade: no second forward, shared-prefix forward, zero-advantage rows skipped).
    """
    from fade_core.rollout import build_engine

    model, tok = models.load(base)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    prompts = [p.prompt for p in countdown_task.generate(PROMPTS, seed=123)]
    enc = tok([p for p in prompts for _ in range(GROUP)], return_tensors="pt", padding=True)
    engine = build_engine("hf", model, tok)

    def step(i: int) -> None:
        torch.manual_seed(i)
        model.eval()
        with torch.no_grad():
            if sampler == "generate":
                seqs = model.generate(**enc, do_sample=True, max_new_tokens=NEW_TOKENS, temperature=1.0, top_p=1.0,
                                      top_k=0, pad_token_id=tok.pad_token_id)
            else:
                b = engine.generate(prompts, GROUP, max_new_tokens=NEW_TOKENS, seed=i)
                seqs = torch.cat([enc["input_ids"], b.completion_ids], 1)
        model.train()
        attn = torch.cat([enc["attention_mask"], torch.ones_like(seqs[:, enc["input_ids"].shape[1]:])], 1)
        logits = model(input_ids=seqs, attention_mask=attn).logits[:, enc["input_ids"].shape[1] - 1 : -1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, seqs[:, enc["input_ids"].shape[1]:, None]).squeeze(-1)
        adv = torch.randn(seqs.shape[0], 1)
        (-(adv * lp).mean()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()

    times = timed_steps(step, steps, warmup)
    return {"seconds": times, "median": statistics.median(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is steadier on a shared CPU)")
    ap.add_argument("--base", default="models/base", help="base model folder (default: the warm-started one)")
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--out", default=str(REPO / "bench" / "train_step.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        base = base_model(tmp, args.base)
        out: dict = {"base_model": base, "batch": f"{PROMPTS} prompts x {GROUP} rollouts, {NEW_TOKENS} new tokens",
                     "threads": args.threads, "load_average_before": os.getloadavg()}
        out["floor"] = bench_floor(base, args.steps, args.warmup)
        out["floor_engine"] = bench_floor(base, args.steps, args.warmup, sampler="engine")
        out["fade"] = bench_fade(base, tmp, args.steps, args.warmup, skip=True)
        out["fade_full"] = bench_fade(base, tmp, args.steps, args.warmup, skip=False)
        if not args.skip_trl:
            out["trl"] = bench_trl(base, tmp, args.steps, args.warmup, checkpointing=True)
            out["trl_no_ckpt"] = bench_trl(base, tmp, args.steps, args.warmup, checkpointing=False)
        out["load_average_after"] = os.getloadavg()
    f, floor = out["fade"]["median"], out["floor"]["median"]
    out["ratios"] = {"fade_over_floor": f / floor, "fade_full_over_floor": out["fade_full"]["median"] / floor,
                     "fade_over_floor_engine": f / out["floor_engine"]["median"],
                     "fade_full_over_floor_engine": out["fade_full"]["median"] / out["floor_engine"]["median"]}
    if "trl" in out:
        out["ratios"]["trl_over_fade"] = out["trl"]["median"] / f
        out["ratios"]["trl_no_ckpt_over_fade"] = out["trl_no_ckpt"]["median"] / f
        out["ratios"]["trl_over_fade_full"] = out["trl"]["median"] / out["fade_full"]["median"]
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"{'':12s} s/step (median of {args.steps})")
    for k in ("floor", "floor_engine", "fade", "fade_full", "trl", "trl_no_ckpt"):
        if k in out:
            print(f"{k:12s} {out[k]['median']:.3f}")
    for k, v in out["ratios"].items():
        print(f"{k:24s} {v:.2f}")
    print(f"fade split (median s): {out['fade']['split_median']}")
    print(f"load average before/after: {out['load_average_before']} / {out['load_average_after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
