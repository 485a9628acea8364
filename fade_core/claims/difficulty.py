"""The difficulty axis: Power alpha in {1, 2, 3} (pass@1, pass@k, prompts with signal)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fade_core.claims.common import (
    DIFFICULTY_AXIS,
    ZERO_VAR,
    Claim,
    _has_arms,
    _missing,
    _tested,
    _values,
    arm_scores,
    final_pass_at_k,
    logged,
    mean_value,
    per_run,
)
from fade_core.stats import compare_claim as compare
from fade_core.stats import fmt_seeds as _fmt
from fade_core.stats import seed_stats


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

