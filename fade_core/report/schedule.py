"""FADE's schedule check on every FADE arm of a comparison: did alpha and delta move, or did the arm train
as a fixed weighting?

FADE sets alpha from the batch's pass rate (alpha = 3 (1 - p_hat) / (2 p_hat), clipped to [1, alpha_max]) and
delta from the policy's entropy (delta = clip(1 + H_hat - H_target, delta_min, 1)). When the pass rate stays
below 3 / (3 + 2 alpha_max) and the entropy above its target, alpha sits at alpha_max and delta at 1: the arm is
then Power(alpha_max), a static method, and its numbers say nothing about FADE's adaptation. The check is the
study's own (:func:`fade_core.claims.checks.claim_schedule_engaged`, thresholds in fade_core.claims.common),
run here on each FADE arm's training records (the aggregated ``train_steps`` table).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd

from fade_core.claims.checks import claim_schedule_engaged, p_hat_for_alpha
from fade_core.claims.common import PASSES

RECORD_COLUMNS = ("run_id", "method", "seed", "step", "alpha", "delta", "h_target", "p_hat", "h_hat")
"""The training-record columns the check reads (fade_core.train.record's names)."""


@dataclass
class ScheduleCheck:
    """The check of one FADE arm: ``engaged`` (None: not checked, nothing logged), one row per run, and the
    verdict in plain words."""

    label: str
    engaged: bool | None
    verdict: str
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    detail: str = ""


def schedule_records(con: duckdb.DuckDBPyConnection, labels: Sequence[str]) -> pd.DataFrame:
    """The training records of arms ``labels``: the :data:`RECORD_COLUMNS` that were logged (empty without any)."""
    try:
        have = {r[0] for r in con.execute("DESCRIBE train_steps").fetchall()}
    except duckdb.CatalogException:
        return pd.DataFrame()
    cols = [c for c in RECORD_COLUMNS if c in have]
    if not labels or "method" not in cols:
        return pd.DataFrame()
    marks = ", ".join("?" for _ in labels)
    return con.execute(f"SELECT {', '.join(cols)} FROM train_steps WHERE method IN ({marks}) ORDER BY run_id, step",
                       list(labels)).df()


def check_arm(train: pd.DataFrame, label: str, method: str, params: Mapping[str, Any]) -> ScheduleCheck:
    """The study's schedule check on arm ``label`` (its FADE ``method`` and the ``params`` its config set:
    alpha_max and delta_min, when set, bound the ranges), in words."""
    from fade_core.config import Arm

    claim = claim_schedule_engaged(train, {label: Arm(method=method, params=dict(params))}, label=label)
    runs = claim.values.get("runs") or {}
    if not runs:
        return ScheduleCheck(label, None, f"Not checked for arm {label}: its runs logged no alpha and delta.")
    alpha_max = float(claim.values.get("alpha_max", 3.0))
    rows = []
    for rid, r in runs.items():
        rows.append({"run": rid, "schedule engaged": "yes" if r["engaged"] else "NO",
                     "alpha's range covered": f"{r['coverage']:.0%}",
                     "steps with alpha at a bound": f"{r['at_bound']:.0%} (at {r['bound']:g})",
                     "delta's lowest": f"{r['delta_min']:.3f}",
                     "delta's range covered": f"{r['delta_coverage']:.0%}",
                     "p_hat's highest": "n/a" if r["p_hat_max"] is None else f"{r['p_hat_max']:.3f}",
                     "H_hat's lowest (nats)": "n/a" if r["h_hat_min"] is None else f"{r['h_hat_min']:.3f}"})
    bad = [rid for rid, r in runs.items() if not r["engaged"]]
    if claim.verdict == PASSES:
        verdict = (f"FADE's schedule engaged in all {len(runs)} runs of arm {label}: alpha and delta moved through "
                   "their ranges, so this arm's numbers are those of FADE's adaptive weighting.")
    else:
        stuck = [runs[rid] for rid in bad]
        at = sorted({r["bound"] for r in stuck})
        lowest = min(r["delta_min"] for r in stuck)
        share = min(r["at_bound"] for r in stuck)
        fixed = share >= 1.0 and lowest >= 1.0 - 1e-9
        verdict = (f"FADE's schedule did NOT engage in {len(bad)} of {len(runs)} runs of arm {label}: in those runs "
                   f"alpha sat at {' or '.join(f'{b:g}' for b in at)} in at least {share:.0%} of steps and delta "
                   f"never fell below {lowest:.3f}. "
                   + (f"The arm trained as Power(alpha={at[-1]:g}), a fixed weighting" if fixed else
                      f"The arm trained as a nearly fixed weighting (about Power(alpha={at[-1]:g}), delta ~ "
                      f"{lowest:.2f})")
                   + ", not an adaptive schedule: its numbers are no evidence about FADE's adaptation.")
        p_max = [r["p_hat_max"] for r in stuck if r["p_hat_max"] is not None]
        if p_max and max(p_max) <= p_hat_for_alpha(alpha_max):
            verdict += (f" alpha leaves {alpha_max:g} only when a batch's pass rate p_hat exceeds "
                        f"{p_hat_for_alpha(alpha_max):.3f}; these runs' highest was {max(p_max):.3f}.")
        targets = train[train.run_id.isin(bad)].groupby("run_id").h_target.last() if "h_target" in train else None
        h_min = [r["h_hat_min"] for r in stuck if r["h_hat_min"] is not None]
        if targets is not None and len(targets.dropna()) and h_min and min(h_min) >= float(targets.max()):
            verdict += (f" delta falls below 1 only when the entropy H_hat drops under H_target (here "
                        f"{float(targets.min()):.3f}-{float(targets.max()):.3f} nats); these runs' lowest was "
                        f"{min(h_min):.3f}.")
    detail = f"Check: {claim.statement} Measured: {claim.measurement}"
    return ScheduleCheck(label, claim.verdict == PASSES, verdict, pd.DataFrame(rows), detail)


def schedule_checks(con: duckdb.DuckDBPyConnection, fade_arms: Mapping[str, tuple[str, Mapping[str, Any]]]
                    ) -> list[ScheduleCheck]:
    """The check of every FADE arm (``fade_arms``: {label: (method, the parameters its config set)})."""
    train = schedule_records(con, list(fade_arms))
    return [check_arm(train, label, method, params) for label, (method, params) in sorted(fade_arms.items())]


def schedule_html(checks: Sequence[ScheduleCheck], table_html: Any) -> str:
    """The section's HTML: per arm the verdict, its runs' table (``table_html(df)``) and the check's terms."""
    e = html.escape
    parts = []
    for c in checks:
        cls = "verdict-passes" if c.engaged else "verdict-FAILS" if c.engaged is False else "muted"
        parts.append(f"<p class='note'><b class='{cls}'>{e(c.verdict)}</b></p>")
        if not c.runs.empty:
            parts.append(table_html(c.runs))
        if c.detail:
            parts.append(f"<details><summary>The check and each run's measurement</summary>"
                         f"<p class='muted'>{e(c.detail)}</p></details>")
    return "\n".join(parts)
