"""The FADE paper's claims, each checked on fade's own runs seed by seed (the pure part of ``fade study``).

Every claim compares arms of the study (fade_core.study.study_arms) seed by seed. Its verdict is

    agrees        the difference has the paper's sign and exceeds the seed-to-seed spread
    disagrees     the difference has the opposite sign and exceeds the spread
    inconclusive  it does not exceed the spread, an arm has fewer than 2 seeds (no spread), or a metric or
                  arm is missing (the reason says which)

with spread = sqrt(sd_a^2 + sd_b^2) of the per-seed values (sample std), the convention of the
``comparisons`` table of :mod:`fade_core.aggregate`. Inputs: the training records (one row per run and
step, fade_core.runs.load_training_records, ``method`` = the arm label) and the aggregated tables.

The entropy-drift claim checks the first-order prediction of the entropy change of one step,
``dH ~ -eta * Cov(log pi, A)`` (Cui et al. 2025; :func:`fade_core.decomposition.entropy_drift`; the spec's
corrected form, with no ``(m_S - m_F) H`` term), against the measured change ``H[t+1] - H[t]`` of the logged
mean token entropy, run by run (Pearson r, then mean and spread over runs). It needs the
``cov_adv_logprob`` column of the training record; without it the claim is not tested (inconclusive,
saying so). Only the correlation (and the sign agreement) is judged; the pooled slope of the measured on
the predicted change is reported, not judged, since the trainer's step is several Adam updates over
minibatches of a token-mean loss, so the logged ``lr`` is not the effective step size eta.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fade_core.config import Arm

AGREES, DISAGREES, INCONCLUSIVE = "agrees", "disagrees", "inconclusive"

SIGN_AXIS: dict[float, str] = {0.5: "asym_d0_5", 1.0: "asym_d1", 2.0: "asym_d2"}
"""delta -> arm label. delta = 0.5 is failure-biased (m_F = 2 m_S), delta = 2 success-biased."""
DIFFICULTY_AXIS: dict[float, str] = {1.0: "asym_d1", 2.0: "power_a2", 3.0: "power_a3"}
"""alpha -> arm label (alpha = 1 is asym_grpo(delta=1): the same advantage as power(alpha=1))."""
FADE_ARMS = ("fade", "fade_fixed_alpha", "fade_fixed_delta")
ABLATION_FIXED_ALPHA = 2.0
ABLATION_FIXED_DELTA = 1.0

MIN_PREDICTIVE_R = 0.3
"""The drift prediction "predicts" the measured entropy change when the mean per-run Pearson r exceeds
this (and its spread over runs); clearly below it, it does not."""

# the training-record columns the claims read, by the names fade_core.train.record writes
ENTROPY, M_S, M_F, RANK1, LR, ZERO_VAR, COV = (
    "entropy", "m_s", "m_f", "rank1_frac", "lr", "zero_var_frac", "cov_adv_logprob")
RECORD_COLUMNS = (ENTROPY, M_S, M_F, RANK1, LR, ZERO_VAR, COV)


# ========================================================================================= claims
@dataclass
class Claim:
    """One checked claim: the statement, what fade measured (with the spread over seeds), the verdict."""

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


@dataclass(frozen=True)
class Comparison:
    """arm a against arm b on one per-seed metric: diff = mean_a - mean_b, spread = sqrt(sd_a^2 + sd_b^2)."""

    mean_a: float
    sd_a: float
    n_a: int
    mean_b: float
    sd_b: float
    n_b: int

    @property
    def diff(self) -> float:
        return self.mean_a - self.mean_b

    @property
    def spread(self) -> float:
        return math.sqrt(self.sd_a ** 2 + self.sd_b ** 2)


def seed_stats(values: Sequence[float]) -> tuple[float, float, int]:
    """(mean, sample std, count) of the finite values; std is nan below 2 values, mean nan for none."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    if v.size == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else math.nan, int(v.size)


