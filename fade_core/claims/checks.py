"""The study's checks (not claims; outside Holm's family) and the steps that combine the claims: FADE's
schedule engaged, the A/A control, gating FADE's claims, Holm's correction."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fade_core import stats
from fade_core.claims.common import (
    AA_ARMS,
    AA_ID,
    ALPHA_COL,
    ALPHA_MAX_SHARE_AT_BOUND,
    ALPHA_MIN_COVERAGE,
    AT_BOUND_TOL,
    BASE,
    CHECK_IDS,
    DELTA_COL,
    DELTA_MAX_LOWEST,
    DELTA_MIN_COVERAGE,
    FADE_ALPHA_LOW,
    FADE_ALPHA_MAX,
    FADE_DELTA_MIN,
    FAILS,
    HEADROOM_ID,
    HEADROOM_MAX,
    INCONCLUSIVE,
    PASSES,
    SCHEDULE_ID,
    UNIFORM,
    Claim,
    _arm_rows,
    _has_arms,
    _missing,
    _tested,
    _values,
    arm_scores,
    final_pass_at_k,
)
from fade_core.config import Arm
from fade_core.stats import ALPHA, ci_text, judge, seed_stats
from fade_core.stats import compare_claim as compare
from fade_core.stats import fmt_seeds as _fmt


# ------------------------------------------------------------------------------------ checks
def schedule_run(run: pd.DataFrame, alpha_max: float = FADE_ALPHA_MAX,
                 delta_min: float = FADE_DELTA_MIN) -> dict[str, Any] | None:
    """One FADE run's schedule against the thresholds above (None without logged alpha and delta).

    delta's reachable range is [floor, 1], floor = max(delta_min, 1 - H_target) (delta = clip(1 + H_hat -
    H_target, delta_min, 1) reaches 1 - H_target at zero entropy, no lower), with the run's last logged
    ``h_target``; without one the floor is delta_min (the widest range, the hardest to cover)."""
    a = pd.to_numeric(run[ALPHA_COL], errors="coerce").dropna().to_numpy(float) if ALPHA_COL in run else np.array([])
    d = pd.to_numeric(run[DELTA_COL], errors="coerce").dropna().to_numpy(float) if DELTA_COL in run else np.array([])
    if a.size == 0 or d.size == 0:
        return None
    cover = float((a.max() - a.min()) / (alpha_max - FADE_ALPHA_LOW))
    share, bound = max((float(np.mean(np.abs(a - b) <= AT_BOUND_TOL)), b) for b in (FADE_ALPHA_LOW, alpha_max))
    h = pd.to_numeric(run["h_target"], errors="coerce").dropna() if "h_target" in run else pd.Series(dtype=float)
    h_target = float(h.iloc[-1]) if len(h) else None
    floor = max(delta_min, 1.0 - h_target) if h_target is not None else delta_min
    d_cover = float((1.0 - d.min()) / (1.0 - floor)) if floor < 1.0 else 0.0
    engaged = bool(cover >= ALPHA_MIN_COVERAGE and share <= ALPHA_MAX_SHARE_AT_BOUND
                   and d_cover >= DELTA_MIN_COVERAGE and d.min() <= DELTA_MAX_LOWEST)
    text = (f"alpha {a.min():.3g}-{a.max():.3g} covers {cover:.0%} of [1, {alpha_max:g}], at {bound:g} in "
            f"{share:.0%} of steps; delta's lowest {d.min():.3g} covers {d_cover:.0%} of [{floor:.3g}, 1]")
    if h_target is not None:
        text += f" (its floor at zero entropy: {floor:.3g}, with H_target {h_target:.3g} nats)"
    p_hat = pd.to_numeric(run["p_hat"], errors="coerce").dropna() if "p_hat" in run else pd.Series(dtype=float)
    p_max = float(p_hat.max()) if len(p_hat) else None
    if p_max is not None:
        # alpha = 3 (1 - p_hat) / (2 p_hat) leaves alpha_max above p_hat = 3 / (3 + 2 alpha_max) and covers the
        # check's share of [1, alpha_max] (down from the cap) above the p_hat of alpha_max - share x (alpha_max - 1)
        a_need = alpha_max - ALPHA_MIN_COVERAGE * (alpha_max - FADE_ALPHA_LOW)
        text += (f"; p_hat's highest {p_max:.3g} (alpha leaves {alpha_max:g} above {p_hat_for_alpha(alpha_max):.3g}, "
                 f"reaches {a_need:g} at {p_hat_for_alpha(a_need):.3g})")
    h_hat = pd.to_numeric(run["h_hat"], errors="coerce").dropna() if "h_hat" in run else pd.Series(dtype=float)
    h_min = float(h_hat.min()) if len(h_hat) else None
    if h_min is not None and h_target is not None:
        # delta = 1 + H_hat - H_target <= d_need needs H_hat <= H_target - (1 - d_need)
        d_need = min(1.0 - DELTA_MIN_COVERAGE * (1.0 - floor), DELTA_MAX_LOWEST)
        text += (f"; H_hat's lowest {h_min:.3g} nats (delta <= {d_need:.3g} needs <= "
                 f"{h_target - (1.0 - d_need):.3g})")
    return dict(coverage=cover, at_bound=share, bound=bound, delta_min=float(d.min()), delta_coverage=d_cover,
                engaged=engaged, text=text, delta_floor=floor if h_target is not None else None, p_hat_max=p_max,
                h_hat_min=h_min)


def p_hat_for_alpha(alpha: float) -> float:
    """The p_hat at which FADE's unclipped alpha = 3 (1 - p_hat) / (2 p_hat) equals ``alpha``: 3 / (3 + 2 alpha)
    (alpha = 3 at 1/3, 2 at 3/7, 1 at 0.6)."""
    return 3.0 / (3.0 + 2.0 * alpha)


def claim_schedule_engaged(train: pd.DataFrame, arms: Mapping[str, Arm] | None = None, label: str = "fade") -> Claim:
    """Did FADE's alpha and delta move through their ranges in every run of arm ``label`` (the study's arm
    ``fade``; the report checks every FADE arm)?"""
    statement = (f"FADE's schedule engages (study check, not a paper claim): in every run of arm {label} alpha covers "
                 f">= {ALPHA_MIN_COVERAGE:.0%} of [1, alpha_max] and sits at a bound in <= {ALPHA_MAX_SHARE_AT_BOUND:.0%} "
                 f"of steps, and delta falls through >= {DELTA_MIN_COVERAGE:.0%} of its reachable range [max(delta_min, 1 - "
                 f"H_target), 1] and to <= {DELTA_MAX_LOWEST:g}. Otherwise the FADE claims are not tested.")
    source = "study check (issue 15: FADE ran as Power(alpha=3) with delta ~1)"
    arm = (arms or {}).get(label)
    alpha_max = float((arm.params if arm is not None else {}).get("alpha_max", FADE_ALPHA_MAX))
    delta_min = float((arm.params if arm is not None else {}).get("delta_min", FADE_DELTA_MIN))
    rows = _arm_rows(train, label)
    runs = {rid: schedule_run(run, alpha_max, delta_min) for rid, run in (rows.groupby("run_id") if len(rows) else [])}
    runs = {rid: r for rid, r in runs.items() if r is not None}
    if not runs:
        return _missing(SCHEDULE_ID, "fade", statement, source, f"not checked: no training records of arm {label} with "
                        f"{ALPHA_COL} and {DELTA_COL} logged", summary="no logged schedule")
    bad = [rid for rid, r in runs.items() if not r["engaged"]]
    rs = list(runs.values())
    summary = (f"alpha covered {min(r['coverage'] for r in rs):.0%} of [1, {alpha_max:g}] at worst and sat at a "
               f"bound in up to {max(r['at_bound'] for r in rs):.0%} of steps; delta's lowest value was "
               f"{max(r['delta_min'] for r in rs):.3g} in the worst run and covered "
               f"{min(r['delta_coverage'] for r in rs):.0%} of its reachable range at worst; "
               f"{len(rs) - len(bad)} of {len(rs)} runs engaged")
    p_max = [r["p_hat_max"] for r in rs if r["p_hat_max"] is not None]
    if p_max:
        summary += (f"; p_hat reached {max(p_max):.3g} at most (alpha leaves {alpha_max:g} above "
                    f"{p_hat_for_alpha(alpha_max):.3g})")
    meas = "; ".join(f"{rid}: {r['text']}" for rid, r in runs.items())
    limits = (f"needs coverage >= {ALPHA_MIN_COVERAGE:.0%}, at a bound <= {ALPHA_MAX_SHARE_AT_BOUND:.0%}, "
              f"delta through >= {DELTA_MIN_COVERAGE:.0%} of [floor, 1] and <= {DELTA_MAX_LOWEST:g} in every run")
    verdict, reason = (FAILS, f"did not engage in {', '.join(bad)} ({limits})") if bad else (PASSES, f"engaged ({limits})")
    return Claim(SCHEDULE_ID, "fade", statement, source, meas, verdict, reason,
                 dict(runs=runs, summary=summary, alpha_max=alpha_max))


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



def claim_headroom(tables: Mapping[str, pd.DataFrame], benchmark: str | None) -> Claim:
    """The testbed check (module docstring of fade_core.claims): base against the uniform sampler at pass@1,
    paired by problem (:func:`fade_core.stats.bootstrap_problems`), and both at or below :data:`HEADROOM_MAX`
    at every evaluated k (bucket 'all'); the per-level values are listed."""
    statement = (f"Testbed headroom (study check, not a paper claim): the base model beats the uniform sampler at "
                 f"pass@1 (95% CI of the difference, paired by problem, above 0) and both stay at or below "
                 f"{HEADROOM_MAX:g} at every evaluated k.")
    source = "study check (issue 15: the old task's base was a uniform sampler with pass@100 ~0.97)"
    pk, pp = tables.get("pass_at_k", pd.DataFrame()), tables.get("pass_at_k_problem", pd.DataFrame())
    if benchmark is not None:
        pk = pk[pk["benchmark"] == benchmark] if not pk.empty else pk
        pp = pp[pp["benchmark"] == benchmark] if not pp.empty else pp
    absent = _has_arms(pk, [BASE, UNIFORM])
    if absent:
        return _missing(HEADROOM_ID, "testbed", statement, source, f"not checked: no pass@k rows of {', '.join(absent)}"
                        " (the uniform sampler's rows need the built-in task's problem shares)")
    one = pp[(pp["k"] == 1) & pp["method"].isin([BASE, UNIFORM])] if not pp.empty else pp
    wide = one.pivot_table(index="problem_id", columns="method", values="pass_at_k", aggfunc="mean").dropna() \
        if not one.empty else pd.DataFrame()
    if wide.shape[0] < 2 or not {BASE, UNIFORM} <= set(wide.columns):
        return _missing(HEADROOM_ID, "testbed", statement, source, "not checked: fewer than 2 problems with both the "
                        "base model's and the uniform sampler's pass@1")
    boot = stats.bootstrap_problems(wide[BASE].to_numpy(), wide[UNIFORM].to_numpy())
    ci = boot.ci()
    means = pk[pk["method"].isin([BASE, UNIFORM])].groupby(["bucket", "k", "method"])["pass_at_k"].mean()
    ks = sorted(int(k) for k in pk[pk["bucket"] == "all"]["k"].unique())
    high = [k for k in ks if any(means.get(("all", k, m), 0.0) > HEADROOM_MAX for m in (BASE, UNIFORM))]

    def pair(bucket: str, k: int) -> str:
        return f"{means.get((bucket, k, BASE), math.nan):.3f} / {means.get((bucket, k, UNIFORM), math.nan):.3f}"

    levels = sorted(b for b in pk["bucket"].unique() if b != "all")
    meas = ("pass@k base / uniform: " + ", ".join(f"k={k} {pair('all', k)}" for k in ks)
            + "".join(f"; {lv}: pass@1 {pair(lv, 1)}, pass@{ks[-1]} {pair(lv, ks[-1])}" for lv in levels)
            + f"; pass@1 base - uniform {ci_text(boot.diff, ci)} over {wide.shape[0]} problems (paired)")
    problems = []
    if not ci[0] > 0:
        problems.append("the base model is not detectably better than the uniform sampler at pass@1")
    if high:
        problems.append(f"pass@k above {HEADROOM_MAX:g} at k = {', '.join(str(k) for k in high)}")
    verdict, reason = (FAILS, "; ".join(problems)) if problems else (PASSES, "headroom at every evaluated k, and "
                                                                      "the base beats the uniform sampler")
    return Claim(HEADROOM_ID, "testbed", statement, source, meas, verdict, reason,
                 {"diff": boot.diff, "ci": list(ci), "p": boot.p_value(), "above_max_at_k": high})
