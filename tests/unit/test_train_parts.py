"""The pieces of fade_core.train on their own: sampler and schedules, groups, the step record, the policy's
no-grad log-probs, checkpoints. (tests/integration/test_train.py runs them together.)"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fade_core import advantages, models, runs
from fade_core.rollout import RolloutBatch, build_engine
from fade_core.train import checkpoint as ckpt
from fade_core.train import record as rec_lib
from fade_core.train.distributed import Dist, UpdateBackend
from fade_core.train.groups import Groups, cat_batches, concat_groups, gather_groups, local_share
from fade_core.train.policy import batch_logprobs, completion_logprobs, zero_loss
from fade_core.train.schedules import (
    SEED_MOD,
    PromptSampler,
    base_validity_prompts,
    kl_coef_from_validity,
    lr_multiplier,
    rollout_seed,
    step_seeds,
)

TINY = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32, "max_position": 32}


# ============================================================================ sampler and schedules
def test_prompt_sampler_is_a_seeded_permutation_per_epoch_and_resumes_exactly() -> None:
    s = PromptSampler(7, seed=3)
    first, second = s.take(7), s.take(7)
    assert sorted(first) == sorted(second) == list(range(7)) and first != second  # a fresh order each epoch
    again = PromptSampler(7, seed=3)
    assert again.take(5) + again.take(9) == first + second  # draws do not depend on how they are split
    state = again.state_dict()
    tail = again.take(10)
    resumed = PromptSampler(7, seed=3)
    resumed.load_state_dict(state)
    assert resumed.take(10) == tail
    assert PromptSampler(7, seed=4).take(7) != first
    with pytest.raises(ValueError, match="for 7 problems"):
        PromptSampler(8, seed=3).load_state_dict(state)
    with pytest.raises(ValueError, match="at least one"):
        PromptSampler(0, seed=3)


def test_rollout_seeds_depend_on_seed_step_round_and_slot_only() -> None:
    seeds = step_seeds(0, 5, 0, 4)
    assert seeds == [rollout_seed(0, 5, 0, i) for i in range(4)] == step_seeds(0, 5, 0, 4)
    assert all(0 <= s < SEED_MOD for s in seeds) and len(set(seeds)) == 4
    others = {rollout_seed(1, 5, 0, 0), rollout_seed(0, 6, 0, 0), rollout_seed(0, 5, 1, 0)}
    assert seeds[0] not in others and len(others) == 3
    assert step_seeds(0, 5, 0, 6)[:4] == seeds  # more slots do not move the first ones
    picked = base_validity_prompts(2, 10, 4)
    assert picked == base_validity_prompts(2, 10, 4) and len(set(picked)) == 4 and max(picked) < 10


def test_learning_rate_schedules() -> None:
    assert [lr_multiplier(s, 10, 4, "constant") for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lr_multiplier(2, 10, 2, "cosine") == 1.0  # first step after warm-up
    assert lr_multiplier(6, 10, 2, "cosine") == pytest.approx(0.5)  # halfway through the decay
    assert lr_multiplier(10, 10, 2, "cosine") == pytest.approx(0.0, abs=1e-12)
    assert lr_multiplier(50, 10, 2, "cosine") == pytest.approx(0.0, abs=1e-12)  # clamped past the end
    with pytest.raises(ValueError, match="lr_schedule"):
        lr_multiplier(0, 10, 0, "linear")


def test_kl_coefficient_from_target_validity() -> None:
    # beta = 1/(logit mu - logit A): the tilted optimum pi_ref e^{r/beta} has validity exactly mu
    for a, mu in ((0.1, 0.5), (0.3, 0.9), (0.02, 0.2)):
        beta = kl_coef_from_validity(mu, a)
        tilted = a * math.exp(1 / beta) / (a * math.exp(1 / beta) + 1 - a)
        assert tilted == pytest.approx(mu, rel=1e-12)
    assert kl_coef_from_validity(0.5, 0.0) > 0  # A = 0 is clipped, not a division by zero
    with pytest.raises(ValueError, match="exceed"):
        kl_coef_from_validity(0.2, 0.5)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        kl_coef_from_validity(1.0, 0.5)


# ============================================================================ groups
def fake_batch(prompt_ids: list[list[int]], n: int, lengths: list[int], logprob: float = -0.5,
               entropies: bool = True) -> RolloutBatch:
    """A RolloutBatch with completions of the given lengths (token id = 5 + position), constant log-probs."""
    num, width = len(prompt_ids) * n, max(lengths)
    mask = torch.tensor([[t < ln for t in range(width)] for ln in lengths])
    ids = torch.where(mask, 5 + torch.arange(width).expand(num, width), torch.zeros(num, width, dtype=torch.long))
    return RolloutBatch(
        prompts=[f"p{i}" for i in range(len(prompt_ids))], prompt_token_ids=prompt_ids, n=n,
        prompt_index=torch.arange(num) // n, completion_ids=ids, completion_mask=mask,
        logprobs=torch.where(mask, logprob, 0.0), lengths=torch.tensor(lengths),
        finish_reasons=["length" if ln == width else "stop" for ln in lengths], texts=[""] * num,
        entropies=torch.where(mask, 0.25, 0.0) if entropies else None, pad_token_id=0,
    )


def verdicts(rewards: list[float]) -> list[SimpleNamespace]:
    return [SimpleNamespace(reward=r, passed=r >= 0.5) for r in rewards]


class RecordingDist(Dist):
    """Dist of one rank of a pretend 2-rank job: gather() returns the payloads recorded for both ranks."""

    payloads: dict[int, object] = {}

    def gather(self, obj: object) -> list[object]:
        RecordingDist.payloads[self.rank] = obj
        return [RecordingDist.payloads.get(r, obj) for r in range(self.world)]


def test_gather_groups_assembles_the_whole_batch_from_strided_shares() -> None:
    g, problems = 2, [10, 11, 12]
    shares = {r: local_share(3, Dist(rank=r, world=2)) for r in (0, 1)}
    assert shares == {0: [0, 2], 1: [1]}
    rewards = {0: [1.0, 0.0, 0.0, 0.0], 1: [1.0, 1.0]}
    lengths = {0: [2, 3, 1, 3], 1: [3, 2]}
    batches = {r: fake_batch([[1, 2]] * len(shares[r]), g, lengths[r], entropies=r == 0) for r in (0, 1)}
    for _ in range(2):  # the first pass records each rank's payload, the second assembles both
        out = {r: gather_groups(problems, shares[r], batches[r], verdicts(rewards[r]), RecordingDist(rank=r, world=2),
                                gen_seconds=1.0 + r, score_seconds=0.5) for r in (0, 1)}
    for r in (0, 1):
        gr = out[r]
        assert gr.problems == problems and gr.local == shares[r] and gr.batch is batches[r]
        assert gr.rewards.tolist() == [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
        assert gr.passed.tolist() == [[True, False], [True, True], [False, False]]
        assert gr.lengths.tolist() == [[2, 3], [3, 2], [1, 3]]
        assert gr.truncated.tolist() == [[False, True], [True, False], [False, True]]
        assert torch.allclose(gr.mean_logprob, torch.full((3, 2), -0.5, dtype=torch.float64))
        # entropy sums: engine entropies (rank 0) or -sum log p (rank 1, an engine without entropies)
        assert gr.entropy_sum.tolist() == [[0.5, 0.75], [1.5, 1.0], [0.25, 0.75]]
        assert gr.gen_seconds == 2.0 and gr.score_seconds == 0.5  # the slowest rank's


def single_rank_groups(rewards: list[list[float]], lengths: list[list[int]], problems: list[int]) -> Groups:
    g = len(rewards[0])
    batch = fake_batch([[1, 2, i] for i in range(len(problems))], g, [x for row in lengths for x in row])
    return gather_groups(problems, list(range(len(problems))), batch, verdicts([x for row in rewards for x in row]),
                         Dist(), gen_seconds=1.0, score_seconds=2.0)


def test_select_and_concat_keep_rollouts_with_their_groups() -> None:
    a = single_rank_groups([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], [[1, 2], [3, 1], [2, 2]], [7, 8, 9])
    b = single_rank_groups([[0.0, 1.0]], [[4, 1]], [5])
    picked = a.select([2, 0])
    assert picked.problems == [9, 7] and picked.rewards.tolist() == [[1.0, 1.0], [1.0, 0.0]]
    assert picked.local == [0, 1] and picked.batch.prompt_token_ids == [[1, 2, 2], [1, 2, 0]]
    assert picked.batch.lengths.tolist() == [2, 2, 1, 2]
    both = concat_groups([picked, b])
    assert both.problems == [9, 7, 5] and both.local == [0, 1, 2]
    assert both.lengths.tolist() == [[2, 2], [1, 2], [4, 1]]
    assert both.batch.completion_ids.shape == (6, 4)  # padded to the widest part
    assert both.batch.lengths.tolist() == both.lengths.flatten().tolist()
    assert both.gen_seconds == 2.0 and both.score_seconds == 4.0
    assert concat_groups([a]) is a and cat_batches([a.batch]) is a.batch
    no_entropy = fake_batch([[1]], 2, [1, 1], entropies=False)
    assert cat_batches([a.batch, no_entropy]).entropies is None


# ============================================================================ the step record
def _record(groups: Groups, adv_name: str = "grpo", **params: object) -> dict:
    adv = advantages.build(adv_name, **params)
    a = adv(groups.rewards, mean_logprob=groups.mean_logprob).to(torch.float64)
    keep = adv.mask(groups.rewards, mean_logprob=groups.mean_logprob)
    return rec_lib.step_record(
        run_id="r", method="m", seed=1, step=3, lr=0.1, group_size=groups.rewards.shape[1] if groups.problems else 2,
        first=groups, groups=groups, rounds=1, advantages=a, keep=keep, update={"loss": 0.5},
        resample={"resample_groups": 4, "resample_gen_seconds": 9.0}, state=adv.state_record(),
        kl_coef=0.0, eps_low=0.2, eps_high=0.28,
    )


def test_step_record_values_and_key_order() -> None:
    groups = single_rank_groups([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], [[1, 2], [3, 1], [2, 2]], [7, 8, 9])
    r = _record(groups, "fade")
    keys = list(r)
    assert keys[:5] == ["run_id", "method", "seed", "step", "lr"]
    assert keys.index("alpha") < keys.index("len_mean") < keys.index("eps_high") < keys.index("p_hat")
    assert keys.index("h_target") < keys.index("loss") < keys.index("resample_groups") < keys.index("rank1_frac")
    assert "resample_gen_seconds" not in r  # timings are summed into time_* by the trainer
    assert r["solve_hist"] == [1, 1, 1] and r["reward_mean"] == pytest.approx(0.5) and r["solve_rate"] == 0.5
    assert r["zero_var_frac"] == pytest.approx(2 / 3) and r["all_fail_frac"] == pytest.approx(1 / 3)
    assert (r["len_mean"], r["len_max"], r["len_min"]) == (pytest.approx(11 / 6), 3.0, 1.0)
    assert r["entropy"] == pytest.approx(0.25) and r["kept_frac"] == 1.0 and r["groups_used"] == 3
    assert r["alpha"] == advantages.build("fade").alpha and math.isnan(r["h_hat"])
    assert all(math.isnan(r[k]) for k in rec_lib.RANK1_KEYS)
    assert math.isnan(_record(groups, "grpo")["alpha"]) and _record(groups, "power", alpha=3)["alpha"] == 3.0


def test_step_record_of_an_empty_batch_is_complete_with_nans() -> None:
    empty = concat_groups([single_rank_groups([[1.0, 0.0]], [[1, 1]], [1])]).select([])
    r = _record(empty)
    full = _record(single_rank_groups([[1.0, 0.0]], [[1, 1]], [1]))
    assert list(r) == list(full)
    for key in ("reward_mean", "solve_rate", "zero_var_frac", "m_s", "m_f", "mass_ratio", "cov_adv_logprob",
                "adv_mean", "len_mean", "len_max", "truncated_frac", "kept_frac"):
        assert math.isnan(r[key]), key
    assert r["solve_hist"] == [0, 0, 0] and r["groups_used"] == 0 and r["entropy"] == 0.0


def test_progress_bar_is_a_step_logger() -> None:
    bar = rec_lib.ProgressBar(total=3, start=1, label="x")
    bar.log(2, {"reward_mean": 0.5, "entropy": 1.0, "alpha": 2.0, "delta": math.nan})
    bar.close()
    assert bar.progress.tasks[0].completed == 2


# ============================================================================ policy log-probs
@pytest.fixture(scope="module")
def tiny() -> tuple[torch.nn.Module, object]:
    return models.build_tiny(TINY, seed=0)


def test_batch_logprobs_are_the_masked_completion_logprobs(tiny) -> None:
    model, tok = tiny
    from fade_core import countdown_task

    batch = build_engine("hf", model, tok).generate([p.prompt for p in countdown_task.generate(3, seed=1)], 3,
                                                    max_new_tokens=5, seed=2)
    got = batch_logprobs(model, batch, pad_id=tok.pad_token_id, temperature=1.0)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch.prompt_token_ids, batch.prompt_index, batch.completion_ids,
                                    pad_id=tok.pad_token_id)
    assert torch.allclose(got, lp * batch.completion_mask, atol=1e-6)
    assert torch.allclose(got, batch.logprobs, atol=1e-5)  # the engine sampled from this very policy
    loss = zero_loss(model, start_id=tok.bos_token_id, pad_id=tok.pad_token_id, temperature=1.0)
    model.zero_grad()
    loss.backward()
    assert float(loss.detach()) == 0.0 and models.output_head(model).grad is not None  # a real graph, zero gradient
    assert float(models.output_head(model).grad.abs().sum()) == 0.0


# ============================================================================ checkpoints
def test_checkpoint_round_trip_restores_weights_optimizer_and_rng(tmp_path: Path, tiny) -> None:
    model, tok = models.build_tiny(TINY, seed=1)
    tcfg = SimpleNamespace(lr=1e-2, weight_decay=0.0, grad_clip=1.0)
    backend = UpdateBackend(model, tcfg, Dist(), None)
    ids = torch.tensor([[1, 5, 6, 7]])
    for _ in range(2):
        backend.backward(model(input_ids=ids).logits.square().mean())
        backend.step()
    final = runs.checkpoint_dir(tmp_path, 2)
    (final.parent / "step-2.tmp").mkdir(parents=True)  # a stale half-written attempt
    torch.manual_seed(5)
    np.random.seed(5)
    out = ckpt.save_checkpoint(final, {"step": 2, "note": "x"}, model=model, tokenizer=tok, backend=backend, dist=Dist())
    expect_draw = (torch.rand(3), np.random.rand(2))
    assert out == final and not (final.parent / "step-2.tmp").exists()
    assert runs.is_checkpoint(final) and runs.is_resumable(final)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    opt = {k: {n: t.clone() for n, t in s.items()} for k, s in backend.optimizer.state_dict()["state"].items()}
    assert opt and all("exp_avg" in s for s in opt.values())

    other, _ = models.build_tiny(TINY, seed=2)
    other_backend = UpdateBackend(other, tcfg, Dist(), None)
    torch.manual_seed(99)
    np.random.seed(99)
    state = ckpt.load_checkpoint(final, model=other, backend=other_backend, dist=Dist())
    assert state["step"] == 2 and state["note"] == "x"
    assert all(torch.equal(other.state_dict()[k], weights[k]) for k in weights)
    got_opt = other_backend.optimizer.state_dict()["state"]
    assert all(torch.equal(got_opt[k][n], t) for k, s in opt.items() for n, t in s.items())
    draw = (torch.rand(3), np.random.rand(2))  # the RNGs continue where the saved run's were
    assert torch.equal(draw[0], expect_draw[0]) and np.array_equal(draw[1], expect_draw[1])
    reloaded, _ = models.load(final)  # and the policy is a plain HF folder
    assert torch.equal(models.output_head(reloaded), models.output_head(model))


def test_report_and_claims_read_the_names_the_record_writes() -> None:
    """One name per metric: every training-record column the report draws and the claims read is a key of
    the trainer's step record (no alias tables between them)."""
    from fade_core import claims, losses, report

    groups = single_rank_groups([[1.0, 0.0], [0.0, 0.0]], [[1, 2], [3, 1]], [7, 8])
    # the update's statistics as Trainer._update returns them: the loss terms' means and the optimizer's
    update = {**losses.LossStats().means(), "grad_norm": 0.0, "grad_norm_max": 0.0, "loss": 0.0, "optimizer_steps": 1}
    adv = advantages.build("fade")
    written = set(rec_lib.step_record(
        run_id="r", method="fade", seed=0, step=1, lr=0.1, group_size=2, first=groups, groups=groups, rounds=1,
        advantages=adv(groups.rewards).to(torch.float64), keep=adv.mask(groups.rewards), update=update, resample={},
        state=adv.state_record(), kl_coef=0.0, eps_low=0.2, eps_high=0.2))
    assert set(report.TRAIN_METRICS) <= written, set(report.TRAIN_METRICS) - written
    assert set(claims.RECORD_COLUMNS) <= written, set(claims.RECORD_COLUMNS) - written