def compare(a: Sequence[float], b: Sequence[float], expect: int, what: str = "the difference",
            names: tuple[str, str] = ("a", "b")) -> tuple[Comparison, str, str]:
    """(comparison, verdict, reason) for "a - b has the sign of ``expect``" (+1 or -1) over per-seed values
    (non-finite values are left out); ``names`` name a and b in the reason."""
    c = Comparison(*seed_stats(a), *seed_stats(b))
    if c.n_a == 0 or c.n_b == 0:
        empty = [n for n, k in zip(names, (c.n_a, c.n_b), strict=True) if k == 0]
        return c, INCONCLUSIVE, f"no finite value for {' and '.join(empty)}"
    if c.n_a < 2 or c.n_b < 2:
        return c, INCONCLUSIVE, (f"fewer than 2 seeds ({names[0]}: {c.n_a}, {names[1]}: {c.n_b}): "
                                 "no seed-to-seed spread")
    if abs(c.diff) <= c.spread:
        return c, INCONCLUSIVE, f"{what} {c.diff:+.4g} does not exceed the seed-to-seed spread {c.spread:.4g}"
    verdict = AGREES if c.diff * expect > 0 else DISAGREES
    return c, verdict, f"{what} {c.diff:+.4g} exceeds the seed-to-seed spread {c.spread:.4g}"


def _fmt(mean: float, sd: float, n: int, digits: int = 3) -> str:
    if n == 0 or not np.isfinite(mean):
        return "n/a"
    sd_s = f" ± {sd:.{digits}g}" if np.isfinite(sd) else ""
    return f"{mean:.{digits}g}{sd_s} (n={n})"


def logged(df: pd.DataFrame, column: str) -> str | None:
    """``column`` when ``df`` has it with at least one finite value (the runs logged it), else None."""
    if column in df.columns and pd.to_numeric(df[column], errors="coerce").notna().any():
        return column
    return None


def _arm_rows(train: pd.DataFrame, label: str) -> pd.DataFrame:
    if train.empty or "method" not in train.columns:
        return train.iloc[0:0]
    return train[train["method"] == label]


def per_run(train: pd.DataFrame, label: str, fn: Any) -> list[float]:
    """fn(run's rows sorted by step) for every run of arm ``label`` (one value per seed)."""
    rows = _arm_rows(train, label)
    out = []
    for _, run in rows.groupby("run_id", sort=True):
        out.append(fn(run.sort_values("step")))
    return out


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
    if transform is not None:
        v = transform(v)
    return float(v.mean()) if len(v) else math.nan


def _missing(cid: str, axis: str, statement: str, source: str, reason: str, **values: Any) -> Claim:
    return Claim(cid, axis, statement, source, "n/a", INCONCLUSIVE, reason, dict(values))


def _has_arms(train_or_table: pd.DataFrame, labels: Sequence[str], col: str = "method") -> list[str]:
    present = set(train_or_table[col]) if (not train_or_table.empty and col in train_or_table.columns) else set()
    return [x for x in labels if x not in present]


# ------------------------------------------------------------------------------------ sign axis
def claim_entropy_collapse(train: pd.DataFrame) -> Claim:
    """Success-biased (delta = 2) arms lose entropy faster than failure-biased (delta = 0.5) ones."""
    cid, axis = "sign_entropy", "sign"
    statement = "Success-biased weights (m_S > m_F) collapse entropy faster than failure-biased ones."
    source = "paper"
    succ, fail = SIGN_AXIS[2.0], SIGN_AXIS[0.5]
    col = logged(train, ENTROPY) if not train.empty else None
    if col is None:
        return _missing(cid, axis, statement, source, "no entropy column in the training records "
                        f"(no column {ENTROPY})")
    absent = _has_arms(train, [succ, fail])
    if absent:
        return _missing(cid, axis, statement, source, f"no training records of arm(s) {', '.join(absent)}")
    slopes = {label: per_run(train, label, lambda r: entropy_slope(r, col)) for label in SIGN_AXIS.values()}
    c, verdict, reason = compare(slopes[succ], slopes[fail], expect=-1,
                                 what=f"slope({succ}) - slope({fail})", names=(succ, fail))
    if c.n_a == 0 or c.n_b == 0:
        reason += " (an entropy slope needs at least 3 logged steps of a run)"
    parts = [f"{label}: {_fmt(*seed_stats(slopes[label]))}" for label in SIGN_AXIS.values() if slopes[label]]
    measurement = "entropy slope (nats per 100 steps) " + "; ".join(parts)
    masses = _mass_summary(train, [succ, fail])
    if masses:
        measurement += f"; mean m_S/m_F: {masses}"
    return Claim(cid, axis, statement, source, measurement, verdict, reason,
                 {"slopes": slopes, "diff": c.diff, "spread": c.spread, "metric": col})


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
    cid, axis = "sign_rank1", "sign"
    statement = ("Failure-biased weights (m_F > m_S) raise the rank-1 fraction of the output head's update "
                 "(paper, Qwen2.5-7B: 96% for AsymGRPO delta=0.5).")
    source = "paper"
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
    c, verdict, reason = compare(finals[fail], finals[succ], expect=+1, what=f"rank1({fail}) - rank1({succ})",
                                 names=(fail, succ))
    parts = [f"{label}: {_fmt(*seed_stats(finals[label]))}" for label in SIGN_AXIS.values() if finals[label]]
    measurement = "final rank-1 fraction of dW (head, since step 0) " + "; ".join(parts)
    return Claim(cid, axis, statement, source, measurement, verdict, reason,
                 {"final_rank1": finals, "diff": c.diff, "spread": c.spread, "metric": col})


