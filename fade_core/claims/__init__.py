"""The FADE paper's claims, each checked on fade's own runs (the pure part of ``fade study``).

Every claim compares arms of the study (fade_core.study.study_arms): the difference of their means with a
95 % bootstrap confidence interval and a two-sided p-value from the same replicates
(:func:`fade_core.stats.compare_claim`: seeds resampled per arm with Welch's small-sample law). A claim on
pass@k pairs per-problem scores by problem (the aggregated ``pass_at_k_problem`` table); a value measured
once per run (entropy slope, rank-1 fraction, rollouts to a threshold, share of prompts with signal, a run's
drift correlation), or pass@k without that table, is resampled over seeds only. "Final" is each run's last
evaluated checkpoint (under a rollout budget runs end at different steps). The p-values of all the claims
that produced one are corrected together with Holm's step-down method (:func:`fade_core.stats.holm`):

    agrees        Holm-adjusted p <= 0.05 and the difference has the paper's sign
    disagrees     Holm-adjusted p <= 0.05 and the opposite sign
    inconclusive  otherwise: "no difference detected at family-wise 5%" (not evidence of none), an arm
                  with fewer than 2 seeds, a missing metric or arm, or a FADE claim whose schedule did not
                  engage; the reason says which

A claim computed alone (``claim_rank1_funnel(...)``) is a family of one; :func:`compute_claims` adjusts.
A tested claim's ``values`` hold ``diff``, ``ci``, ``p``, ``p_holm`` and ``family`` (the family's size).

The modules: ``sign`` (entropy collapse, rank-1 funnel, entropy drift), ``difficulty`` (Power alpha),
``fade`` (the frontier and the ablations, judged on final test pass@1 paired by problem) and ``threshold``
(FADE against the best static baseline in rollouts to 90% of the best arm's final validation pass@1,
from the periodic ``eval_pass1`` curves: no verdict rests on a 50-step peak), ``checks`` (below).

Three rows check the study itself: verdict ``passes`` or ``FAILS`` (``inconclusive`` without their data),
counted apart from the claims and outside Holm's family.

- ``testbed_headroom``: the base model beats the uniform sampler at pass@1 (bootstrap over problems, paired,
  95% CI above 0) and neither exceeds :data:`HEADROOM_MAX` at any evaluated k; otherwise every pass@k claim
  measures distance from a sampler that knows nothing, and a reader must be told.

- ``aa_control`` (A/A): rloo against asym_grpo(delta = 1) (arm asym_d1), final pass@1. RLOO's advantage
  is G/(G-1) times asym_grpo(delta = 1)'s, a constant scale that AdamW cancels (while the gradient clip
  does not bind and no KL or entropy term sits beside it in the loss): the same update, so the answer
  must be no difference. It passes when none is detected at an unadjusted 5 %; otherwise it FAILS (the
  machinery or the setup finds differences that are not there). Outside Holm's family because its null
  is known to hold, so it is no claim under test (inside, it would loosen its own bar and tighten the
  claims'); unadjusted it is the stricter check. It fails by chance in ~5 % of sound studies.
- ``fade_schedule_engaged``: in every run of arm ``fade`` alpha covers >= :data:`ALPHA_MIN_COVERAGE` of
  [1, alpha_max] and sits at one bound in <= :data:`ALPHA_MAX_SHARE_AT_BOUND` of the steps, and delta
  falls through >= :data:`DELTA_MIN_COVERAGE` of its reachable range [max(delta_min, 1 - H_target), 1] and to
  <= :data:`DELTA_MAX_LOWEST`. Unless it passes, every other claim with an id ``fade...`` is
  inconclusive, "not tested: FADE's schedule did not engage (...)", and leaves Holm's family.

The entropy-drift claim tests the mean per-run Pearson r of the first-order prediction
``dH ~ -eta * Cov(log pi, A)`` (Cui et al. 2025; :func:`fade_core.decomposition.entropy_drift`, the spec's
corrected form) with the measured ``H[t+1] - H[t]`` against :data:`MIN_PREDICTIVE_R`; without the
``cov_adv_logprob`` column it is not tested. Its pooled slope is reported, not judged (a step is several
Adam updates of a token-mean loss, so ``lr`` is not eta).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fade_core.claims.checks import (
    apply_holm,
    claim_aa_control,
    claim_headroom,
    claim_schedule_engaged,
    gate_fade,
    schedule_run,
)
from fade_core.claims.common import (
    AA_ARMS,
    AA_ID,
    ABLATION_FIXED_ALPHA,
    ABLATION_FIXED_DELTA,
    AGREES,
    ALPHA_COL,
    ALPHA_MAX_SHARE_AT_BOUND,
    ALPHA_MIN_COVERAGE,
    AT_BOUND_TOL,
    BASE,
    CHECK_IDS,
    COV,
    DELTA_COL,
    DELTA_MAX_LOWEST,
    DELTA_MIN_COVERAGE,
    DIFFICULTY_AXIS,
    DISAGREES,
    ENTROPY,
    FADE_ALPHA_LOW,
    FADE_ALPHA_MAX,
    FADE_ARMS,
    FAILS,
    HEADROOM_ID,
    HEADROOM_MAX,
    INCONCLUSIVE,
    LR,
    M_F,
    M_S,
    MIN_PREDICTIVE_R,
    PASSES,
    RANK1,
    RECORD_COLUMNS,
    SCHEDULE_ID,
    SIGN_AXIS,
    UNIFORM,
    ZERO_VAR,
    Claim,
    _jsonable,
    arm_scores,
    entropy_slope,
    final_pass_at_k,
    last_value,
    logged,
    mean_value,
    per_run,
)
from fade_core.claims.difficulty import claims_difficulty
from fade_core.claims.fade import best_static, claims_fade
from fade_core.claims.sign import claim_entropy_collapse, claim_entropy_drift, claim_rank1_funnel
from fade_core.claims.threshold import THRESHOLD_SHARE, best_static_arm, claim_time_to_threshold, time_to
from fade_core.config import Arm

__all__ = [
    "THRESHOLD_SHARE",
    "best_static_arm",
    "claim_time_to_threshold",
    "time_to",
    "claim_headroom",
    "BASE",
    "HEADROOM_ID",
    "HEADROOM_MAX",
    "UNIFORM",
    "SIGN_AXIS",
    "DIFFICULTY_AXIS",
    "AGREES",
    "DISAGREES",
    "INCONCLUSIVE",
    "PASSES",
    "FAILS",
    "FADE_ARMS",
    "ABLATION_FIXED_ALPHA",
    "ABLATION_FIXED_DELTA",
    "AA_ARMS",
    "AA_ID",
    "SCHEDULE_ID",
    "CHECK_IDS",
    "MIN_PREDICTIVE_R",
    "FADE_ALPHA_LOW",
    "FADE_ALPHA_MAX",
    "ALPHA_MIN_COVERAGE",
    "ALPHA_MAX_SHARE_AT_BOUND",
    "DELTA_MIN_COVERAGE",
    "DELTA_MAX_LOWEST",
    "AT_BOUND_TOL",
    "ENTROPY",
    "M_S",
    "M_F",
    "RANK1",
    "LR",
    "ZERO_VAR",
    "COV",
    "ALPHA_COL",
    "DELTA_COL",
    "RECORD_COLUMNS",
    "Claim",
    "logged",
    "per_run",
    "entropy_slope",
    "last_value",
    "mean_value",
    "final_pass_at_k",
    "arm_scores",
    "_jsonable",
    "claim_entropy_collapse",
    "claim_rank1_funnel",
    "claim_entropy_drift",
    "claims_difficulty",
    "best_static",
    "claims_fade",
    "schedule_run",
    "claim_schedule_engaged",
    "claim_aa_control",
    "gate_fade",
    "apply_holm",
    "compute_claims",
]

def compute_claims(train: pd.DataFrame, tables: Mapping[str, pd.DataFrame], *, arms: Mapping[str, Arm] | None = None,
                   benchmark: str | None = None) -> list[Claim]:
    """Every claim and check of the study from the training records (as :func:`fade_core.runs.load_training_records`
    stacks them: one row per run and step, ``method`` = the arm label) and the aggregated tables
    (``pass_at_k``, ``pass_at_k_problem``, ``peak``, ``frontier`` of results.duckdb, see
    :func:`fade_core.study.load_tables`): FADE's claims gated by the schedule check, then Holm over the family."""
    train = train if train is not None else pd.DataFrame()
    schedule = claim_schedule_engaged(train, arms)
    fade = claims_fade(tables, benchmark, arms, train)
    gate_fade(fade, schedule)
    claims = [claim_headroom(tables, benchmark), claim_entropy_collapse(train), claim_rank1_funnel(train), claim_entropy_drift(train),
              *claims_difficulty(train, tables, benchmark), schedule, *fade, claim_aa_control(tables, benchmark)]
    apply_holm(claims)
    return claims

