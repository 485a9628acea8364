"""The FADE paper's claims, each checked on fade's own runs (the pure part of ``fade study``).

Every claim compares arms of the study (fade_core.study.study_arms): the difference of their means with a
95 % bootstrap confidence interval and a two-sided p-value from the same replicates
(:func:`fade_core.stats.compare_claim`: seeds resampled per arm with Welch's small-sample law). A claim on
pass@k pairs per-problem scores by problem (the aggregated ``pass_at_k_problem`` table); a value measured
once per run (entropy slope, rank-1 fraction, peak step, share of prompts with signal, a run's drift
correlation), or pass@k without that table, is resampled over seeds only. The p-values of all the claims
that produced one are corrected together with Holm's step-down method (:func:`fade_core.stats.holm`):

    agrees        Holm-adjusted p <= 0.05 and the difference has the paper's sign
    disagrees     Holm-adjusted p <= 0.05 and the opposite sign
    inconclusive  otherwise: "no difference detected at family-wise 5%" (not evidence of none), an arm
                  with fewer than 2 seeds, a missing metric or arm, or a FADE claim whose schedule did not
                  engage; the reason says which

A claim computed alone (``claim_rank1_funnel(...)``) is a family of one; :func:`compute_claims` adjusts.
A tested claim's ``values`` hold ``diff``, ``ci``, ``p``, ``p_holm`` and ``family`` (the family's size).

Two rows check the study itself: verdict ``passes`` or ``FAILS`` (``inconclusive`` without their data),
counted apart from the claims and outside Holm's family.

- ``aa_control`` (A/A): rloo against asym_grpo(delta = 1) (arm asym_d1), final pass@1. RLOO's advantage
  is G/(G-1) times asym_grpo(delta = 1)'s, a constant scale that AdamW cancels (while the gradient clip
  does not bind and no KL or entropy term sits beside it in the loss): the same update, so the answer
  must be no difference. It passes when none is detected at an unadjusted 5 %; otherwise it FAILS (the
  machinery or the setup finds differences that are not there). Outside Holm's family because its null
  is known to hold, so it is no claim under test (inside, it would loosen its own bar and tighten the
  claims'); unadjusted it is the stricter check. It fails by chance in ~5 % of sound studies.
- ``fade_schedule_engaged``: in every run of arm ``fade`` alpha covers >= :data:`ALPHA_MIN_COVERAGE` of
  [1, alpha_max] and sits at one bound in <= :data:`ALPHA_MAX_SHARE_AT_BOUND` of the steps, and delta
  falls to <= :data:`DELTA_LEFT_ONE`. Unless it passes, every other claim with an id ``fade...`` is
  inconclusive, "not tested: FADE's schedule did not engage (...)", and leaves Holm's family.

The entropy-drift claim tests the mean per-run Pearson r of the first-order prediction
``dH ~ -eta * Cov(log pi, A)`` (Cui et al. 2025; :func:`fade_core.decomposition.entropy_drift`, the spec's
corrected form) with the measured ``H[t+1] - H[t]`` against :data:`MIN_PREDICTIVE_R`; without the
``cov_adv_logprob`` column it is not tested. Its pooled slope is reported, not judged (a step is several
Adam updates of a token-mean loss, so ``lr`` is not eta).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fade_core import stats
from fade_core.config import Arm
from fade_core.stats import ALPHA, ci_text, fmt_p, judge, seed_stats
from fade_core.stats import compare_claim as compare
from fade_core.stats import fmt_seeds as _fmt

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
AA_ID, SCHEDULE_ID = "aa_control", "fade_schedule_engaged"
CHECK_IDS = (AA_ID, SCHEDULE_ID)

MIN_PREDICTIVE_R = 0.3
"""The drift prediction "predicts" the measured entropy change when the mean per-run Pearson r is
significantly above this; significantly below it, it does not."""

FADE_ALPHA_LOW, FADE_ALPHA_MAX = 1.0, 3.0
"""FADE's alpha lies in [1, alpha_max] (fade's default alpha_max; an arm's own replaces it)."""
ALPHA_MIN_COVERAGE = 0.5
"""The schedule engaged only if alpha's observed range (max - min) covers at least this share of
[1, alpha_max] in every FADE run ..."""
ALPHA_MAX_SHARE_AT_BOUND = 0.9
"""... alpha sits at one bound (1 or alpha_max, within :data:`AT_BOUND_TOL`) in at most this share of the
run's logged steps (the issue's runs sat at 3 from step ~25 on) ..."""
DELTA_LEFT_ONE = 0.8
"""... and delta's lowest value is at most this (it leaves 1, toward delta_min = 0.3; the issue's runs
stayed >= 0.97)."""
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