def drift_pairs(run: pd.DataFrame, cols: Mapping[str, str | None]) -> pd.DataFrame:
    """Per step t of one run with step t+1 logged: the measured H[t+1] - H[t] and the first-order
    prediction -eta Cov(log pi, A) of step t (NaN where the covariance is not logged)."""
    from fade_core.decomposition import entropy_drift

    r = run.sort_values("step")
    num = {k: pd.to_numeric(r[c], errors="coerce").to_numpy(float) for k, c in cols.items() if c is not None}
    step = pd.to_numeric(r["step"], errors="coerce").to_numpy(float)
    if len(step) < 2:
        return pd.DataFrame(columns=["step", "measured", "predicted"])
    nxt = step[1:] == step[:-1] + 1
    h, lr = num["entropy"], num["lr"]
    cov = num.get("cov")
    predicted = entropy_drift(lr, cov)[:-1] if cov is not None else np.full(len(step) - 1, np.nan)
    df = pd.DataFrame({"step": step[:-1], "measured": h[1:] - h[:-1], "predicted": predicted})
    return df[nxt].reset_index(drop=True)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def claim_entropy_drift(train: pd.DataFrame) -> Claim:
    """Does -eta Cov(log pi, A) predict H[t+1] - H[t]? Per-run Pearson r, mean over runs."""
    cid, axis = "sign_drift", "sign"
    statement = ("The first-order entropy drift -eta Cov(log pi, A) (Cui et al. 2025) predicts the sign and size of "
                 "the measured per-step entropy change (sign-axis runs; judged on the per-run Pearson r against "
                 f"{MIN_PREDICTIVE_R}; sign agreement and slope are reported).")
    source = "spec (Cui et al. 2025)"
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
        r = _pearson(pairs[key].to_numpy(), pairs["measured"].to_numpy())
        if np.isfinite(r):
            rs.append(r)
        nz = pairs[(pairs[key] != 0) & pairs[key].notna() & pairs["measured"].notna() & (pairs["measured"] != 0)]
        if len(nz):
            signs.append(float((np.sign(nz[key]) == np.sign(nz["measured"])).mean()))
    mean_r, sd_r, n_r = seed_stats(rs)
    sign_acc = seed_stats(signs)
    slope = math.nan
    if pooled:
        allp = pd.concat(pooled)
        ok = allp[key].notna() & allp["measured"].notna()
        x, y = allp.loc[ok, key].to_numpy(float), allp.loc[ok, "measured"].to_numpy(float)
        if len(x) >= 3 and np.std(x) > 0:
            slope = float(np.polyfit(x, y, 1)[0])
    measurement = (f"per-run Pearson r {_fmt(mean_r, sd_r, n_r)}; sign agreement {_fmt(*sign_acc)}; "
                   + (f"pooled slope measured/predicted {slope:.3g}" if np.isfinite(slope) else "pooled slope n/a"))
    values = {"r_per_run": rs, "mean_r": mean_r, "sd_r": sd_r, "sign_agreement": signs, "pooled_slope": slope,
              "covariance_logged": True}
    if n_r < 2:
        return Claim(cid, axis, statement, source, measurement, INCONCLUSIVE,
                     f"{n_r} run(s) with a defined correlation: no spread over runs", values)
    spread = sd_r if np.isfinite(sd_r) else 0.0
    if mean_r - spread > MIN_PREDICTIVE_R:
        verdict, reason = AGREES, f"mean r {mean_r:.3g} minus its spread {spread:.3g} exceeds {MIN_PREDICTIVE_R}"
    elif mean_r + spread < MIN_PREDICTIVE_R:
        verdict, reason = DISAGREES, f"mean r {mean_r:.3g} plus its spread {spread:.3g} stays below {MIN_PREDICTIVE_R}"
    else:
        verdict, reason = INCONCLUSIVE, f"mean r {mean_r:.3g} ± {spread:.3g} straddles {MIN_PREDICTIVE_R}"
    return Claim(cid, axis, statement, source, measurement, verdict, reason, values)


