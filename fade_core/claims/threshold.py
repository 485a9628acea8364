"""Time to a pass@1 threshold, in rollouts: the FADE-speed claim, measured on the periodic validation curves.

Why not the step of peak pass@1: checkpoints every 50 steps put the peak on a coarse grid, argmax of a noisy
curve is biased toward late steps, and methods that sample more per step (dapo's refills, codapo's second
update) buy progress with rollouts a step count does not show (issue 15). So, from the training records
(``eval_pass1``: pass@1 on a fixed validation set every train.eval_every steps; ``rollouts``: rollouts
sampled in each step, refills and resampling included):

    final(run)      mean of the run's last :data:`EVAL_TAIL` finite eval_pass1 values; an arm's final is the
                    mean over its runs
    best static     the trained non-FADE arm with the highest final (never base, uniform or another
                    untrained row: they have no curve)
    threshold       :data:`THRESHOLD_SHARE` x the highest final among all trained arms, FADE's included (the
                    issue's "x% of the best arm's final"; one threshold for both arms compared)
    time(run)       cumulative rollouts at the first evaluation with eval_pass1 >= threshold (and its step);
                    a run that never gets there is censored at its total rollouts plus one evaluation
                    interval's, so its time is a lower bound and a difference against it is a bound too

The claim compares time(best static) - time(fade) over seeds (expect > 0: FADE earlier), reports how many
runs were censored and each arm's rollouts and optimizer steps per run, and is vetoed (inconclusive) when
FADE's final is significantly lower: an earlier arrival at a lower level is not the paper's claim.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fade_core.aggregate import UNTRAINED_METHODS
from fade_core.claims.common import Claim, _missing, _tested
from fade_core.stats import ci_text, judge, seed_stats
from fade_core.stats import compare_claim as compare
from fade_core.stats import fmt_seeds as _fmt

EVAL_COL, ROLLOUTS_COL, OPT_COL = "eval_pass1", "rollouts", "optimizer_steps"
THRESHOLD_SHARE = 0.9
EVAL_TAIL = 3
UNTRAINED = UNTRAINED_METHODS  # base, sft, warmstart, uniform: rows without a training curve
CLAIM_ID = "fade_time_to_threshold"


def run_curve(run: pd.DataFrame) -> pd.DataFrame:
    """One run's evaluations: step, eval_pass1, cumulative rollouts and optimizer steps at that step (the
    step's own included), sorted by step; empty without eval_pass1."""
    if EVAL_COL not in run.columns:
        return pd.DataFrame(columns=["step", EVAL_COL, "rollouts_cum", "opt_cum"])
    r = run.sort_values("step")
    cum = pd.to_numeric(r[ROLLOUTS_COL], errors="coerce").fillna(0).cumsum() if ROLLOUTS_COL in r else r["step"] * math.nan
    opt = pd.to_numeric(r[OPT_COL], errors="coerce").fillna(0).cumsum() if OPT_COL in r else r["step"] * math.nan
    out = pd.DataFrame({"step": r["step"].to_numpy(), EVAL_COL: pd.to_numeric(r[EVAL_COL], errors="coerce").to_numpy(),
                        "rollouts_cum": cum.to_numpy(), "opt_cum": opt.to_numpy()})
    return out[np.isfinite(out[EVAL_COL].to_numpy(float))].reset_index(drop=True)


def run_final(run: pd.DataFrame, tail: int = EVAL_TAIL) -> float:
    """Mean of the run's last ``tail`` evaluations (nan without any)."""
    c = run_curve(run)
    return float(c[EVAL_COL].iloc[-tail:].mean()) if len(c) else math.nan


def run_budget(run: pd.DataFrame) -> tuple[float, float]:
    """(total rollouts, total optimizer steps) of one run's records (nan when not logged)."""
    tot = [float(pd.to_numeric(run[c], errors="coerce").sum()) if c in run.columns else math.nan
           for c in (ROLLOUTS_COL, OPT_COL)]
    return tot[0], tot[1]


def time_to(run: pd.DataFrame, threshold: float) -> tuple[float, float, bool]:
    """(rollouts, step, censored) of the run's first evaluation at or above ``threshold``; never reached: its
    total rollouts plus one evaluation interval's (and its last step plus the interval), censored."""
    c = run_curve(run)
    hit = c[c[EVAL_COL] >= threshold]
    if len(hit):
        return float(hit["rollouts_cum"].iloc[0]), float(hit["step"].iloc[0]), False
    total, _ = run_budget(run)
    r = run.sort_values("step")
    steps = r["step"].to_numpy(float)
    interval = float(np.median(np.diff(c["step"]))) if len(c) > 1 else 1.0
    per_step = total / max(len(steps), 1)
    return total + interval * per_step, (steps[-1] if len(steps) else 0.0) + interval, True