# ------------------------------------------------------------------------------ difficulty axis
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
    # every trained run at the same step: the last step that every trained run has reached (each run's latest
    # step <= it), so a run still in progress is not compared at step 100 with another at step 300. The base
    # model (evaluated at step 0 only) keeps its step-0 rows and does not pull the common step down to 0.
    last = pk.groupby("run_id")["step"].max()
    trained = last[last > 0]
    common = trained.min() if not trained.empty else 0
    upto = pk[(pk["step"] <= common) | ~pk["run_id"].isin(trained.index)]
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


def claims_difficulty(train: pd.DataFrame, tables: Mapping[str, pd.DataFrame], benchmark: str | None) -> list[Claim]:
    """Power alpha in {1, 2, 3}: pass@1 and pass@k of alpha = 2 and alpha = 3 against alpha = 1 (per problem,
    paired), and prompts with signal per batch (alpha = 3 against 1, per run)."""
    axis, source = "difficulty", "paper (Power weights the hard prompts: mass peak at p = 1/(1+alpha))"
    lo = DIFFICULTY_AXIS[1.0]
    out = []
    p1, _ = final_pass_at_k(tables, benchmark, 1)
    pk, k = final_pass_at_k(tables, benchmark, None)
    k_name = f"pass@{k}" if k else "pass@k"
    specs = []
    for alpha in (2.0, 3.0):
        hi, a = DIFFICULTY_AXIS[alpha], f"a{alpha:g}"
        specs += [
            (f"difficulty_pass1_{a}", hi, f"alpha = {alpha:g} (weight on hard prompts) raises pass@1 against alpha = 1.",
             p1, 1, "pass@1"),
            (f"difficulty_passk_{a}", hi, f"alpha = {alpha:g} raises {k_name} (k > 1) against alpha = 1.",
             pk if (k or 0) > 1 else pd.DataFrame(), k, k_name),
        ]
    for cid, hi, statement, df, kk, name in specs:
        if df.empty:
            out.append(_missing(cid, axis, statement, source, f"no final {name} in the aggregated tables"))
            continue
        absent = _has_arms(df, [lo, hi])
        if absent:
            out.append(_missing(cid, axis, statement, source, f"no {name} of arm(s) {', '.join(absent)}"))
            continue
        vals = {label: _values(df, label, "pass_at_k") for label in DIFFICULTY_AXIS.values()}
        x = arm_scores(tables, df, benchmark, kk, [hi, lo])
        _c, verdict, reason, test = compare(x[hi], x[lo], +1, f"{name}({hi}) - {name}({lo})", (hi, lo))
        parts = [f"alpha={a:g} ({label}): {_fmt(*seed_stats(vals[label]))}" for a, label in DIFFICULTY_AXIS.items()]
        out.append(_tested(cid, axis, statement, source, f"final {name}: " + "; ".join(parts), verdict, reason,
                           test, values=vals, k=kk))
    cid, source, hi = "difficulty_signal", "study hypothesis (the framework predicts no direction here)", DIFFICULTY_AXIS[3.0]
    statement = ("Higher alpha keeps more prompts with signal per batch (1 - share of zero-variance groups) "
                 "than alpha = 1.")
    col = logged(train, ZERO_VAR) if not train.empty else None
    if col is None:
        out.append(_missing(cid, axis, statement, source, "no zero_var_frac in the training records"))
        return out
    absent = _has_arms(train, [lo, hi])
    if absent:
        out.append(_missing(cid, axis, statement, source, f"no training records of arm(s) {', '.join(absent)}"))
        return out
    sig = {label: per_run(train, label, lambda r: mean_value(r, col, lambda v: 1.0 - v))
           for label in DIFFICULTY_AXIS.values()}
    _c, verdict, reason, test = compare(sig[hi], sig[lo], +1, f"signal({hi}) - signal({lo})", (hi, lo))
    parts = [f"alpha={a:g}: {_fmt(*seed_stats(sig[label]))}" for a, label in DIFFICULTY_AXIS.items()]
    out.append(_tested(cid, axis, statement, source, "mean share of prompts with signal per step: " + "; ".join(parts),
                       verdict, reason, test, values=sig))
    return out