# ------------------------------------------------------------------------------ difficulty axis
def final_pass_at_k(tables: Mapping[str, pd.DataFrame], benchmark: str | None, k: int | None = None
                    ) -> tuple[pd.DataFrame, int | None]:
    """Per run: pass@k at the run's last evaluated step ('all' bucket); k None -> the largest k evaluated
    for every run. Returns (frame with run_id, method, seed, pass_at_k; the k used)."""
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
        per_run_max = fin.groupby("run_id")["k"].max()
        k = int(per_run_max.min())
    return fin[fin["k"] == k][["run_id", "method", "seed", "pass_at_k"]], k


def _values(df: pd.DataFrame, label: str, col: str) -> list[float]:
    if df.empty:
        return []
    return pd.to_numeric(df[df["method"] == label][col], errors="coerce").tolist()


def claims_difficulty(train: pd.DataFrame, tables: Mapping[str, pd.DataFrame], benchmark: str | None) -> list[Claim]:
    """Power alpha in {1, 2, 3}: pass@1 and pass@k of alpha = 2 and alpha = 3 against alpha = 1, and prompts
    with signal per batch (alpha = 3 against 1)."""
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
             p1, "pass_at_k", "pass@1", +1),
            (f"difficulty_passk_{a}", hi, f"alpha = {alpha:g} raises {k_name} (k > 1) against alpha = 1.",
             pk if (k or 0) > 1 else pd.DataFrame(), "pass_at_k", k_name, +1),
        ]
    for cid, hi, statement, df, col, name, expect in specs:
        if df.empty:
            out.append(_missing(cid, axis, statement, source, f"no final {name} in the aggregated tables"))
            continue
        absent = _has_arms(df, [lo, hi])
        if absent:
            out.append(_missing(cid, axis, statement, source, f"no {name} of arm(s) {', '.join(absent)}"))
            continue
        vals = {label: _values(df, label, col) for label in DIFFICULTY_AXIS.values()}
        c, verdict, reason = compare(vals[hi], vals[lo], expect, what=f"{name}({hi}) - {name}({lo})", names=(hi, lo))
        parts = [f"alpha={a:g} ({label}): {_fmt(*seed_stats(vals[label]))}" for a, label in DIFFICULTY_AXIS.items()]
        out.append(Claim(cid, axis, statement, source, f"final {name}: " + "; ".join(parts), verdict, reason,
                         {"values": vals, "diff": c.diff, "spread": c.spread, "k": 1 if "pass1" in cid else k}))
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
    c, verdict, reason = compare(sig[hi], sig[lo], +1, what=f"signal({hi}) - signal({lo})", names=(hi, lo))
    parts = [f"alpha={a:g}: {_fmt(*seed_stats(sig[label]))}" for a, label in DIFFICULTY_AXIS.items()]
    out.append(Claim(cid, axis, statement, source, "mean share of prompts with signal per step: " + "; ".join(parts),
                     verdict, reason, {"values": sig, "diff": c.diff, "spread": c.spread}))
    return out


