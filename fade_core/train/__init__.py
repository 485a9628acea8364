"""RL training of a policy with verifiable rewards and a pluggable advantage, one run per Config.

    from fade_core.train import Trainer
    result = Trainer(cfg).train()        # writes runs/<run_id>/ (fade_core.runs), resuming if it can

Under torchrun every rank runs ``python -m fade_core.train --config run.yaml`` (:mod:`.__main__`).

Modules, one concern each:

    trainer      the loop: sample -> score -> refill -> advantages -> PPO update -> record -> checkpoint
    groups       a batch of G scored rollouts per prompt, gathered over ranks
    policy       the policy's log-probs: the shared-prefix forward of the update, its no-grad uses
    distributed  ranks (torchrun) and the optimizer (AdamW, or DeepSpeed ZeRO 0-3)
    schedules    the prompt sampler, the rollout seeds, the learning rate, the KL coefficient
    checkpoint   atomic checkpoints and exact resume
    record       the step record (one NaN guard) and the StepLogger sinks

The loop calls no advantage method by name: what DAPO, CoDaPO or FADE do differently in training is
in their :class:`~fade_core.advantages.Advantage` hooks.
"""

from __future__ import annotations

from fade_core.train.trainer import Trainer, TrainResult, load_problems, train

__all__ = ["TrainResult", "Trainer", "load_problems", "train"]
