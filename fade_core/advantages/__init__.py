"""The policy weights (advantages) fade compares, as one registry.

A policy-gradient step for one prompt samples a *group* of G rollouts, scores each with a reward r_i
(binary in the paper: 1 = verified correct), and weights each rollout's score-function gradient by an
advantage A_i. Methods differ only in how they map the group's rewards to advantages; the FADE paper
reads every such map along three axes (see ``fade_core.decomposition``): sign (how much weight goes
to successes vs failures), difficulty (at which solve rate p the weight peaks) and scale.

Every method here is a small pure function ``rewards [num_groups, G] -> advantages [num_groups, G]``
(float64 inside, vectorized over groups) plus a thin :class:`Advantage` object that holds validated
parameters and, for FADE, state::

    adv = build("power", alpha=2)
    A = adv(rewards)                      # [num_groups, G], rewards' float dtype (float32 for ints)
    keep = adv.mask(rewards)              # bool [num_groups, G]
    adv.observe(solve_rate=0.3, entropy=1.2)   # once per step; a no-op except for FADE
    state = adv.state_dict(); adv.load_state_dict(state)

Modules: :mod:`~fade_core.advantages.formulas` (the pure functions), :mod:`~fade_core.advantages.methods`
(parameters, masks, training hooks, the registry). Formulas, with their sources: docs/advantages.md in
the repository (notation: c successes in a group, rbar = c / G).

Conventions (one place for all methods)
---------------------------------------
* **Successes.** Methods defined on binary rewards (w_reinforce, psr, nsr, passk, bbg, and the S/F
  split of the decomposition) count a rollout as a success when ``r >= SUCCESS_THRESHOLD`` (0.5).
  With {0, 1} rewards this is exact; real-valued rewards are thresholded.
* **The mask.** ``adv.mask(rewards, **context)`` returns a bool tensor [num_groups, G]:
  **True = the rollout contributes to the loss**, False = it is dropped (it must not count in the
  loss's token or sequence denominators either). Dropped rollouts also get advantage 0, so a trainer
  that forgets the mask gets the right gradient direction but a diluted scale. Who drops what:

  - ``psr``: failures are dropped (only successes are reinforced).
  - ``nsr``: successes are dropped (only failures are pushed down).
  - ``dapo``: dynamic sampling drops whole groups with zero reward variance (rbar in {0, 1} for binary
    rewards). The trainer refills the batch by sampling more prompts, up to ``adv.max_sampling_rounds``
    sampling rounds per step, keeping groups where ``adv.keep_groups(rewards)`` is True.
  - ``bbg``: whole groups whose boundary utility u(m) < tau are dropped (gated).
  - every other method: all True.
* **Single-rollout groups (G = 1).** Methods with a within-group baseline (grpo, dr_grpo, rloo, dapo,
  power, asym_grpo, power_asym, maxpo, codapo, fade) return 0: one rollout has no baseline.
* **Context.** Extra inputs come by keyword: ``mean_logprob`` [num_groups, G] (each rollout's mean
  token log-prob under the sampling policy) is required by ``codapo`` and ignored by the others, so
  a trainer may pass the same context to every method; an unknown context key is an error.
* **Trainer hints.** Every Advantage has ``loss_agg`` (recommended loss aggregation or None = use the
  configured one) and ``eps_low`` / ``eps_high`` (recommended PPO clip range or None);
  ``recommended()`` returns them as a dict keyed like ``train`` config fields. DAPO recommends
  token-mean and clip-higher (0.2, 0.28); Dr.GRPO recommends seq-mean-token-sum-norm.
* **Training hooks.** The trainer calls no method by name: reward shaping, group keep/refill, a second
  update on resampled groups and the method's own state in the step record are hooks of
  :class:`~fade_core.advantages.methods.Advantage`, no-ops unless a method overrides them.

Adding a method: write the pure function in ``formulas.py``, then one ``_register(Method(...))`` line in
``methods.py`` (with an Advantage subclass overriding the hooks it needs, if it samples or updates
differently); it then trains, is validated in params.yaml and is drawn by ``fade atlas``.
"""

from __future__ import annotations

from fade_core.advantages.formulas import (
    SUCCESS_THRESHOLD,
    Tensor,
    asym_grpo_advantage,
    bbg_advantage,
    bbg_keep_groups,
    bbg_utility,
    codapo_advantage,
    codapo_weight,
    dapo_overlong_penalty,
    dr_grpo_advantage,
    fade_alpha,
    fade_delta,
    group_mean,
    group_std,
    grpo_advantage,
    maxpo_advantage,
    nsr_advantage,
    passk_advantage,
    pkpo_advantage,
    power_advantage,
    power_asym_advantage,
    psr_advantage,
    reinforce_advantage,
    rloo_advantage,
    successes,
    w_reinforce_advantage,
    zero_variance_groups,
)
from fade_core.advantages.methods import (
    CONTEXT_KEYS,
    Advantage,
    CodapoAdvantage,
    DapoAdvantage,
    DrGrpoAdvantage,
    FadeAdvantage,
    Method,
    Param,
    build,
    describe,
    method,
    names,
)

__all__ = [
    "CONTEXT_KEYS", "SUCCESS_THRESHOLD", "Advantage", "CodapoAdvantage", "DapoAdvantage", "DrGrpoAdvantage",
    "FadeAdvantage", "Method", "Param", "Tensor", "asym_grpo_advantage", "bbg_advantage", "bbg_keep_groups",
    "bbg_utility", "build", "codapo_advantage", "codapo_weight", "dapo_overlong_penalty", "describe",
    "dr_grpo_advantage", "fade_alpha", "fade_delta", "group_mean", "group_std", "grpo_advantage",
    "maxpo_advantage", "method", "names", "nsr_advantage", "passk_advantage", "pkpo_advantage",
    "power_advantage", "power_asym_advantage", "psr_advantage", "reinforce_advantage", "rloo_advantage",
    "successes", "w_reinforce_advantage", "zero_variance_groups",
]
