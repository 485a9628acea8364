"""The RL trainer on a micro config: the record, every method, exact resume (also after SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from fade_core import advantages, config, models
from fade_core.runs import STATE_FILE, problems_digest, run_id
from fade_core.train import Trainer
from fade_core.train.record import TIMING_KEYS

MICRO_TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "max_position": 48}


EASY_ONLY = "{easy: {num_numbers: 3, max_number: 9, share: 1.0}}"


def micro_overrides(tmp: Path, **extra: object) -> list[str]:
    sets = {
        "data.out_dir": str(tmp / "data"),  # not prepared: countdown is generated in-process
        "data.countdown.num_train": 40,
        "data.countdown.num_test": 10,
        "data.countdown.levels": EASY_ONLY,  # 3 numbers: the micro base solves some, so groups have signal
        "train.runs_dir": str(tmp / "runs"),
        "train.steps": 6,
        "train.prompts_per_step": 4,
        "train.group_size": 8,
        "train.minibatches": 2,
        "train.lr": 3e-3,
        "train.checkpoint_every": 2,
        "train.rank1_every": 2,
        "rollout.max_new_tokens": 8,
        "compute.torch_threads": 1,
    }
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


@pytest.fixture(scope="module")
def base_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A micro model with a little competence (a few seconds of warm start), so rewards are not all 0."""
    from fade_core.warmstart import run_warmstart

    out = tmp_path_factory.mktemp("base")
    cfg = config.load(None, ["data.countdown.num_train=40", "data.countdown.num_test=10",
                             f"data.countdown.levels={EASY_ONLY}", "warmstart.steps=300",
                             "warmstart.batch_size=32", "warmstart.correct_fraction=0.8", "warmstart.lr=1e-2",
                             "warmstart.checkpoint_every=1000"])
    torch.set_num_threads(1)
    run_warmstart(MICRO_TINY, cfg.warmstart, cfg.data, out_dir=out)
    return out


def _strip(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in TIMING_KEYS}