def _runs(train: pd.DataFrame, label: str) -> list[pd.DataFrame]:
    rows = train[train["method"] == label] if not train.empty and "method" in train.columns else train.iloc[0:0]
    return [r for _, r in rows.groupby("run_id", sort=True)]


def arm_finals(train: pd.DataFrame, label: str) -> list[float]:
    return [v for v in (run_final(r) for r in _runs(train, label)) if math.isfinite(v)]


def best_static_arm(train: pd.DataFrame, fade_labels: Iterable[str]) -> str | None:
    """The trained non-FADE arm with the highest final validation pass@1 (None without curves)."""
    if train.empty or EVAL_COL not in train.columns:
        return None
    skip = set(fade_labels) | set(UNTRAINED)
    finals = {a: arm_finals(train, a) for a in sorted(set(train["method"])) if a not in skip}
    finals = {a: float(np.mean(v)) for a, v in finals.items() if v}
    return max(finals, key=lambda a: (finals[a], a)) if finals else None


def claim_time_to_threshold(train: pd.DataFrame, fade_labels: Sequence[str]) -> Claim:
    """FADE against the best static baseline in rollouts to :data:`THRESHOLD_SHARE` of the best final."""
    axis, source = "fade", "paper (FADE peaks ~20k steps earlier at 7B, ~2k at 32B); measured in rollouts here"
    statement = (f"FADE reaches {THRESHOLD_SHARE:.0%} of the best arm's final validation pass@1 with fewer rollouts "
                 "than the best static baseline (the paper: FADE peaks earlier).")
    base = best_static_arm(train, fade_labels)
    if base is None or not arm_finals(train, "fade"):
        why = "no periodic validation pass@1 (eval_pass1) of " + ("any static arm" if base is None else "arm fade")
        return _missing(CLAIM_ID, axis, statement, source, f"{why} in the training records (train.eval_every > 0)")
    trained = [a for a in set(train["method"]) if a not in UNTRAINED]
    best_final = max(float(np.mean(v)) for v in (arm_finals(train, a) for a in trained) if v)
    threshold = THRESHOLD_SHARE * best_final
    times = {a: [time_to(r, threshold) for r in _runs(train, a)] for a in ("fade", base)}
    roll = {a: [t[0] for t in ts] for a, ts in times.items()}
    cens = {a: sum(t[2] for t in ts) for a, ts in times.items()}
    _c, verdict, reason, test = compare(roll[base], roll["fade"], +1, f"rollouts({base}) - rollouts(fade)",
                                        (base, "fade"))
    _cf, _v, _r, fin = compare(arm_finals(train, "fade"), arm_finals(train, base), +1, "final diff", ("fade", base))
    if test and fin and fin["ci"][1] < 0:
        test["veto"] = (f"fade's final validation pass@1 is lower ({ci_text(fin['diff'], fin['ci'])}): an earlier "
                        "arrival at a lower level is not the paper's claim")
    if test and any(cens.values()):
        test["note"] = (f"; censored runs (threshold never reached, timed at their budget + one interval): fade "
                        f"{cens['fade']}, {base} {cens[base]}: the difference is a bound")
    if test:
        verdict, reason = judge(test)
    budgets = {a: [run_budget(r) for r in _runs(train, a)] for a in ("fade", base)}
    meas = (f"threshold {threshold:.3f} ({THRESHOLD_SHARE:.0%} of the best final {best_final:.3f}); rollouts to it: "
            f"fade {_fmt(*seed_stats(roll['fade']))}, best static {base} {_fmt(*seed_stats(roll[base]))}; steps to it: "
            f"fade {_fmt(*seed_stats([t[1] for t in times['fade']]))}, {base} "
            f"{_fmt(*seed_stats([t[1] for t in times[base]]))}; censored: fade {cens['fade']}, {base} {cens[base]}; "
            "per run rollouts / optimizer steps: " + ", ".join(
                f"{a} {np.nanmean([b[0] for b in bs]):.0f} / {np.nanmean([b[1] for b in bs]):.0f}"
                for a, bs in budgets.items()))
    values: dict[str, Any] = {"baseline": base, "threshold": threshold, "rollouts": roll, "censored": cens,
                              "final_diff": fin.get("diff", math.nan) if fin else math.nan}
    return _tested(CLAIM_ID, axis, statement, source, meas, verdict, reason, test, **values)
