"""The sign axis: AsymGRPO delta in {0.5, 1, 2} (entropy collapse, rank-1 funnel, first-order entropy drift)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fade_core.claims.common import (
    COV,
    ENTROPY,
    INCONCLUSIVE,
    LR,
    M_F,
    M_S,
    MIN_PREDICTIVE_R,
    RANK1,
    SIGN_AXIS,
    Claim,
    _arm_rows,
    _has_arms,
    _missing,
    _tested,
    entropy_slope,
    last_value,
    logged,
    per_run,
)
from fade_core.stats import compare_claim as compare
from fade_core.stats import fmt_seeds as _fmt
from fade_core.stats import seed_stats


# ------------------------------------------------------------------------------------ sign axis
def claim_entropy_collapse(train: pd.DataFrame) -> Claim:
    """Success-biased (delta = 2) arms lose entropy faster than failure-biased (delta = 0.5) ones."""
    cid, axis, source = "sign_entropy", "sign", "paper"
    statement = "Success-biased weights (m_S > m_F) collapse entropy faster than failure-biased ones."
    succ, fail = SIGN_AXIS[2.0], SIGN_AXIS[0.5]
    col = logged(train, ENTROPY) if not train.empty else None
    if col is None:
        return _missing(cid, axis, statement, source, "no entropy column in the training records "
                        f"(no column {ENTROPY})")
    absent = _has_arms(train, [succ, fail])
    if absent:
        return _missing(cid, axis, statement, source, f"no training records of arm(s) {', '.join(absent)}")
    slopes = {label: per_run(train, label, lambda r: entropy_slope(r, col)) for label in SIGN_AXIS.values()}
    _c, verdict, reason, test = compare(slopes[succ], slopes[fail], expect=-1,
                                        what=f"slope({succ}) - slope({fail})", names=(succ, fail))
    if not np.isfinite(seed_stats(slopes[succ])[0]) or not np.isfinite(seed_stats(slopes[fail])[0]):
        reason += " (an entropy slope needs at least 3 logged steps of a run)"
    parts = [f"{label}: {_fmt(*seed_stats(slopes[label]))}" for label in SIGN_AXIS.values() if slopes[label]]
    measurement = "entropy slope (nats per 100 steps) " + "; ".join(parts)
    masses = _mass_summary(train, [succ, fail])
    if masses:
        measurement += f"; mean m_S/m_F: {masses}"
    return _tested(cid, axis, statement, source, measurement, verdict, reason, test, slopes=slopes, metric=col)


def _mass_summary(train: pd.DataFrame, labels: Sequence[str]) -> str:
    ms, mf = logged(train, M_S), logged(train, M_F)
    if ms is None or mf is None:
        return ""
    out = []
    for label in labels:
        rows = _arm_rows(train, label)
        s, f = pd.to_numeric(rows[ms], errors="coerce").mean(), pd.to_numeric(rows[mf], errors="coerce").mean()
        if np.isfinite(s) and np.isfinite(f) and f != 0:
            out.append(f"{label} {s / f:.3g}")
    return ", ".join(out)


def claim_rank1_funnel(train: pd.DataFrame) -> Claim:
    """Failure-biased (delta = 0.5) arms end with a higher rank-1 fraction of the head's update."""
    cid, axis, source = "sign_rank1", "sign", "paper"
    statement = ("Failure-biased weights (m_F > m_S) raise the rank-1 fraction of the output head's update "
                 "(paper, Qwen2.5-7B: 96% for AsymGRPO delta=0.5).")
    succ, fail = SIGN_AXIS[2.0], SIGN_AXIS[0.5]
    col = logged(train, RANK1) if not train.empty else None
    if col is None:
        return _missing(cid, axis, statement, source, "no rank-1 fraction in the training records (the trainer logs "
                        "rank1_frac every train.rank1_every steps: no run reached that step, or every update of "
                        "the head was zero)")
    absent = _has_arms(train, [succ, fail])
    if absent:
        return _missing(cid, axis, statement, source, f"no training records of arm(s) {', '.join(absent)}")
    finals = {label: per_run(train, label, lambda r: last_value(r, col)) for label in SIGN_AXIS.values()}
    _c, verdict, reason, test = compare(finals[fail], finals[succ], expect=+1,
                                        what=f"rank1({fail}) - rank1({succ})", names=(fail, succ))
    parts = [f"{label}: {_fmt(*seed_stats(finals[label]))}" for label in SIGN_AXIS.values() if finals[label]]
    measurement = "final rank-1 fraction of dW (head, since step 0) " + "; ".join(parts)
    return _tested(cid, axis, statement, source, measurement, verdict, reason, test, final_rank1=finals, metric=col)


