"""What every claim module shares: the Claim record, the verdict and arm constants, the training-record
columns, and the helpers that pick runs, arms and final pass@k out of the records and tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fade_core import stats
from fade_core.stats import ci_text

AGREES, DISAGREES, INCONCLUSIVE = stats.AGREES, stats.DISAGREES, stats.INCONCLUSIVE
PASSES, FAILS = "passes", "FAILS"
"""The verdicts of the two checks (aa_control, fade_schedule_engaged)."""

SIGN_AXIS: dict[float, str] = {0.5: "asym_d0_5", 1.0: "asym_d1", 2.0: "asym_d2"}
"""delta -> arm label. delta = 0.5 is failure-biased (m_F = 2 m_S), delta = 2 success-biased."""
DIFFICULTY_AXIS: dict[float, str] = {1.0: "asym_d1", 2.0: "power_a2", 3.0: "power_a3"}
"""alpha -> arm label (alpha = 1 is asym_grpo(delta=1): the same advantage as power(alpha=1))."""
FADE_ARMS = ("fade", "fade_fixed_alpha", "fade_fixed_delta")
ABLATION_FIXED_ALPHA = 2.0
ABLATION_FIXED_DELTA = 1.0
AA_ARMS = ("rloo", "asym_d1")
"""The A/A control's arms: the same update under AdamW (RLOO = G/(G-1) x asym_grpo(delta=1))."""
AA_ID, SCHEDULE_ID, HEADROOM_ID = "aa_control", "fade_schedule_engaged", "testbed_headroom"
CHECK_IDS = (HEADROOM_ID, AA_ID, SCHEDULE_ID)
HEADROOM_MAX = 0.95
"""The testbed has headroom at a k when the base model's and the uniform sampler's mean pass@k are at most
this (issue 15: the old task's base and uniform pass@100 were ~0.97, leaving nothing to measure)."""
BASE, UNIFORM = "base", "uniform"
"""Method labels of the untrained base model and of the uniform-sampler rows (fade_core.aggregate)."""

MIN_PREDICTIVE_R = 0.3
"""The drift prediction "predicts" the measured entropy change when the mean per-run Pearson r is
significantly above this; significantly below it, it does not."""

FADE_ALPHA_LOW, FADE_ALPHA_MAX = 1.0, 3.0
"""FADE's alpha lies in [1, alpha_max] (fade's default alpha_max; an arm's own replaces it)."""
FADE_DELTA_MIN = 0.3
"""FADE's default lower clip of delta. Above it, delta = 1 + H_hat - H_target reaches 1 - H_target at zero
entropy and no lower: with the auto target (half the first entropy) a policy whose token entropy starts at
H0 nats has delta >= 1 - H0/2. That floor, max(delta_min, 1 - H_target), is the bottom of delta's reachable
range [floor, 1] (the check's measurement prints it)."""
ALPHA_MIN_COVERAGE = 0.5
"""The schedule engaged only if alpha's observed range (max - min) covers at least this share of
[1, alpha_max] in every FADE run ..."""
ALPHA_MAX_SHARE_AT_BOUND = 0.9
"""... alpha sits at one bound (1 or alpha_max, within :data:`AT_BOUND_TOL`) in at most this share of the
run's logged steps (the issue's runs sat at 3 from step ~25 on) ..."""
DELTA_MIN_COVERAGE = 0.5
"""... delta falls through at least this share of its reachable range [floor, 1] (floor = max(delta_min,
1 - H_target), :data:`FADE_DELTA_MIN`): the same share alpha must cover. With the auto target that is H_hat
falling to half of H_target, a quarter of the first entropy ...

Changed on 2026-12-05, before the pool study ran: the check asked delta <= 0.8, a fixed value that ignored the
floor (0.72 at the study's H_target of 0.28 nats, so 0.8 was 71% of the reachable range and an entropy of 0.08
nats; with H_target 0.25 it was 79%, about the lowest entropy any probe run reached). Single-seed probes had
shown delta at 0.86-0.87 after 300 steps at lr 1e-4 (pool of 25 or 50 problems). The earlier studies' runs
fail both rules (delta >= 0.97)."""
DELTA_MAX_LOWEST = 0.9
"""... and, whatever the floor, delta's lowest value is at most this: it moved at least 0.1 below 1 (a target
so low that delta's whole range is a few hundredths cannot count as the schedule moving)."""
AT_BOUND_TOL = 1e-6

# the training-record columns the claims read, by the names fade_core.train.record writes
ENTROPY, M_S, M_F, RANK1, LR, ZERO_VAR, COV, ALPHA_COL, DELTA_COL = (
    "entropy", "m_s", "m_f", "rank1_frac", "lr", "zero_var_frac", "cov_adv_logprob", "alpha", "delta")
RECORD_COLUMNS = (ENTROPY, M_S, M_F, RANK1, LR, ZERO_VAR, COV, ALPHA_COL, DELTA_COL)


# ========================================================================================= claims
@dataclass
class Claim:
    """One checked claim: the statement, what fade measured (with the CI of the difference), the verdict."""

    id: str
    axis: str
    statement: str
    source: str
    measurement: str
    verdict: str
    reason: str
    values: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


def logged(df: pd.DataFrame, column: str) -> str | None:
    """``column`` when ``df`` has it with at least one finite value (the runs logged it), else None."""
    return column if column in df.columns and pd.to_numeric(df[column], errors="coerce").notna().any() else None


