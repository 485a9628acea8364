"""FADE against the best static baseline and against its ablations."""

from __future__ import annotations

import math
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
from fade_core.config import Arm
from fade_core.stats import ci_text, fmt_p, judge, seed_stats
from fade_core.stats import compare_claim as compare
from fade_core.stats import fmt_seeds as _fmt


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