def claim_entropy_drift(train: pd.DataFrame) -> Claim:
    """Does -eta Cov(log pi, A) predict H[t+1] - H[t]? Per-run Pearson r, its mean over runs tested
    against :data:`MIN_PREDICTIVE_R`."""
    from fade_core.decomposition import drift_pairs, pearson

    cid, axis, source = "sign_drift", "sign", "spec (Cui et al. 2025)"
    statement = ("The first-order entropy drift -eta Cov(log pi, A) (Cui et al. 2025) predicts the sign and size of "
                 "the measured per-step entropy change (sign-axis runs; judged on the mean per-run Pearson r "
                 f"against {MIN_PREDICTIVE_R}; sign agreement and slope are reported).")
    if train.empty:
        return _missing(cid, axis, statement, source, "no training records")
    cols = {"entropy": logged(train, ENTROPY), "lr": logged(train, LR), "cov": logged(train, COV)}
    need = [c for k, c in (("entropy", ENTROPY), ("lr", LR), ("cov", COV)) if cols[k] is None]
    if need:
        return _missing(cid, axis, statement, source,
                        f"the training records lack {', '.join(need)}: no drift computable, not tested",
                        covariance_logged=cols["cov"] is not None)
    key = "predicted"
    rs, signs, pooled = [], [], []
    # the sign-axis arms only: their one update per step uses every rollout of the step (codapo's second
    # update, dapo's refilled batch and masked groups would break the one-step prediction)
    sign_runs = train[train["method"].isin(list(SIGN_AXIS.values()))]
    for _, run in sign_runs.groupby("run_id", sort=True):
        pairs = drift_pairs(run, cols)
        if pairs.empty:
            continue
        pooled.append(pairs)
        r = pearson(pairs[key].to_numpy(), pairs["measured"].to_numpy())
        if np.isfinite(r):
            rs.append(r)
        nz = pairs[(pairs[key] != 0) & pairs[key].notna() & pairs["measured"].notna() & (pairs["measured"] != 0)]
        if len(nz):
            signs.append(float((np.sign(nz[key]) == np.sign(nz["measured"])).mean()))
    mean_r, sd_r, n_r = seed_stats(rs)
    slope = math.nan
    if pooled:
        allp = pd.concat(pooled)
        ok = allp[key].notna() & allp["measured"].notna()
        x, y = allp.loc[ok, key].to_numpy(float), allp.loc[ok, "measured"].to_numpy(float)
        if len(x) >= 3 and np.std(x) > 0:
            slope = float(np.polyfit(x, y, 1)[0])
    measurement = (f"per-run Pearson r {_fmt(mean_r, sd_r, n_r)}; sign agreement {_fmt(*seed_stats(signs))}; "
                   + (f"pooled slope measured/predicted {slope:.3g}" if np.isfinite(slope) else "pooled slope n/a"))
    values = {"r_per_run": rs, "mean_r": mean_r, "sd_r": sd_r, "sign_agreement": signs, "pooled_slope": slope,
              "covariance_logged": True}
    if n_r < 2:
        return Claim(cid, axis, statement, source, measurement, INCONCLUSIVE,
                     f"{n_r} run(s) with a defined correlation: no spread over runs, not tested", values)
    _c, verdict, reason, test = compare(rs, [MIN_PREDICTIVE_R] * n_r, +1, f"mean r - {MIN_PREDICTIVE_R}",
                                        ("r", "threshold"))
    return _tested(cid, axis, statement, source, measurement, verdict, reason, test, **values)