def _records(run_dir: Path) -> list[dict]:
    return [_strip(json.loads(line)) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_micro_run_writes_the_record(tmp_path: Path, base_model: Path) -> None:
    cfg = config.load(None, micro_overrides(tmp_path, **{"train.method": "fade"}))
    trainer = Trainer(cfg, base_model=str(base_model))
    res = trainer.train()
    # the id names the problems trained on too (main's issue 18: problems_digest in run ids)
    assert res.run_dir.name == run_id(cfg, problems_digest(trainer.problems)) and res.run_dir.name.startswith("fade-s0-")
    recs = [json.loads(line) for line in (res.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(1, 7))
    for key in ("reward_mean", "solve_hist", "zero_var_frac", "m_s", "m_f", "mass_ratio", "entropy", "clip_frac_low",
                "clip_frac_high", "kl_ref", "grad_norm", "alpha", "delta", "len_mean", "time_rollout", "time_scoring",
                "time_update", "tokens_per_s", "rank1_frac", "eff_rank", "cov_adv_logprob"):
        assert key in recs[0], key
    assert sum(recs[0]["solve_hist"]) == 4 and len(recs[0]["solve_hist"]) == 9
    assert any(r["reward_mean"] > 0 for r in recs)
    assert 0 < recs[0]["entropy"] < 4 and 1 <= recs[-1]["alpha"] <= 3 and 0.3 <= recs[-1]["delta"] <= 1
    assert recs[0]["rank1_frac"] != recs[0]["rank1_frac"]  # nan: measured every 2nd step only
    with duckdb.connect(str(res.run_dir / "metrics.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT step, run_id, method, reward_mean FROM train_steps ORDER BY step").fetchall()
    assert [r[0] for r in rows] == list(range(1, 7)) and rows[0][1] == res.run_dir.name and rows[0][2] == "fade"
    steps = sorted(int(p.name[5:]) for p in (res.run_dir / "checkpoints").iterdir())
    assert steps == [2, 4, 6]
    final = res.run_dir / "checkpoints" / "step-6"
    assert (final / "model.safetensors").exists() and (final / STATE_FILE).exists() and (final / "tokenizer.json").exists()
    m, _ = models.load(final)  # loads back as an HF model
    base, _ = models.load(base_model)
    assert not torch.equal(models.output_head(m), models.output_head(base))  # it trained
    assert (res.run_dir / "config.yaml").exists()


def test_cov_adv_logprob_is_the_covariance_over_kept_rollouts(tmp_path: Path, base_model: Path) -> None:
    """The logged Cov(A, log pi) equals a brute-force covariance of the step's advantages with the rollouts'
    per-token mean log-probs, over the rollouts the mask keeps (dapo masks nothing; asym has A != 0 mean)."""
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = []

    class Capturing(Trainer):
        def _record(self, step, lr, first, groups, rounds, advantages, keep, upd, resample):  # type: ignore[override]
            rec = super()._record(step, lr, first, groups, rounds, advantages, keep, upd, resample)
            seen.append((advantages.numpy().copy(), groups.mean_logprob.numpy().copy(), keep.numpy().copy(),
                         rec["cov_adv_logprob"]))
            return rec

    cfg = config.load(None, micro_overrides(tmp_path, **{"train.method": "asym_grpo", "train.params": {"delta": 2.0},
                                                          "train.steps": 3, "train.checkpoint_every": 3}))
    Capturing(cfg, base_model=str(base_model)).train()
    assert len(seen) == 3
    nonzero = 0
    for adv, lp, keep, logged in seen:
        a, lps = adv[keep].astype(np.float64), lp[keep].astype(np.float64)
        brute = sum((ai - a.mean()) * (li - lps.mean()) for ai, li in zip(a, lps, strict=True)) / len(a)
        assert logged == pytest.approx(brute, abs=1e-12)
        nonzero += abs(brute) > 1e-9
    assert nonzero >= 1  # some step has signal, so the comparison is not 0 == 0


@pytest.mark.parametrize("method", advantages.names())
def test_every_registered_method_trains(tmp_path: Path, base_model: Path, method: str) -> None:
    cfg = config.load(None, micro_overrides(tmp_path, **{"train.method": method, "train.steps": 2, "train.checkpoint_every": 2}))
    recs = []
    Trainer(cfg, base_model=str(base_model), on_step=lambda s, r: recs.append(r)).train()
    assert len(recs) == 2 and all(r["optimizer_steps"] >= 1 for r in recs)
    if method == "codapo":
        assert recs[0]["resample_groups"] == 4  # top 25% of 4 questions = 1, repeated 4 times
    if method == "dapo":
        assert recs[0]["sampling_rounds"] >= 1
    if method in ("nsr", "w_reinforce"):  # failures always carry weight, so the head moved: rank-1 share defined
        assert 0 < recs[1]["rank1_frac"] <= 1 and recs[1]["eff_rank"] >= 1


def test_in_process_resume_is_exact(tmp_path: Path, base_model: Path) -> None:
    sets = micro_overrides(tmp_path, **{"train.method": "dapo", "train.kl_coef": 0.05, "train.ppo_epochs": 2})
    cfg = config.load(None, sets)
    full = Trainer(cfg, base_model=str(base_model), run_dir=tmp_path / "full").train()
    Trainer(cfg, base_model=str(base_model), run_dir=tmp_path / "cut", stop_after=3).train()  # checkpoint at 2, dies after 3
    res = Trainer(cfg, base_model=str(base_model), run_dir=tmp_path / "cut").train()
    assert res.resumed_from == 2
    assert _records(tmp_path / "cut") == _records(full.run_dir)
    from fade_core.code_version import git_state
    from fade_core.runs import read_code_versions

    sessions = read_code_versions(tmp_path / "cut")  # each session recorded the code it ran, and where it started
    assert [s["from_step"] for s in sessions] == [0, 2] and {s["git_commit"] for s in sessions} == {git_state()[0]}
    a = load_file(str(full.run_dir / "checkpoints/step-6/model.safetensors"))
    b = load_file(str(tmp_path / "cut/checkpoints/step-6/model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_rollout_budget_ends_each_method_at_the_same_rollouts(tmp_path: Path, base_model: Path) -> None:
    """train.max_rollouts matches budgets in rollouts: rloo samples P*G = 32 a step and runs 6 steps of 192;
    codapo samples 32 more a step for its second update (1 group of 4 repeated 4 times x G = 8), so it ends
    after 3 steps, with a checkpoint there; a rerun resumes at that checkpoint and trains nothing more."""
    done = {}
    for method in ("rloo", "codapo"):
        cfg = config.load(None, micro_overrides(tmp_path, **{"train.method": method, "train.max_rollouts": 192,
                                                              "train.checkpoint_every": 4}))
        res = Trainer(cfg, base_model=str(base_model)).train()
        recs = [json.loads(line) for line in (res.run_dir / "metrics.jsonl").read_text().splitlines()]
        done[method] = (len(recs), recs[-1]["rollouts_total"], sum(r["rollouts"] for r in recs))
        ckpts = sorted(int(p.name[5:]) for p in (res.run_dir / "checkpoints").iterdir())
        assert ckpts[-1] == len(recs)  # the budget's last step is checkpointed (not a multiple of 4 for codapo)
        again = Trainer(cfg, base_model=str(base_model)).train()
        assert again.resumed_from == len(recs) and again.checkpoints == []
    assert done == {"rloo": (6, 192, 192), "codapo": (3, 192, 192)}


@pytest.mark.slow
def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path: Path, base_model: Path) -> None:
    sets = micro_overrides(tmp_path, **{"train.steps": 14, "train.checkpoint_every": 3})
    cfg_path = config.save(config.load(None, sets), tmp_path / "cfg.yaml")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def cmd(run_dir: Path) -> list[str]:
        return [sys.executable, "-m", "fade_core.train", "--config", str(cfg_path), "--base-model", str(base_model),
                "--run-dir", str(run_dir)]

    subprocess.run(cmd(tmp_path / "full"), check=True, env=env, capture_output=True)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(cmd(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        lines = (killed / "metrics.jsonl").read_text().splitlines() if (killed / "metrics.jsonl").exists() else []
        if len(lines) >= 5:  # past the checkpoint at step 3, mid-training
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (killed / "checkpoints" / "step-14").exists()
    done = subprocess.run(cmd(killed), check=True, env=env, capture_output=True, text=True)
    assert json.loads(done.stdout.strip().splitlines()[-1])["final_checkpoint"].endswith("step-14")
    assert _records(killed) == _records(tmp_path / "full")
    a = load_file(str(tmp_path / "full/checkpoints/step-14/model.safetensors"))
    b = load_file(str(killed / "checkpoints/step-14/model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    with duckdb.connect(str(killed / "metrics.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT step) FROM train_steps").fetchone() == (14, 14)


def test_kl_target_validity_run_measures_base(tmp_path: Path, base_model: Path) -> None:
    cfg = config.load(None, micro_overrides(tmp_path, **{"train.kl_target_validity": 0.9, "train.steps": 2}))
    recs = []
    Trainer(cfg, base_model=str(base_model), on_step=lambda s, r: recs.append(r)).train()
    assert recs[0]["kl_coef"] > 0 and recs[0]["kl_ref"] >= 0


def test_missing_base_model_is_a_clear_error(tmp_path: Path) -> None:
    cfg = config.load(None, micro_overrides(tmp_path, **{"warmstart.out_dir": str(tmp_path / "nothing")}))
    with pytest.raises(FileNotFoundError, match="fade warmstart"):
        Trainer(cfg)


def test_resume_falls_back_past_a_damaged_checkpoint(tmp_path: Path, base_model: Path, caplog) -> None:
    """Issue 16 point 7: the newest checkpoint's trainer_state.pt truncated (a crash mid-copy, a full disk):
    resume names the file, warns, and continues from the checkpoint before it."""
    cfg = config.load(None, micro_overrides(tmp_path))
    Trainer(cfg, base_model=str(base_model), run_dir=tmp_path / "cut", stop_after=5).train()  # checkpoints 2, 4
    state = tmp_path / "cut/checkpoints/step-4" / STATE_FILE
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    with caplog.at_level("WARNING", logger="fade_core.train.trainer"):
        res = Trainer(cfg, base_model=str(base_model), run_dir=tmp_path / "cut").train()
    assert res.resumed_from == 2 and res.last_metrics["step"] == 6
    assert any(str(state) in r.getMessage() and "damaged file" in r.getMessage() for r in caplog.records)
