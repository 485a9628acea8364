"""The report's tables, each number with its confidence interval (fade_core.report.intervals).

    headline_intervals  final-step pass@k per benchmark, method and k: mean, 95 % CI, what was resampled
    headline_table      the same, wide (one column per k), cells "mean [low, high]" in %
    comparisons         every pair of methods at their last step: a - b with its CI and a Holm-adjusted p
    fade_lead           how many steps earlier each FADE method peaks than the best static baseline, and
                        the difference of their peak pass@1, each with its CI
    buckets, runs       pass@k by difficulty bucket (means), and what was evaluated per run

Numbers are formatted once per column (:func:`fmt_pct`, :func:`fmt_ci`, :func:`fmt_steps`, :func:`fmt_p`), so
one table never mixes formats; a statistic that needs several seeds reads "n/a" with one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from fade_core.report.figures import table
from fade_core.report.intervals import (
    OVER_PROBLEMS,
    OVER_PROBLEMS_UNTRAINED,
    OVER_SEEDS_AND_PROBLEMS,
    Interval,
    bootstrap_peaks,
    diff_interval,
    mean_interval,
    per_run_diff_interval,
)
from fade_core.stats import holm

NA = "n/a"
BASE = "base"
"""The untrained base model's method label (fade_core.aggregate's base run)."""
UNIFORM = "uniform"
"""The uniform sampler's label: exact pass@k, no samples (fade_core.aggregate)."""


# ------------------------------------------------------------------------------------------ formats
def fmt_pct(v: float | None) -> str:
    """A share as a percentage with one decimal ("62.5"); n/a for a missing value."""
    return NA if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def fmt_ci(iv: Interval | None, scale: float = 100.0, digits: int = 1) -> str:
    """"estimate [low, high]" (scaled: 100 for percentages / percentage points); n/a without an interval."""
    if iv is None or math.isnan(iv.estimate):
        return NA
    f = f"{{:.{digits}f}}"
    return f"{f.format(scale * iv.estimate)} [{f.format(scale * iv.low)}, {f.format(scale * iv.high)}]"


def fmt_steps(values: Sequence[float]) -> list[str]:
    """Step counts of one column: whole numbers when every value is one, else one decimal for all."""
    vals = [float(v) for v in values]
    whole = all(math.isnan(v) or v == round(v) for v in vals)
    return [NA if math.isnan(v) else (f"{v:.0f}" if whole else f"{v:.1f}") for v in vals]


def fmt_p(p: float | None) -> str:
    """A p-value: three decimals, "<0.001" below that; n/a when there is none."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return NA
    return "<0.001" if p < 0.001 else f"{p:.3f}"


# --------------------------------------------------------------------------------- per-problem scores
def final_scores(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per-problem pass@k of every run at its own last evaluated step (per benchmark; under a rollout budget
    a method's runs end at different steps), with the run's ``trained`` flag (false for rows without a run: the
    uniform sampler's): columns benchmark, method, trained, seed, step, problem_id, k, pass_at_k."""
    return table(con, """
        WITH last AS (SELECT run_id, benchmark, max(step) AS step FROM pass_at_k_problem GROUP BY ALL)
        SELECT p.benchmark, p.method, coalesce(r.trained, false) AS trained, p.seed, p.step, p.problem_id, p.k,
               p.pass_at_k
        FROM pass_at_k_problem p JOIN last l USING (run_id, benchmark, step) LEFT JOIN runs r USING (run_id)
        ORDER BY p.benchmark, p.method, p.k, p.seed, p.problem_id""")


