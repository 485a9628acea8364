"""A training run's TensorBoard event file grows while the run trains: the trainer logs each step's
record live (rank 0), and the events are readable before the run ends."""

from __future__ import annotations

from pathlib import Path

from fade_core import config, models, plan
from fade_core.train import Trainer

TINY = config.TinyModel(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_position=48)


def test_tensorboard_events_grow_while_the_run_trains(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model, tok = models.build_tiny(TINY, seed=0)
    models.save(model, tok, tmp_path / "base")
    cfg = config.load(None, [f"data.out_dir={tmp_path / 'data'}", "data.countdown.num_train=16",
                             "data.countdown.num_test=4", f"train.runs_dir={tmp_path / 'runs'}", "train.method=grpo",
                             "train.steps=3", "train.prompts_per_step=2", "train.group_size=4", "train.minibatches=1",
                             "train.checkpoint_every=3", "train.rank1_every=3", "rollout.max_new_tokens=6",
                             "compute.torch_threads=1"])
    trainer = Trainer(cfg, base_model=str(tmp_path / "base"))
    log_dir = plan.tracking_dir(cfg, trainer.run_id)
    seen: list[tuple[int, int, list[int]]] = []

    def during(step: int, record: dict) -> None:  # called inside the loop, before the run ends
        size = sum(f.stat().st_size for f in log_dir.glob("events.out.tfevents.*"))
        steps = [e.step for e in EventAccumulator(str(log_dir)).Reload().Scalars("train/reward_mean")]
        seen.append((step, size, steps))

    trainer.on_step = during
    trainer.train()
    assert log_dir == tmp_path / "tensorboard" / trainer.run_id
    assert [s for s, _, _ in seen] == [1, 2, 3]
    assert seen[0][1] < seen[1][1] < seen[2][1]  # the file grew at every step
    assert [steps for _, _, steps in seen] == [[1], [1, 2], [1, 2, 3]]  # and each step was readable at once
    tags = set(EventAccumulator(str(log_dir)).Reload().Tags()["scalars"])
    assert {"train/reward_mean", "train/loss", "train/entropy", "train/kl_ref", "train/len_mean"} <= tags


def test_no_events_when_tracking_is_off(tmp_path: Path) -> None:
    model, tok = models.build_tiny(TINY, seed=0)
    models.save(model, tok, tmp_path / "base")
    cfg = config.load(None, [f"train.runs_dir={tmp_path / 'runs'}", "data.countdown.num_train=16",
                             "data.countdown.num_test=4", f"data.out_dir={tmp_path / 'data'}", "train.steps=1",
                             "train.prompts_per_step=2", "train.group_size=2", "rollout.max_new_tokens=4",
                             "compute.torch_threads=1", "tracking.tensorboard=false"])
    Trainer(cfg, base_model=str(tmp_path / "base")).train()
    assert not (tmp_path / "tensorboard").exists()