def _arm_rows(train: pd.DataFrame, label: str) -> pd.DataFrame:
    return train.iloc[0:0] if train.empty or "method" not in train.columns else train[train["method"] == label]


def per_run(train: pd.DataFrame, label: str, fn: Any) -> list[float]:
    """fn(run's rows sorted by step) for every run of arm ``label`` (one value per seed)."""
    return [fn(run.sort_values("step")) for _, run in _arm_rows(train, label).groupby("run_id", sort=True)]


def entropy_slope(run: pd.DataFrame, col: str, per: float = 100.0) -> float:
    """Least-squares slope of entropy against step, per ``per`` steps (nan with fewer than 3 points)."""
    d = run[["step", col]].apply(pd.to_numeric, errors="coerce").dropna()
    if len(d) < 3 or d["step"].nunique() < 2:
        return math.nan
    return float(np.polyfit(d["step"].to_numpy(float), d[col].to_numpy(float), 1)[0] * per)


def last_value(run: pd.DataFrame, col: str) -> float:
    v = pd.to_numeric(run[col], errors="coerce").dropna()
    return float(v.iloc[-1]) if len(v) else math.nan


def mean_value(run: pd.DataFrame, col: str, transform: Any = None) -> float:
    v = pd.to_numeric(run[col], errors="coerce").dropna()
    v = transform(v) if transform is not None else v
    return float(v.mean()) if len(v) else math.nan


def _missing(cid: str, axis: str, statement: str, source: str, reason: str, **values: Any) -> Claim:
    return Claim(cid, axis, statement, source, "n/a", INCONCLUSIVE, reason, dict(values))


def _has_arms(train_or_table: pd.DataFrame, labels: Sequence[str], col: str = "method") -> list[str]:
    present = set(train_or_table[col]) if (not train_or_table.empty and col in train_or_table.columns) else set()
    return [x for x in labels if x not in present]


def _tested(cid: str, axis: str, statement: str, source: str, measurement: str, verdict: str, reason: str,
            test: Mapping[str, Any], **values: Any) -> Claim:
    note = f"; {test['what']} {ci_text(test['diff'], test['ci'])}" if test else ""
    return Claim(cid, axis, statement, source, measurement + note, verdict, reason, {**values, **test})



# ------------------------------------------------------------------------------ final pass@k
def final_pass_at_k(tables: Mapping[str, pd.DataFrame], benchmark: str | None, k: int | None = None
                    ) -> tuple[pd.DataFrame, int | None]:
    """Per run: pass@k at the run's last evaluated step ('all' bucket); k None -> the largest k evaluated
    for every run. Returns (frame with run_id, method, seed, step, pass_at_k; the k used)."""
    pk = tables.get("pass_at_k", pd.DataFrame())
    if pk.empty:
        return pk, None
    pk = pk[pk["bucket"] == "all"]
    if benchmark is not None:
        pk = pk[pk["benchmark"] == benchmark]
    if pk.empty:
        return pk, None
    # each run at its own last evaluated step: under a rollout budget (train.max_rollouts) runs end at
    # different steps by design (dapo, codapo sample more per step), so a common step would compare them
    # before their budget was spent. The claims are computed after every run finished (fade study run); a
    # study stopped half-way is not to be judged (its partial runs would be read at their last checkpoint).
    upto = pk
    fin = upto[upto["step"] == upto.groupby("run_id")["step"].transform("max")]
    if k is None:
        k = int(fin.groupby("run_id")["k"].max().min())
    return fin[fin["k"] == k][["run_id", "method", "seed", "step", "pass_at_k"]], k


def _values(df: pd.DataFrame, label: str, col: str) -> list[float]:
    return [] if df.empty else pd.to_numeric(df[df["method"] == label][col], errors="coerce").tolist()


def arm_scores(tables: Mapping[str, pd.DataFrame], fin: pd.DataFrame, benchmark: str | None, k: int | None,
               labels: Sequence[str]) -> dict[str, Any]:
    """Per arm label: its runs' per-problem pass@k ([seeds, problems]) at the steps of ``fin`` (from
    :func:`final_pass_at_k`), on the problems that every run of every arm in ``labels`` has, in one order
    (paired by problem); without the ``pass_at_k_problem`` table (or a shared problem), the per-run values."""
    per_run_vals: dict[str, Any] = {x: _values(fin, x, "pass_at_k") for x in labels}
    pp = tables.get("pass_at_k_problem", pd.DataFrame())
    runs = fin[fin["method"].isin(list(labels))] if not fin.empty else fin
    if pp.empty or runs.empty or k is None:
        return per_run_vals
    sel = pp[(pp["k"] == k) & pp["run_id"].isin(runs["run_id"])]
    if benchmark is not None:
        sel = sel[sel["benchmark"] == benchmark]
    sel = sel.merge(runs[["run_id", "step"]], on=["run_id", "step"])
    key = sel["benchmark"].astype(str) + "/" + sel["problem_id"].astype(str)
    wide = sel.assign(key=key).pivot_table(index="run_id", columns="key", values="pass_at_k", aggfunc="first")
    wide = wide.reindex(pd.Index(runs["run_id"].unique())).dropna(axis=1)
    if wide.shape[1] == 0:
        return per_run_vals
    return {x: wide.loc[runs[runs["method"] == x]["run_id"].unique()].to_numpy(np.float64) for x in labels}



def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