def score_matrix(rows: pd.DataFrame, problems: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """[seeds, problems] pass@k of ``rows`` (one method, benchmark, k) on the problems every seed has
    (restricted to ``problems`` when given, in that order). Returns (matrix, problem ids)."""
    wide = rows.pivot_table(index="seed", columns="problem_id", values="pass_at_k", aggfunc="first")
    wide = wide.dropna(axis=1)
    cols = [p for p in problems if p in wide.columns] if problems is not None else sorted(wide.columns)
    return wide[cols].to_numpy(dtype=np.float64), list(cols)


# ------------------------------------------------------------------------------------------ headline
HEADLINE_COLUMNS = ["benchmark", "method", "final_step", "seeds", "problems", "k", "mean", "ci_low", "ci_high",
                    "ci_over", "too_few_samples", "per_seed"]


def headline_intervals(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Final pass@k per benchmark, method and k with its 95 % CI (long form, :data:`HEADLINE_COLUMNS`); each run
    at its own last step, final_step the step ("600") or the range of its runs' last steps ("293-308")."""
    scores = final_scores(con)
    if scores.empty:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    flags = table(con, """SELECT s.benchmark, s.method, s.k, s.too_few_samples FROM pass_at_k_seeds s
        JOIN (SELECT benchmark, method, max(step) AS step FROM pass_at_k_seeds GROUP BY ALL) l
        USING (benchmark, method, step) WHERE s.bucket = 'all'""")
    few = {(r.benchmark, r.method, int(r.k)): bool(r.too_few_samples) for r in flags.itertuples(index=False)}
    out = []
    for (bench, method, k), rows in scores.groupby(["benchmark", "method", "k"], sort=True):
        x, problems = score_matrix(rows)
        if x.size == 0:
            continue
        iv = mean_interval(x, constant=not bool(rows.trained.iloc[0])).clip(0.0, 1.0)
        lo, hi = int(rows.step.min()), int(rows.step.max())  # runs a rollout budget stopped at different steps
        out.append(dict(benchmark=bench, method=method, final_step=str(lo) if lo == hi else f"{lo}-{hi}",
                        seeds=x.shape[0], problems=len(problems), k=int(k), mean=iv.estimate, ci_low=iv.low, ci_high=iv.high,
                        ci_over=iv.over, too_few_samples=few.get((bench, method, int(k)), False),
                        per_seed=[float(v) for v in x.mean(axis=1)]))
    return pd.DataFrame(out, columns=HEADLINE_COLUMNS)


def fmt_seeds(values: Sequence[float] | None) -> str:
    """Each seed's value in % ("seeds 8.3 / 8.7"); empty for one seed or none (the mean is that value)."""
    vals = list(values) if values is not None and not isinstance(values, float) else []
    return "seeds " + " / ".join(fmt_pct(v) for v in vals) if len(vals) > 1 else ""


def headline_table(con_or_long: duckdb.DuckDBPyConnection | pd.DataFrame) -> pd.DataFrame:
    """The headline, one row per benchmark and method, a column per k: "mean [low, high]" in %, then each
    seed's value when there are several (two-seed intervals are too wide to read alone), "†" where some
    problem had fewer than flag_n_per_k * k samples. A column flagged in every sampled row (the uniform
    sampler's exact row aside) carries the mark in its header instead (``pass@32 (%) †``): marking every
    cell says nothing a cell could differ in."""
    long = con_or_long if isinstance(con_or_long, pd.DataFrame) else headline_intervals(con_or_long)
    if long.empty:
        return pd.DataFrame()
    long = long.copy()
    per_seed = long["per_seed"] if "per_seed" in long else [None] * len(long)
    sampled = long[long.method != UNIFORM]  # the uniform sampler's pass@k is exact: it has no sample count
    all_few = {int(k) for k, g in sampled.groupby("k") if bool(g.too_few_samples.all())}
    long["cell"] = [fmt_ci(Interval(m, lo, hi, over)) + (f"; {fmt_seeds(v)}" if fmt_seeds(v) else "")
                    + (" †" if few and int(k) not in all_few else "")
                    for m, lo, hi, over, few, k, v in zip(long["mean"], long.ci_low, long.ci_high, long.ci_over,
                                                          long.too_few_samples, long.k, per_seed, strict=True)]
    wide = long.pivot_table(index=["benchmark", "method", "final_step", "seeds", "problems", "ci_over"], columns="k",
                            values="cell", aggfunc="first")
    wide.columns = [f"pass@{k} (%)" + (" †" if int(k) in all_few else "") for k in wide.columns]
    return wide.reset_index().rename(columns={"final_step": "final step", "ci_over": "CI over"})


# --------------------------------------------------------------------------------------- comparisons
def comparisons(con: duckdb.DuckDBPyConnection, ks: Sequence[int] | None = None) -> pd.DataFrame:
    """Every pair of methods (a < b by name) per benchmark and k at their last steps: a - b with its 95 % CI
    and p-value, Holm-adjusted within each (benchmark, k). Numbers as fractions (not %)."""
    scores = final_scores(con)
    cols = ["benchmark", "k", "method_a", "method_b", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "p", "p_holm",
            "ci_over", "seeds_a", "seeds_b", "problems"]
    if scores.empty:
        return pd.DataFrame(columns=cols)
    if ks is not None:
        scores = scores[scores.k.isin(list(ks))]
    out = []
    for (bench, k), sub in scores.groupby(["benchmark", "k"], sort=True):
        wide = {m: rows.pivot_table(index="seed", columns="problem_id", values="pass_at_k", aggfunc="first").dropna(axis=1)
                for m, rows in sub.groupby("method", sort=True)}  # [seeds, problems] of each method, once
        untrained = {m: not bool(rows.trained.iloc[0]) for m, rows in sub.groupby("method")}
        methods = sorted(wide)
        family = []
        for i, a in enumerate(methods):
            for b in methods[i + 1:]:
                common = wide[a].columns.intersection(wide[b].columns).sort_values()
                if common.empty:
                    continue
                xa = wide[a][common].to_numpy(dtype=np.float64)
                xb = wide[b][common].to_numpy(dtype=np.float64)
                iv = diff_interval(xa, xb, constant_a=untrained[a], constant_b=untrained[b]).clip(-1.0, 1.0)
                family.append(dict(benchmark=bench, k=int(k), method_a=a, method_b=b, mean_a=float(xa.mean()),
                                   mean_b=float(xb.mean()), diff=iv.estimate, ci_low=iv.low, ci_high=iv.high,
                                   p=iv.p_value, ci_over=iv.over, seeds_a=xa.shape[0], seeds_b=xb.shape[0],
                                   problems=len(common)))
        if family:
            for row, adj in zip(family, holm([r["p"] for r in family]), strict=True):
                row["p_holm"] = adj
            out += family
    df = pd.DataFrame(out, columns=cols)
    if not df.empty:
        df = df.assign(_abs=df["diff"].abs()).sort_values(["benchmark", "k", "_abs"], ascending=[True, True, False])
        df = df.drop(columns="_abs").reset_index(drop=True)
    return df




def key_comparisons(pairs: pd.DataFrame, untrained: Sequence[str], fade_vs: Sequence[tuple[str, str, str]] = ()
                    ) -> pd.DataFrame:
    """The comparisons a reader asks first, out of :func:`comparisons`' pairs: every trained method - the base
    model, and each FADE method - its best static baseline (``fade_vs``: (benchmark, FADE method, baseline)),
    each oriented that way (a = the method). p_holm is recomputed over these rows per (benchmark, k): a family
    of its own, smaller than all pairs'; ci_low/ci_high stay unadjusted 95% intervals."""
    if pairs.empty:
        return pairs.assign(family=pd.Series(dtype=str))
    skip = set(untrained) | {BASE}
    wanted = {(b, f, s) for b, f, s in fade_vs}
    out = []
    for (bench, _k), sub in pairs.groupby(["benchmark", "k"], sort=True):
        family = []
        for row in sub.to_dict("records"):
            a, b = row["method_a"], row["method_b"]
            if BASE in (a, b) and ({a, b} - {BASE}).isdisjoint(skip):
                family.append(_oriented(row, b if a == BASE else a, "vs base"))
            elif (bench, a, b) in wanted or (bench, b, a) in wanted:
                fade = a if (bench, a, b) in wanted else b
                family.append(_oriented(row, fade, "FADE vs best static"))
        if family:
            for row, adj in zip(family, holm([r["p"] for r in family]), strict=True):
                row["p_holm"] = adj
            out += sorted(family, key=lambda r: (r["family"] != "vs base", r["method_a"]))
    return pd.DataFrame(out, columns=[*pairs.columns, "family"])


def _oriented(row: Mapping[str, Any], first: str, family: str) -> dict[str, Any]:
    """A pair's row with ``first`` as method a (difference and interval flipped when it was b)."""
    row = dict(row, family=family)
    if row["method_a"] == first:
        return row
    return dict(row, method_a=row["method_b"], method_b=row["method_a"], mean_a=row["mean_b"], mean_b=row["mean_a"],
                diff=-row["diff"], ci_low=-row["ci_high"], ci_high=-row["ci_low"], seeds_a=row["seeds_b"],
                seeds_b=row["seeds_a"])


HOLM_KEY = "p (Holm over this table's rows of each benchmark and k)"
HOLM_ALL = "p (Holm over all pairs of each benchmark and k)"


def comparisons_display(df: pd.DataFrame, holm_label: str = HOLM_ALL) -> pd.DataFrame:
    """:func:`comparisons` (or :func:`key_comparisons`) formatted for the page: the interval unadjusted, the
    p-value both unadjusted and Holm-adjusted (``holm_label`` says over which family), each column saying so."""
    if df.empty:
        return df
    return pd.DataFrame({
        "benchmark": df.benchmark, "k": df.k, "method a": df.method_a, "method b": df.method_b,
        "a (%)": [fmt_pct(v) for v in df.mean_a], "b (%)": [fmt_pct(v) for v in df.mean_b],
        "a - b (pp) [95% CI, unadjusted]": [fmt_ci(Interval(d, lo, hi, o)) for d, lo, hi, o in
                                            zip(df["diff"], df.ci_low, df.ci_high, df.ci_over, strict=True)],
        "p (unadjusted)": [fmt_p(p) for p in df.p], holm_label: [fmt_p(p) for p in df.p_holm], "CI over": df.ci_over,
        "seeds": [f"{a} / {b}" for a, b in zip(df.seeds_a, df.seeds_b, strict=True)], "problems": df.problems,
    })


# ------------------------------------------------------------------------------------------ FADE lead
def fade_lead(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per benchmark and FADE method, against the best static baseline (the aggregated ``fade_lead`` table):
    peak steps, steps earlier with its CI, peak pass@1 of both and their difference with its CI.

    Several seeds in both: intervals over seeds of the per-run peaks. Otherwise: the pass@1 curves (mean
    over seeds) on resampled problems, the peaks found again in each replicate."""
    lead = table(con, "SELECT * FROM fade_lead ORDER BY benchmark, method")
    cols = ["benchmark", "method", "baseline", "fade_peak_step", "baseline_peak_step", "steps_earlier",
            "steps_earlier_ci", "fade_peak", "baseline_peak", "peak_gain", "peak_gain_ci", "ci_over", "seeds"]
    if lead.empty:
        return pd.DataFrame(columns=cols)
    peaks = table(con, "SELECT benchmark, method, seed, peak_step, peak_pass_at_1 FROM peak")
    p1 = table(con, "SELECT benchmark, method, seed, step, problem_id, pass_at_k FROM pass_at_k_problem WHERE k = 1")
    out = []
    for r in lead.itertuples(index=False):
        pa = peaks[(peaks.benchmark == r.benchmark) & (peaks.method == r.method)]
        pb = peaks[(peaks.benchmark == r.benchmark) & (peaks.method == r.baseline)]
        steps_iv = per_run_diff_interval(pb.peak_step.tolist(), pa.peak_step.tolist())
        gain_iv = per_run_diff_interval(pa.peak_pass_at_1.tolist(), pb.peak_pass_at_1.tolist())
        if steps_iv is None or gain_iv is None:
            both = _peak_curves(p1, r.benchmark, r.method, r.baseline)
            if both is not None:
                ivs = bootstrap_peaks(*both)
                steps_iv, gain_iv = ivs.steps_earlier, ivs.peak_gain
        last = float(p1[(p1.benchmark == r.benchmark) & p1.method.isin([r.method, r.baseline])].step.max())
        steps_iv = steps_iv.clip(-last, last) if steps_iv is not None else None
        gain_iv = gain_iv.clip(-1.0, 1.0) if gain_iv is not None else None
        out.append(dict(benchmark=r.benchmark, method=r.method, baseline=r.baseline,
                        fade_peak_step=r.fade_peak_step, baseline_peak_step=r.baseline_peak_step,
                        steps_earlier=r.steps_earlier, steps_earlier_ci=steps_iv,
                        fade_peak=r.fade_peak_pass_at_1, baseline_peak=r.baseline_peak_pass_at_1,
                        peak_gain=r.peak_gain, peak_gain_ci=gain_iv,
                        ci_over=steps_iv.over if steps_iv else NA, seeds=f"{r.fade_seeds} / {r.baseline_seeds}"))
    return pd.DataFrame(out, columns=cols)


def _peak_curves(p1: pd.DataFrame, bench: str, a: str, b: str) -> tuple[Any, Any, Any, Any] | None:
    """(steps_a, curves_a [T, P], steps_b, curves_b [T, P]) on the problems both have at every step."""
    sub = p1[p1.benchmark == bench]
    wide = {}
    for m in (a, b):
        w = sub[sub.method == m].pivot_table(index="step", columns="problem_id", values="pass_at_k", aggfunc="mean")
        wide[m] = w.dropna(axis=1)
    common = sorted(set(wide[a].columns) & set(wide[b].columns))
    if not common or wide[a].empty or wide[b].empty:
        return None
    return (wide[a].index.to_numpy(dtype=np.float64), wide[a][common].to_numpy(dtype=np.float64),
            wide[b].index.to_numpy(dtype=np.float64), wide[b][common].to_numpy(dtype=np.float64))


def fade_lead_display(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`fade_lead` formatted for the page (steps earlier in steps, pass@1 in %)."""
    if df.empty:
        return df
    return pd.DataFrame({
        "benchmark": df.benchmark, "FADE method": df.method, "best static baseline": df.baseline,
        "FADE peak step": fmt_steps(df.fade_peak_step), "baseline peak step": fmt_steps(df.baseline_peak_step),
        "steps earlier [95% CI]": [fmt_ci(iv, 1.0, 1 if _fractional(iv) else 0) if iv else NA
                                   for iv in df.steps_earlier_ci],
        "FADE peak pass@1 (%)": [fmt_pct(v) for v in df.fade_peak],
        "baseline peak pass@1 (%)": [fmt_pct(v) for v in df.baseline_peak],
        "peak gain (pp) [95% CI]": [fmt_ci(iv) for iv in df.peak_gain_ci],
        "CI over": df.ci_over, "seeds": df.seeds,
    })


def _fractional(iv: Interval) -> bool:
    return any(v != round(v) for v in (iv.estimate, iv.low, iv.high) if not math.isnan(v))


# ------------------------------------------------------------------------------------- the other two
def buckets(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """pass@k (%) by difficulty bucket at each method's last step (mean over seeds), with the bucket's size."""
    df = table(con, """SELECT s.benchmark, s.bucket, s.method, s.k, s.mean, s.num_seeds,
            (SELECT max(num_problems) FROM pass_at_k p WHERE p.benchmark = s.benchmark AND p.bucket = s.bucket
             AND p.method = s.method AND p.step = s.step AND p.k = s.k) AS problems
        FROM pass_at_k_seeds s
        WHERE s.step = (SELECT max(step) FROM pass_at_k_seeds t WHERE t.method = s.method AND t.benchmark = s.benchmark)
          AND s.bucket <> 'all'
        ORDER BY s.benchmark, s.bucket, s.method, s.k""")
    if df.empty:
        return df
    df["cell"] = [fmt_pct(v) for v in df["mean"]]
    wide = df.pivot_table(index=["benchmark", "bucket", "method", "problems", "num_seeds"], columns="k", values="cell",
                          aggfunc="first")
    wide.columns = [f"pass@{k} (%)" for k in wide.columns]
    wide = wide.reset_index().rename(columns={"num_seeds": "seeds"})
    order = wide.bucket.map(bucket_rank)
    return wide.assign(_rank=order).sort_values(["benchmark", "_rank", "method"]).drop(columns="_rank").reset_index(drop=True)


BUCKET_ORDER = ("easy", "medium", "hard")
"""Difficulty buckets in reading order (fade_core.config.COUNTDOWN_LEVEL_NAMES); other names follow, by name."""


def bucket_rank(name: str) -> tuple[int, str]:
    """Sort key of a difficulty bucket: easy, medium, hard first, in that order; any other by name."""
    return (BUCKET_ORDER.index(name), "") if name in BUCKET_ORDER else (len(BUCKET_ORDER), str(name))


def runs_table(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per run: method, seed, registry method, whether trained, evaluated checkpoints, last step, samples."""
    return table(con, """SELECT r.run_id, r.method, r.seed, r.advantage, r.trained,
        count(DISTINCT s.step) AS checkpoints, max(s.step) AS "last step", count(*) AS samples
        FROM runs r JOIN samples s USING (run_id) GROUP BY ALL ORDER BY ALL""")


def ci_note(long: pd.DataFrame) -> str:
    """What the headline's intervals resample, in words (it differs between a 1-seed and a study run)."""
    if long.empty:
        return ""
    words = {
        OVER_SEEDS_AND_PROBLEMS: "over seeds and problems for methods with several training seeds (problems "
                                 "resampled, the seed level drawn with Student's t: wide with 2 or 3 seeds)",
        OVER_PROBLEMS: "over problems only for methods with one training seed (seed-to-seed variation is then "
                       "unknown, and not in the interval)",
        OVER_PROBLEMS_UNTRAINED: "over problems for the untrained base model (it has no training seed)",
    }
    order = [OVER_SEEDS_AND_PROBLEMS, OVER_PROBLEMS, OVER_PROBLEMS_UNTRAINED]
    overs = [o for o in order if o in set(long.ci_over)] + sorted(set(long.ci_over) - set(order))
    return ("95% bootstrap confidence intervals, " + "; ".join(words.get(o, o) for o in overs)
            + ". Intervals are cut to the range a pass@k can take, [0, 100].")