# ------------------------------------------------------------------------------------ FADE
def best_static(peak: pd.DataFrame, fade_labels: Iterable[str]) -> str | None:
    """The non-FADE trained arm with the highest mean peak pass@1 (None without one)."""
    skip = set(fade_labels) | {"base", "sft", "warmstart"}
    static = peak[~peak["method"].isin(skip)]
    if static.empty:
        return None
    means = static.groupby("method")["peak_pass_at_1"].mean()
    return str(means.idxmax())


def claims_fade(tables: Mapping[str, pd.DataFrame], benchmark: str | None,
                arms: Mapping[str, Arm] | None = None) -> list[Claim]:
    """FADE against the best static baseline (steps to peak pass@1, the pass@1 / pass@k frontier) and
    FADE against its ablations (peak pass@1)."""
    axis = "fade"
    fade_labels = [x for x, a in (arms or {}).items() if a.method == "fade"] or list(FADE_ARMS)
    peak = tables.get("peak", pd.DataFrame())
    if not peak.empty and benchmark is not None:
        peak = peak[peak["benchmark"] == benchmark]
    out: list[Claim] = []
    s_peak = ("FADE reaches its peak pass@1 earlier than the best static baseline (paper: ~20k steps earlier at 7B, "
              "~2k at 32B).")
    s_front = "FADE improves pass@1 and pass@k together against the best static baseline (the frontier moves out)."
    if peak.empty or "fade" not in set(peak["method"]):
        why = "no peak pass@1 table" if peak.empty else "no evaluated FADE run"
        out.append(_missing("fade_peak_step", axis, s_peak, "paper", why))
        out.append(_missing("fade_frontier", axis, s_front, "paper", why))
    else:
        base = best_static(peak, fade_labels)
        if base is None:
            out.append(_missing("fade_peak_step", axis, s_peak, "paper", "no evaluated static baseline"))
            out.append(_missing("fade_frontier", axis, s_front, "paper", "no evaluated static baseline"))
        else:
            f_steps, b_steps = _values(peak, "fade", "peak_step"), _values(peak, base, "peak_step")
            c, verdict, reason = compare(b_steps, f_steps, +1, what=f"peak step({base}) - peak step(fade)",
                                         names=(base, "fade"))
            f_top, b_top = _values(peak, "fade", "peak_pass_at_1"), _values(peak, base, "peak_pass_at_1")
            ct = Comparison(*seed_stats(f_top), *seed_stats(b_top))
            if verdict == AGREES and np.isfinite(ct.spread) and ct.diff < -ct.spread:
                verdict = INCONCLUSIVE
                reason += (f"; but fade's peak pass@1 is lower ({ct.diff:+.3g}, beyond the spread {ct.spread:.3g}): "
                           "an earlier, lower peak is not the paper's claim")
            unpeaked = [int(s) for s, f in zip(_values(peak, base, "peak_step"), _values(peak, base, "final_step"),
                                               strict=True) if s == f] if "final_step" in peak.columns else []
            if unpeaked:
                reason += (f"; {base} peaked at its last evaluated step in {len(unpeaked)} seed(s), so its peak step "
                           "is a lower bound and the lead may be larger")
            meas = (f"peak step: fade {_fmt(*seed_stats(f_steps))}, best static {base} {_fmt(*seed_stats(b_steps))}; "
                    f"fade peaks {c.diff:+.3g} steps earlier; peak pass@1 fade {_fmt(*seed_stats(f_top))}, "
                    f"{base} {_fmt(*seed_stats(b_top))}")
            out.append(Claim("fade_peak_step", axis, s_peak, "paper", meas, verdict, reason,
                             {"baseline": base, "fade": f_steps, "baseline_steps": b_steps,
                              "steps_earlier": c.diff, "spread": c.spread, "peak_pass1_diff": ct.diff}))
            out.append(_frontier_claim(tables, benchmark, base, s_front))
    for label, what in (("fade_fixed_alpha", "difficulty schedule (alpha)"),
                        ("fade_fixed_delta", "entropy schedule (delta)")):
        cid = f"fade_vs_{label.removeprefix('fade_')}"
        statement = f"FADE's {what} helps: FADE's peak pass@1 beats the ablation {label}."
        if peak.empty or not {"fade", label} <= set(peak["method"]):
            out.append(_missing(cid, axis, statement, "paper (ablation)", f"no evaluated runs of fade and {label}"))
            continue
        f, a = _values(peak, "fade", "peak_pass_at_1"), _values(peak, label, "peak_pass_at_1")
        c, verdict, reason = compare(f, a, +1, what=f"peak pass@1(fade) - peak pass@1({label})", names=("fade", label))
        meas = f"peak pass@1: fade {_fmt(*seed_stats(f))}, {label} {_fmt(*seed_stats(a))}"
        out.append(Claim(cid, axis, statement, "paper (ablation)", meas, verdict, reason,
                         {"fade": f, label: a, "diff": c.diff, "spread": c.spread}))
    return out