# ------------------------------------------------------------------------------------ FADE
def best_static(peak: pd.DataFrame, fade_labels: Iterable[str]) -> str | None:
    """The non-FADE trained arm with the highest mean peak pass@1 (None without one)."""
    static = peak[~peak["method"].isin(set(fade_labels) | {"base", "sft", "warmstart"})]
    return None if static.empty else str(static.groupby("method")["peak_pass_at_1"].mean().idxmax())


def claims_fade(tables: Mapping[str, pd.DataFrame], benchmark: str | None,
                arms: Mapping[str, Arm] | None = None) -> list[Claim]:
    """FADE against the best static baseline (steps to peak pass@1, the pass@1 / pass@k frontier) and
    FADE against its ablations (peak pass@1). Not gated here by the schedule check (:func:`compute_claims`)."""
    axis = "fade"
    fade_labels = [x for x, a in (arms or {}).items() if a.method == "fade"] or list(FADE_ARMS)
    peak = tables.get("peak", pd.DataFrame())
    if not peak.empty and benchmark is not None:
        peak = peak[peak["benchmark"] == benchmark]
    out: list[Claim] = []
    s_peak = ("FADE reaches its peak pass@1 earlier than the best static baseline (paper: ~20k steps earlier at 7B, "
              "~2k at 32B).")
    s_front = "FADE improves pass@1 and pass@k together against the best static baseline (the frontier moves out)."
    base = best_static(peak, fade_labels) if not peak.empty and "fade" in set(peak["method"]) else None
    if base is None:
        why = ("no peak pass@1 table" if peak.empty else "no evaluated FADE run" if "fade" not in set(peak["method"])
               else "no evaluated static baseline")
        out += [_missing("fade_peak_step", axis, s_peak, "paper", why), _missing("fade_frontier", axis, s_front, "paper", why)]
    else:
        f_steps, b_steps = _values(peak, "fade", "peak_step"), _values(peak, base, "peak_step")
        _c, verdict, reason, test = compare(b_steps, f_steps, +1, f"peak step({base}) - peak step(fade)", (base, "fade"))
        f_top, b_top = _values(peak, "fade", "peak_pass_at_1"), _values(peak, base, "peak_pass_at_1")
        _ct, _v, _r, top = compare(f_top, b_top, +1, "peak pass@1 diff", ("fade", base))
        if test and top and top["ci"][1] < 0:
            test["veto"] = (f"fade's peak pass@1 is lower ({ci_text(top['diff'], top['ci'])}): an earlier, lower "
                            "peak is not the paper's claim")
        unpeaked = [int(s) for s, f in zip(_values(peak, base, "peak_step"), _values(peak, base, "final_step"),
                                           strict=True) if s == f] if "final_step" in peak.columns else []
        if unpeaked and test:
            test["note"] = (f"; {base} peaked at its last evaluated step in {len(unpeaked)} seed(s), so its peak step "
                            "is a lower bound and the lead may be larger")
        if test:
            verdict, reason = judge(test)
        meas = (f"peak step: fade {_fmt(*seed_stats(f_steps))}, best static {base} {_fmt(*seed_stats(b_steps))}; "
                f"peak pass@1 fade {_fmt(*seed_stats(f_top))}, {base} {_fmt(*seed_stats(b_top))}"
                + (f"; peak pass@1 difference {ci_text(top['diff'], top['ci'])}" if top else ""))
        out.append(_tested("fade_peak_step", axis, s_peak, "paper", meas, verdict, reason, test, baseline=base,
                           fade=f_steps, baseline_steps=b_steps, steps_earlier=test.get("diff", math.nan),
                           peak_pass1_diff=top.get("diff", math.nan)))
        out.append(_frontier_claim(tables, benchmark, base, s_front))
    for label, what in (("fade_fixed_alpha", "difficulty schedule (alpha)"),
                        ("fade_fixed_delta", "entropy schedule (delta)")):
        cid = f"fade_vs_{label.removeprefix('fade_')}"
        statement = f"FADE's {what} helps: FADE's peak pass@1 beats the ablation {label}."
        if peak.empty or not {"fade", label} <= set(peak["method"]):
            out.append(_missing(cid, axis, statement, "paper (ablation)", f"no evaluated runs of fade and {label}"))
            continue
        f, a = _values(peak, "fade", "peak_pass_at_1"), _values(peak, label, "peak_pass_at_1")
        _c, verdict, reason, test = compare(f, a, +1, f"peak pass@1(fade) - peak pass@1({label})", ("fade", label))
        meas = f"peak pass@1: fade {_fmt(*seed_stats(f))}, {label} {_fmt(*seed_stats(a))}"
        out.append(_tested(cid, axis, statement, "paper (ablation)", meas, verdict, reason, test, fade=f, **{label: a}))
    return out


