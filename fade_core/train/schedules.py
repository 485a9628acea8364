"""What changes with the step: the prompt sampler, the rollout seeds, the learning rate and the KL coefficient.

All pure or resumable: the sampler's position is part of the checkpoint, and a rollout seed is a function of
(run seed, step, sampling round, prompt slot) only, so a resumed run draws exactly what an uninterrupted
run draws.

KL coefficient from a target validity (``train.kl_target_validity`` = mu). With a binary reward r
(1 = valid / verified) and the KL-regularised objective E_pi[r] - beta KL(pi || pi_ref), the optimum is
the tilted reference pi*(y) = pi_ref(y) exp(r(y) / beta) / Z. Its validity rate is

    mu = A e^{1/beta} / (A e^{1/beta} + 1 - A),        A = P_{pi_ref}(r = 1),

so logit(mu) = logit(A) + 1/beta, i.e. beta = 1 / (logit(mu) - logit(A)). A is the base model's
validity measured before training (mean reward of G samples on P training prompts); mu must exceed
A (a KL penalty can only hold the policy *below* full optimisation, at a chosen validity).
"""

from __future__ import annotations

import math

import numpy as np

SEED_MOD = 2**31 - 1
BASE_VALIDITY_STREAM = 7
"""numpy stream (after the run seed) of the prompts on which the base model's validity is measured."""
RESAMPLE_ROUND = 1000
"""Sampling round number of a step's resampled groups (Advantage.resample_groups): seeds apart from refills."""


class PromptSampler:
    """Draws problem indices: a fresh seeded permutation per epoch, consumed in order (resumable)."""

    def __init__(self, num: int, seed: int) -> None:
        if num < 1:
            raise ValueError("PromptSampler needs at least one problem")
        self.num, self.seed, self.epoch, self.pos = num, seed, 0, 0
        self._perm = self._permutation()

    def _permutation(self) -> list[int]:
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.num).tolist()

    def take(self, k: int) -> list[int]:
        out = []
        while len(out) < k:
            if self.pos >= self.num:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation()
            out.append(self._perm[self.pos])
            self.pos += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"num": self.num, "seed": self.seed, "epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["num"] != self.num:
            raise ValueError(f"sampler state is for {state['num']} problems, this run has {self.num}")
        self.seed, self.epoch, self.pos = state["seed"], state["epoch"], state["pos"]
        self._perm = self._permutation()


def rollout_seed(seed: int, step: int, round_: int, slot: int) -> int:
    """Seed of one prompt's rollouts: a function of (run seed, step, sampling round, prompt slot)."""
    return int(np.random.default_rng([seed, step, round_, slot]).integers(0, SEED_MOD))


def step_seeds(seed: int, step: int, round_: int, count: int) -> list[int]:
    """The rollout seeds of prompt slots 0..count-1 of one sampling round of one step."""
    return [rollout_seed(seed, step, round_, i) for i in range(count)]


def base_validity_prompts(seed: int, num_problems: int, count: int) -> list[int]:
    """The problem indices on which the base model's validity is measured (seeded, before any update)."""
    return np.random.default_rng([seed, BASE_VALIDITY_STREAM]).permutation(num_problems)[:count].tolist()


def lr_multiplier(step: int, total: int, warmup: int, schedule: str) -> float:
    """Learning-rate factor at RL step ``step`` (0-based): linear warm-up, then constant or cosine to 0."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, progress))))
    raise ValueError(f"unknown lr_schedule {schedule!r}")


def kl_coef_from_validity(mu: float, base_validity: float, clip: float = 1e-4) -> float:
    """beta = 1 / (logit mu - logit A) (module docstring); A is clipped to [clip, 1 - clip]."""
    a = min(max(base_validity, clip), 1 - clip)
    if not 0 < mu < 1:
        raise ValueError(f"train.kl_target_validity must be in (0, 1), got {mu}")
    gap = math.log(mu / (1 - mu)) - math.log(a / (1 - a))
    if gap <= 0:
        raise ValueError(
            f"train.kl_target_validity={mu} must exceed the base model's measured validity A={base_validity:.4f} "
            "(beta = 1/(logit mu - logit A) is only positive for mu > A)"
        )
    return 1.0 / gap