def _frontier_claim(tables: Mapping[str, pd.DataFrame], benchmark: str | None, base: str, statement: str) -> Claim:
    cid, axis = "fade_frontier", "fade"
    p1, _ = final_pass_at_k(tables, benchmark, 1)
    pk, k = final_pass_at_k(tables, benchmark, None)
    if p1.empty or pk.empty or not k or k <= 1:
        return _missing(cid, axis, statement, "paper", "no final pass@1 and pass@k (k > 1) in the aggregated tables")
    c1, v1, r1 = compare(_values(p1, "fade", "pass_at_k"), _values(p1, base, "pass_at_k"), +1, "pass@1 diff", ("fade", base))
    ck, vk, rk = compare(_values(pk, "fade", "pass_at_k"), _values(pk, base, "pass_at_k"), +1, f"pass@{k} diff", ("fade", base))
    verdicts = {v1, vk}
    if DISAGREES in verdicts:
        verdict = DISAGREES
    elif verdicts == {AGREES}:  # together: both beyond the seed spread
        verdict = AGREES
    else:
        verdict = INCONCLUSIVE
    pareto = _pareto_note(tables, benchmark, k)
    meas = (f"final pass@1 fade - {base}: {c1.diff:+.3g} (spread {c1.spread:.3g}); pass@{k}: {ck.diff:+.3g} "
            f"(spread {ck.spread:.3g}){pareto}")
    return Claim(cid, axis, statement, "paper", meas, verdict, f"pass@1: {r1}; pass@{k}: {rk}",
                 {"baseline": base, "k": k, "pass1_diff": c1.diff, "pass1_spread": c1.spread,
                  "passk_diff": ck.diff, "passk_spread": ck.spread})


def _pareto_note(tables: Mapping[str, pd.DataFrame], benchmark: str | None, k: int) -> str:
    fr = tables.get("frontier", pd.DataFrame())
    if fr.empty or not {"method", "k", "is_final", "pareto"} <= set(fr.columns):
        return ""
    fr = fr[(fr["k"] == k) & fr["is_final"].astype(bool)]
    if benchmark is not None and "benchmark" in fr.columns:
        fr = fr[fr["benchmark"] == benchmark]
    on = sorted(fr[fr["pareto"].astype(bool)]["method"].unique())
    return f"; final points on the pass@1/pass@{k} frontier: {', '.join(on) or 'none'}"


# ------------------------------------------------------------------------------------ all claims
def compute_claims(train: pd.DataFrame, tables: Mapping[str, pd.DataFrame], *, arms: Mapping[str, Arm] | None = None,
                   benchmark: str | None = None) -> list[Claim]:
    """Every claim of the study from the training records (as :func:`fade_core.runs.load_training_records`
    stacks them: one row per run and step, ``method`` = the arm label) and the aggregated tables
    (``pass_at_k``, ``peak``, ``frontier`` of results.duckdb, see :func:`load_tables`)."""
    train = train if train is not None else pd.DataFrame()
    return [
        claim_entropy_collapse(train),
        claim_rank1_funnel(train),
        claim_entropy_drift(train),
        *claims_difficulty(train, tables, benchmark),
        *claims_fade(tables, benchmark, arms),
    ]


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