def _frontier_claim(tables: Mapping[str, pd.DataFrame], benchmark: str | None, base: str, statement: str) -> Claim:
    """Both pass@1 and pass@k better: an intersection-union test, p = the larger of the two p-values (both
    must be significant). Either worse: p = 2 x the smaller p of the worse ones (Bonferroni over the two)."""
    cid, axis = "fade_frontier", "fade"
    p1, _ = final_pass_at_k(tables, benchmark, 1)
    pk, k = final_pass_at_k(tables, benchmark, None)
    if p1.empty or pk.empty or not k or k <= 1:
        return _missing(cid, axis, statement, "paper", "no final pass@1 and pass@k (k > 1) in the aggregated tables")
    parts, tests, names = [], {}, {"pass1": "pass@1", "passk": f"pass@{k}"}
    for short, df, kk in (("pass1", p1, 1), ("passk", pk, k)):
        x = arm_scores(tables, df, benchmark, kk, ["fade", base])
        name = names[short]
        _c, _v, r, tests[short] = compare(x["fade"], x[base], +1, f"{name}(fade) - {name}({base})", ("fade", base))
        parts.append(tests[short]["evidence"] if tests[short] else f"{name}: {r}")
    values = {"baseline": base, "k": k, **{f"{n}_{key}": t.get(key) for n, t in tests.items() for key in ("diff", "ci", "p")}}
    meas = f"final fade - {base}: " + "; ".join(f"{names[n]} {ci_text(t['diff'], t['ci'])}" for n, t in tests.items() if t)
    meas += _pareto_note(tables, benchmark, k)
    if not all(tests.values()):
        return Claim(cid, axis, statement, "paper", meas, INCONCLUSIVE, "; ".join(parts), values)
    worse = [t["p"] for t in tests.values() if t["sign"] < 0]
    if worse:
        sign, p, rule = -1, min(1.0, 2 * min(worse)), "one is worse: 2 x its p (Bonferroni over the two)"
    else:
        better = all(t["sign"] > 0 for t in tests.values())
        sign, p = (1 if better else 0), max(t["p"] for t in tests.values()) if better else 1.0
        rule = "both better: the larger p (intersection-union test)"
    test = {"sign": sign, "p": p, "p_holm": p, "family": 1, "expect": +1,
            "evidence": "; ".join(parts) + f"; together p {fmt_p(p)} ({rule})"}
    verdict, reason = judge(test)
    return Claim(cid, axis, statement, "paper", meas, verdict, reason, {**values, **test})


def _pareto_note(tables: Mapping[str, pd.DataFrame], benchmark: str | None, k: int) -> str:
    fr = tables.get("frontier", pd.DataFrame())
    if fr.empty or not {"method", "k", "is_final", "pareto"} <= set(fr.columns):
        return ""
    fr = fr[(fr["k"] == k) & fr["is_final"].astype(bool)]
    if benchmark is not None and "benchmark" in fr.columns:
        fr = fr[fr["benchmark"] == benchmark]
    on = sorted(fr[fr["pareto"].astype(bool)]["method"].unique())
    return f"; final points on the pass@1/pass@{k} frontier: {', '.join(on) or 'none'}"


