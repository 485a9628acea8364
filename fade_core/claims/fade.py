"""FADE against the best static baseline and against its ablations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from fade_core.claims.common import (
    FADE_ARMS,
    INCONCLUSIVE,
    Claim,
    _missing,
    _tested,
    _values,
    arm_scores,
    final_pass_at_k,
)
from fade_core.claims.threshold import UNTRAINED, best_static_arm, claim_time_to_threshold
from fade_core.config import Arm
from fade_core.stats import ci_text, fmt_p, judge, seed_stats
from fade_core.stats import compare_claim as compare
from fade_core.stats import fmt_seeds as _fmt


# ------------------------------------------------------------------------------------ FADE
def best_static(peak: pd.DataFrame, fade_labels: Iterable[str]) -> str | None:
    """The non-FADE trained arm with the highest mean peak pass@1 (None without one): the report's reading;
    no verdict rests on it (the claims use :func:`fade_core.claims.threshold.best_static_arm`)."""
    static = peak[~peak["method"].isin(set(fade_labels) | set(UNTRAINED))]
    return None if static.empty else str(static.groupby("method")["peak_pass_at_1"].mean().idxmax())


def _best_by_final_test(tables: Mapping[str, pd.DataFrame], benchmark: str | None, fade_labels: Iterable[str]
                        ) -> str | None:
    p1, _ = final_pass_at_k(tables, benchmark, 1)
    static = p1[~p1["method"].isin(set(fade_labels) | set(UNTRAINED))] if not p1.empty else p1
    return None if static.empty else str(static.groupby("method")["pass_at_k"].mean().idxmax())


def claims_fade(tables: Mapping[str, pd.DataFrame], benchmark: str | None,
                arms: Mapping[str, Arm] | None = None, train: pd.DataFrame | None = None) -> list[Claim]:
    """FADE against the best static baseline (rollouts to a pass@1 threshold: :mod:`fade_core.claims.threshold`;
    the pass@1 / pass@k frontier) and against its ablations (final test pass@1, paired by problem). The best
    static baseline is the one of the validation curves (the frontier's too; by final test pass@1 when no
    curve was logged). Not gated here by the schedule check (:func:`compute_claims`)."""
    axis = "fade"
    fade_labels = [x for x, a in (arms or {}).items() if a.method == "fade"] or list(FADE_ARMS)
    train = train if train is not None else pd.DataFrame()
    out: list[Claim] = [claim_time_to_threshold(train, fade_labels)]
    s_front = "FADE improves pass@1 and pass@k together against the best static baseline (the frontier moves out)."
    base = best_static_arm(train, fade_labels) or _best_by_final_test(tables, benchmark, fade_labels)
    if base is None:
        out.append(_missing("fade_frontier", axis, s_front, "paper", "no evaluated static baseline"))
    else:
        out.append(_frontier_claim(tables, benchmark, base, s_front))
    p1, _ = final_pass_at_k(tables, benchmark, 1)
    for label, what in (("fade_fixed_alpha", "difficulty schedule (alpha)"),
                        ("fade_fixed_delta", "entropy schedule (delta)")):
        cid = f"fade_vs_{label.removeprefix('fade_')}"
        statement = f"FADE's {what} helps: FADE's final pass@1 beats the ablation {label}."
        if p1.empty or not {"fade", label} <= set(p1["method"]):
            out.append(_missing(cid, axis, statement, "paper (ablation)", f"no evaluated runs of fade and {label}"))
            continue
        x = arm_scores(tables, p1, benchmark, 1, ["fade", label])
        _c, verdict, reason, test = compare(x["fade"], x[label], +1, f"pass@1(fade) - pass@1({label})", ("fade", label))
        f, a = _values(p1, "fade", "pass_at_k"), _values(p1, label, "pass_at_k")
        meas = f"final test pass@1: fade {_fmt(*seed_stats(f))}, {label} {_fmt(*seed_stats(a))}"
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