# ------------------------------------------------------------------------------------ checks
def schedule_run(run: pd.DataFrame, alpha_max: float = FADE_ALPHA_MAX) -> dict[str, Any] | None:
    """One FADE run's schedule against the thresholds above (None without logged alpha and delta)."""
    a = pd.to_numeric(run[ALPHA_COL], errors="coerce").dropna().to_numpy(float) if ALPHA_COL in run else np.array([])
    d = pd.to_numeric(run[DELTA_COL], errors="coerce").dropna().to_numpy(float) if DELTA_COL in run else np.array([])
    if a.size == 0 or d.size == 0:
        return None
    cover = float((a.max() - a.min()) / (alpha_max - FADE_ALPHA_LOW))
    share, bound = max((float(np.mean(np.abs(a - b) <= AT_BOUND_TOL)), b) for b in (FADE_ALPHA_LOW, alpha_max))
    engaged = cover >= ALPHA_MIN_COVERAGE and share <= ALPHA_MAX_SHARE_AT_BOUND and d.min() <= DELTA_LEFT_ONE
    text = (f"alpha {a.min():.3g}-{a.max():.3g} covers {cover:.0%} of [1, {alpha_max:g}], at {bound:g} in "
            f"{share:.0%} of steps; delta's lowest {d.min():.3g}")
    return dict(coverage=cover, at_bound=share, bound=bound, delta_min=float(d.min()), engaged=engaged, text=text)


def claim_schedule_engaged(train: pd.DataFrame, arms: Mapping[str, Arm] | None = None) -> Claim:
    """Did FADE's alpha and delta move through their ranges in every run of arm ``fade``?"""
    statement = (f"FADE's schedule engages (study check, not a paper claim): in every run of arm fade alpha covers "
                 f">= {ALPHA_MIN_COVERAGE:.0%} of [1, alpha_max] and sits at a bound in <= {ALPHA_MAX_SHARE_AT_BOUND:.0%} "
                 f"of steps, and delta falls to <= {DELTA_LEFT_ONE:g}. Otherwise the FADE claims are not tested.")
    source = "study check (issue 15: FADE ran as Power(alpha=3) with delta ~1)"
    arm = (arms or {}).get("fade")
    alpha_max = float((arm.params if arm is not None else {}).get("alpha_max", FADE_ALPHA_MAX))
    rows = _arm_rows(train, "fade")
    runs = {rid: schedule_run(run, alpha_max) for rid, run in (rows.groupby("run_id") if len(rows) else [])}
    runs = {rid: r for rid, r in runs.items() if r is not None}
    if not runs:
        return _missing(SCHEDULE_ID, "fade", statement, source, "not checked: no training records of arm fade with "
                        f"{ALPHA_COL} and {DELTA_COL} logged", summary="no logged schedule")
    bad = [rid for rid, r in runs.items() if not r["engaged"]]
    rs = list(runs.values())
    summary = (f"alpha covered {min(r['coverage'] for r in rs):.0%} of [1, {alpha_max:g}] at worst and sat at a "
               f"bound in up to {max(r['at_bound'] for r in rs):.0%} of steps; delta's lowest value was "
               f"{max(r['delta_min'] for r in rs):.3g} in the worst run; {len(rs) - len(bad)} of {len(rs)} runs engaged")
    meas = "; ".join(f"{rid}: {r['text']}" for rid, r in runs.items())
    limits = (f"needs coverage >= {ALPHA_MIN_COVERAGE:.0%}, at a bound <= {ALPHA_MAX_SHARE_AT_BOUND:.0%}, "
              f"delta <= {DELTA_LEFT_ONE:g} in every run")
    verdict, reason = (FAILS, f"did not engage in {', '.join(bad)} ({limits})") if bad else (PASSES, f"engaged ({limits})")
    return Claim(SCHEDULE_ID, "fade", statement, source, meas, verdict, reason, dict(runs=runs, summary=summary))


def claim_aa_control(tables: Mapping[str, pd.DataFrame], benchmark: str | None) -> Claim:
    """The A/A control (module docstring): rloo against asym_d1 on final pass@1, expected no difference."""
    a, b = AA_ARMS
    statement = (f"A/A control: {a} and {b} are the same update under AdamW (RLOO = G/(G-1) x asym_grpo(delta=1)); "
                 "the test must detect no difference on final pass@1.")
    source = "study control (issue 15)"
    p1, _ = final_pass_at_k(tables, benchmark, 1)
    absent = _has_arms(p1, [a, b])
    x = arm_scores(tables, p1, benchmark, 1, [a, b]) if not absent else {}
    c, _v, why, test = compare(x[a], x[b], +1, f"pass@1({a}) - pass@1({b})", (a, b)) if x else (None, "", "", {})
    if c is None:
        why = f"no final pass@1 of arm(s) {', '.join(absent)}" if absent else why
        return _missing(AA_ID, "control", statement, source, f"not run: {why}")
    meas = ", ".join(f"{x_} {_fmt(*seed_stats(_values(p1, x_, 'pass_at_k')))}" for x_ in (a, b))
    test = {**test, "expect": 0, "p_holm": None, "family": None}
    verdict, reason = (FAILS, "FAILS: the verdict machinery found a difference between two arms that are the same "
                       "update") if c.p <= ALPHA else (PASSES, "passes: no difference detected at 5%")
    reason += f" ({test['evidence']}, unadjusted, outside Holm's family)"
    return _tested(AA_ID, "control", statement, source, "final pass@1: " + meas, verdict, reason, test)


# ------------------------------------------------------------------------------------ all claims
def gate_fade(claims: Sequence[Claim], schedule: Claim) -> None:
    """Unless the schedule check passed: every FADE claim (id ``fade...``, not the check) becomes inconclusive,
    "not tested", and leaves Holm's family (``values['tested'] = False``)."""
    if schedule.verdict == PASSES:
        return
    what = "did not engage" if schedule.verdict == FAILS else "could not be checked"
    for c in claims:
        if c.id.startswith("fade") and c.id not in CHECK_IDS:
            shown = c.values.get("evidence") or c.reason
            c.verdict, c.values["tested"], c.values["p_holm"] = INCONCLUSIVE, False, None
            c.reason = f"not tested: FADE's schedule {what} ({schedule.values.get('summary')}); measured anyway: {shown}"


def apply_holm(claims: Sequence[Claim]) -> list[Claim]:
    """Holm's correction over the claims with a p-value (not the checks, not the untested): each one's
    ``p_holm`` and ``family`` set and its verdict judged again. Returns the family."""
    family = [c for c in claims if c.id not in CHECK_IDS and c.values.get("tested", True)
              and c.values.get("expect") in (-1, 1) and isinstance(c.values.get("p"), float)
              and math.isfinite(c.values["p"])]
    for c, q in zip(family, stats.holm([c.values["p"] for c in family]), strict=True):
        c.values.update(p_holm=q, family=len(family))
        c.verdict, c.reason = judge(c.values)
    return family


def compute_claims(train: pd.DataFrame, tables: Mapping[str, pd.DataFrame], *, arms: Mapping[str, Arm] | None = None,
                   benchmark: str | None = None) -> list[Claim]:
    """Every claim and check of the study from the training records (as :func:`fade_core.runs.load_training_records`
    stacks them: one row per run and step, ``method`` = the arm label) and the aggregated tables
    (``pass_at_k``, ``pass_at_k_problem``, ``peak``, ``frontier`` of results.duckdb, see
    :func:`fade_core.study.load_tables`): FADE's claims gated by the schedule check, then Holm over the family."""
    train = train if train is not None else pd.DataFrame()
    schedule = claim_schedule_engaged(train, arms)
    fade = claims_fade(tables, benchmark, arms)
    gate_fade(fade, schedule)
    claims = [claim_entropy_collapse(train), claim_rank1_funnel(train), claim_entropy_drift(train),
              *claims_difficulty(train, tables, benchmark), schedule, *fade, claim_aa_control(tables, benchmark)]
    apply_holm(claims)
    return claims


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
