"""The report: figures (PNG + SVG) and one self-contained HTML page from the aggregated tables.

Input: ``results.duckdb`` written by :func:`fade_core.aggregate.aggregate` (tables pass_at_k,
pass_at_k_seeds, frontier, peak, fade_lead, comparisons, train_curves, ...). Output, under
``reports/<name>/``::

    index.html                  everything embedded (figures as base64 PNG, tables, params, data card)
    figures/<figure>.{png,svg}  one file per figure and format
    tables/headline.csv         the headline table (final pass@k per method, mean +- std over seeds)
    tensorboard/<run_id>/       event files of every run's per-step training record (+ eval pass@k)

Seeds are drawn as bands: the line is the mean over seeds, the band spans the min..max over seeds.
Training metrics are read by the names the trainer writes (:data:`TRAIN_METRICS`, fade_core.train.record), so
a figure whose metric the runs did not log is listed as unavailable rather than drawn empty.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from fade_core.store import atomic_write_bytes  # noqa: E402

TRAIN_METRICS = ("entropy", "m_s", "m_f", "rank1_frac", "alpha", "delta", "reward_mean")
"""The training-record columns the report draws, by the names the trainer writes (fade_core.train.record)."""

FIGURES = (
    ("pass_at_k_vs_step", "pass@k against training step, per method"),
    ("frontier", "Accuracy-diversity frontier: pass@1 against pass@k"),
    ("peak_step", "Step of peak pass@1 per method (FADE against the best static baseline)"),
    ("entropy", "Mean token entropy against step"),
    ("mass", "Gradient masses m_S (successes) and m_F (failures) against step"),
    ("rank1_fraction", "Rank-1 fraction of the output head's update against step"),
    ("fade_schedules", "FADE's alpha and delta schedules"),
    ("distinct_correct", "Distinct correct solutions per problem against step"),
)
FADE_COLOR = "#d62728"
# 18 distinct colours for the non-FADE methods (matplotlib's tab20 without its reds): a study's 14 baselines
# never share one
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
           "#aec7e8", "#98df8a", "#c5b0d5", "#ffbb78", "#c49c94", "#f7b6d2", "#9edae5", "#dbdb8d", "#c7c7c7")


@dataclass
class ReportInputs:
    """What goes into the page besides the tables: title, the exact params (YAML text), the data card."""

    title: str = "fade report"
    params_yaml: str = ""
    data_card: str = ""
    formats: Sequence[str] = ("png", "svg")
    notes: list[str] = field(default_factory=list)
    sections: list[tuple[str, str, str]] = field(default_factory=list)
    """Extra sections after the headline, each (anchor id, title, HTML fragment): the study's claims."""


# ----------------------------------------------------------------------------------------- helpers
def method_colors(methods: Iterable[str], fade: Iterable[str] = ()) -> dict[str, str]:
    """A stable colour per method (FADE methods in red shades, the rest from the palette in name order)."""
    fade = set(fade)
    out: dict[str, str] = {}
    reds = iter((FADE_COLOR, "#ff9896", "#a50f15", "#fb6a4a"))
    others = iter(PALETTE * 4)
    for m in sorted(set(methods)):
        out[m] = next(reds, FADE_COLOR) if m in fade else next(others)
    return out


def _table(con: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    try:
        return con.execute(sql).df()
    except duckdb.CatalogException:
        return pd.DataFrame()


def _band(ax: Any, df: pd.DataFrame, x: str, y: str, color: str, label: str, **kw: Any) -> None:
    """Mean line over seeds and a min..max band; df has columns x, y, seed."""
    g = df.groupby(x)[y].agg(["mean", "min", "max", "count"]).reset_index().sort_values(x)
    ax.plot(g[x], g["mean"], color=color, label=label, lw=1.8, **kw)
    if (g["count"] > 1).any():
        ax.fill_between(g[x], g["min"], g["max"], color=color, alpha=0.18, lw=0)


def _finish(fig: Any, path_stem: Path, formats: Sequence[str]) -> dict[str, Path]:
    out = {}
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=110, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)
        out[fmt] = atomic_write_bytes(path_stem.with_suffix(f".{fmt}"), buf.getvalue())
    plt.close(fig)
    return out


def _grid(n: int, height: float = 3.6, total_width: float = 10.5) -> tuple[Any, list[Any]]:
    """``n`` panels, up to 3 a row, about ``total_width`` inches wide in all."""
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    width = min(total_width / cols, 6.5)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _legend(fig: Any, axes: Sequence[Any]) -> None:
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if handles:
        ncol = min(len(labels), 6)
        rows = -(-len(labels) // ncol)
        # room below the axes for every legend row (about 0.22 in each), so it never covers the x labels
        bottom = min(0.45, (0.12 + 0.22 * rows) / fig.get_figheight())
        fig.legend([handles[lab] for lab in labels], labels, loc="lower center", ncol=ncol,
                   frameon=False, bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, bottom, 1, 1))
    else:
        fig.tight_layout()


# ----------------------------------------------------------------------------------------- figures
def fig_pass_at_k(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> Any:
    df = _table(con, "SELECT benchmark, k, method, seed, step, pass_at_k FROM pass_at_k WHERE bucket = 'all'")
    if df.empty:
        return None
    panels = sorted({(b, int(k)) for b, k in zip(df.benchmark, df.k, strict=True)})
    fig, axes = _grid(len(panels))
    for ax, (bench, k) in zip(axes, panels, strict=True):
        sub = df[(df.benchmark == bench) & (df.k == k)]
        for m, g in sub.groupby("method"):
            if g.step.nunique() == 1:  # an untrained baseline: a horizontal reference line
                ax.axhline(g.pass_at_k.mean(), color=colors[m], ls="--", lw=1.2, label=m)
                continue
            _band(ax, g, "step", "pass_at_k", colors[m], m, marker="o", ms=3)
        ax.set_title(f"{bench}: pass@{k}")
        ax.set_xlabel("step")
        ax.set_ylabel(f"pass@{k}")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig


def fig_frontier(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> Any:
    df = _table(con, "SELECT * FROM frontier")
    if df.empty:
        return None
    panels = sorted({(b, int(k)) for b, k in zip(df.benchmark, df.k, strict=True)})
    fig, axes = _grid(len(panels), 4.4)
    for ax, (bench, k) in zip(axes, panels, strict=True):
        sub = df[(df.benchmark == bench) & (df.k == k)]
        for m, g in sub.groupby("method"):
            g = g.sort_values("step")
            ax.plot(g.pass_at_1, g.pass_at_k, color=colors[m], lw=1, alpha=0.6, marker="o", ms=3, label=m)
            fin = g[g.is_final]
            ax.scatter(fin.pass_at_1, fin.pass_at_k, color=colors[m], s=70, edgecolor="black", zorder=3)
        par = sub[sub.pareto].sort_values("pass_at_1")
        ax.plot(par.pass_at_1, par.pass_at_k, color="black", ls=":", lw=1.2, label="Pareto front")
        ax.set_title(f"{bench}: pass@1 vs pass@{k} (large dot: final step)")
        ax.set_xlabel("pass@1 (accuracy)")
        ax.set_ylabel(f"pass@{k} (coverage)")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig


def fig_peak_step(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> Any:
    df = _table(con, "SELECT p.*, r.trained FROM peak p JOIN runs r USING (run_id) WHERE r.trained")
    if df.empty:
        return None
    benches = sorted(df.benchmark.unique())
    fig, axes = _grid(len(benches), 0.5 + 0.45 * df.method.nunique(), 9.0)
    for ax, bench in zip(axes, benches, strict=True):
        sub = df[df.benchmark == bench]
        g = sub.groupby("method").peak_step.agg(["mean", "min", "max"]).sort_values("mean")
        y = range(len(g))
        ax.barh(list(y), g["mean"], color=[colors[m] for m in g.index], alpha=0.85)
        ax.errorbar(g["mean"], list(y), xerr=[g["mean"] - g["min"], g["max"] - g["mean"]], fmt="none", ecolor="black",
                    capsize=3, lw=1)
        for yi, (m, row) in zip(y, g.iterrows(), strict=True):
            ax.scatter(sub[sub.method == m].peak_step, [yi] * int((sub.method == m).sum()), color="black", s=10, zorder=3)
            ax.text(row["mean"], yi, f"  {row['mean']:.0f}", va="center", fontsize=8)
        ax.set_yticks(list(y), list(g.index))
        ax.set_xlabel("step of peak pass@1 (bar: mean over seeds, whiskers: min..max, dots: seeds)")
        ax.set_title(f"{bench}: when each method peaks")
        ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


def _curves(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """{metric: its (method, seed, step, value) rows} for the ``names`` the runs logged."""
    metrics = _table(con, "SELECT DISTINCT metric FROM train_curves")
    logged = set(metrics.metric) if not metrics.empty else set()
    return {name: con.execute("SELECT method, seed, step, value FROM train_curves WHERE metric = ? ORDER BY step",
                              [name]).df() for name in names if name in logged}


def fig_train_metric(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str], metric: str, ylabel: str) -> Any:
    cur = _curves(con, [metric]).get(metric)
    if cur is None or cur.empty:
        return None
    fig, ax = plt.subplots(figsize=(9.0, 3.6))
    for m, g in cur.groupby("method"):
        _band(ax, g, "step", "value", colors.get(m, "gray"), m)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def fig_mass(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> Any:
    cur = _curves(con, ["m_s", "m_f"])
    if not cur:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), squeeze=False)
    for ax, name, title in zip(axes[0], ("m_s", "m_f"), ("m_S (success mass)", "m_F (failure mass)"), strict=True):
        df = cur.get(name)
        if df is None:
            ax.text(0.5, 0.5, f"{name} not logged", ha="center", transform=ax.transAxes)
            continue
        for m, g in df.groupby("method"):
            _band(ax, g, "step", "value", colors.get(m, "gray"), m)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    _legend(fig, list(axes[0]))
    return fig


def fig_fade_schedules(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str], fade: Sequence[str]) -> Any:
    cur = _curves(con, ["alpha", "delta"])
    cur = {k: v[v.method.isin(fade)] for k, v in cur.items()}
    cur = {k: v for k, v in cur.items() if not v.empty}
    if not cur:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), squeeze=False)
    bounds = {"alpha": (1.0, 3.0), "delta": (0.3, 1.0)}
    for ax, name in zip(axes[0], ("alpha", "delta"), strict=True):
        df = cur.get(name)
        if df is None:
            ax.text(0.5, 0.5, f"{name} not logged", ha="center", transform=ax.transAxes)
            continue
        for m, g in df.groupby("method"):
            _band(ax, g, "step", "value", colors.get(m, FADE_COLOR), m)
        for b in bounds[name]:
            ax.axhline(b, color="gray", ls=":", lw=1)
        ax.set_title(f"FADE {name} (dotted: clip bounds)")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    _legend(fig, list(axes[0]))
    return fig


def fig_distinct(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> Any:
    df = _table(con, """SELECT p.benchmark, p.method, p.seed, p.step, avg(p.distinct_correct) AS distinct_correct
                        FROM problem_stats p GROUP BY ALL""")
    if df.empty:
        return None
    benches = sorted(df.benchmark.unique())
    fig, axes = _grid(len(benches), 3.6, 9.0)
    for ax, bench in zip(axes, benches, strict=True):
        for m, g in df[df.benchmark == bench].groupby("method"):
            if g.step.nunique() == 1:
                ax.axhline(g.distinct_correct.mean(), color=colors[m], ls="--", lw=1.2, label=m)
            else:
                _band(ax, g, "step", "distinct_correct", colors[m], m, marker="o", ms=3)
        ax.set_title(f"{bench}: distinct correct / problem")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig


def make_figures(con: duckdb.DuckDBPyConnection, out_dir: str | Path, formats: Sequence[str] = ("png", "svg")
                 ) -> tuple[dict[str, dict[str, Path]], dict[str, str]]:
    """Draw every figure of :data:`FIGURES` into ``out_dir/<name>.<fmt>``.

    Returns ({name: {fmt: path}}, {name: why it is missing}) -- a figure whose data is absent (no training
    record, no FADE run) is reported, never drawn empty.
    """
    out_dir = Path(out_dir)
    runs = _table(con, "SELECT method, bool_or(is_fade) AS is_fade FROM runs GROUP BY method")
    fade = runs[runs.is_fade].method.tolist() if not runs.empty else []
    methods = set(runs.method) if not runs.empty else set()
    curves = _table(con, "SELECT DISTINCT method FROM train_curves")
    methods |= set(curves.method) if not curves.empty else set()
    colors = method_colors(methods, fade)
    builders = {
        "pass_at_k_vs_step": lambda: fig_pass_at_k(con, colors),
        "frontier": lambda: fig_frontier(con, colors),
        "peak_step": lambda: fig_peak_step(con, colors),
        "entropy": lambda: fig_train_metric(con, colors, "entropy", "mean token entropy (nats)"),
        "mass": lambda: fig_mass(con, colors),
        "rank1_fraction": lambda: fig_train_metric(con, colors, "rank1_frac", "rank-1 fraction of dW (head)"),
        "fade_schedules": lambda: fig_fade_schedules(con, colors, fade),
        "distinct_correct": lambda: fig_distinct(con, colors),
    }
    why = {
        "pass_at_k_vs_step": "no evaluated samples", "frontier": "no k > 1 evaluated", "peak_step": "no trained run",
        "entropy": "no entropy in the training records", "mass": "no m_S / m_F in the training records",
        "rank1_fraction": "no rank-1 fraction in the training records",
        "fade_schedules": "no FADE run with alpha / delta in its training record",
        "distinct_correct": "no evaluated samples",
    }
    made: dict[str, dict[str, Path]] = {}
    missing: dict[str, str] = {}
    for name, _caption in FIGURES:
        fig = builders[name]()
        if fig is None:
            missing[name] = why[name]
            continue
        made[name] = _finish(fig, out_dir / name, formats)
    return made, missing


# ------------------------------------------------------------------------------------------ tables
def headline_table(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Final-step pass@k per benchmark and method: 'mean ± std (seeds)' cells, flags marked with '†'."""
    df = _table(con, """SELECT s.benchmark, s.method, s.step, s.k, s.mean, s.std, s.num_seeds, s.too_few_samples
        FROM pass_at_k_seeds s JOIN (SELECT benchmark, method, max(step) AS step FROM pass_at_k_seeds GROUP BY ALL) l
        USING (benchmark, method, step) WHERE s.bucket = 'all' ORDER BY benchmark, method, k""")
    if df.empty:
        return df

    def cell(r: pd.Series) -> str:
        txt = f"{100 * r['mean']:.1f}"
        if not pd.isna(r["std"]):
            txt += f" ± {100 * r['std']:.1f}"
        return txt + (" †" if r["too_few_samples"] else "")

    df["cell"] = df.apply(cell, axis=1)
    wide = df.pivot_table(index=["benchmark", "method", "step", "num_seeds"], columns="k", values="cell", aggfunc="first")
    wide.columns = [f"pass@{k}" for k in wide.columns]
    return wide.reset_index().rename(columns={"step": "final step", "num_seeds": "seeds"})


def _html_table(df: pd.DataFrame, floatfmt: str = "{:.4g}") -> str:
    if df is None or df.empty:
        return "<p class='muted'>(no rows)</p>"
    d = df.copy()
    for c in d.columns:
        if pd.api.types.is_float_dtype(d[c]):
            d[c] = d[c].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
        elif d[c].dtype == object:
            d[c] = d[c].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else v)
    return "<div class='scroll'>" + d.to_html(index=False, escape=True, border=0, classes="tbl", na_rep="") + "</div>"


def markdown_table(df: pd.DataFrame, empty: str = "(no rows)") -> str:
    """A GitHub-flavoured markdown table of ``df`` (floats to 4 significant digits)."""
    if df is None or df.empty:
        return empty

    def fmt(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        return f"{v:.4g}" if isinstance(v, float) else str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1120px;margin:24px auto;padding:0 16px;
color:#222;line-height:1.45}
h1{font-size:26px;margin-bottom:4px}h2{font-size:20px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:34px}
h3{font-size:16px;margin-bottom:6px}.muted{color:#777}.note{background:#f6f8fa;border-left:3px solid #888;padding:8px 12px}
table.tbl{border-collapse:collapse;font-size:13px;margin:8px 0}table.tbl th,table.tbl td{padding:4px 10px;
border-bottom:1px solid #e5e5e5;text-align:right}table.tbl th{background:#f3f3f3}table.tbl td:first-child,
table.tbl th:first-child{text-align:left}figure{margin:14px 0 22px}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:13px;color:#555}pre{background:#f6f8fa;padding:10px;font-size:12px;overflow:auto;max-height:420px}
nav a{margin-right:14px;font-size:14px}.warn{color:#a15c00}.scroll{overflow-x:auto}
table.claims{border-collapse:collapse;font-size:12.5px}table.claims td,table.claims th{padding:4px 8px;
border-bottom:1px solid #e5e5e5;text-align:left;vertical-align:top}table.claims th{background:#f3f3f3}
.verdict-agrees{color:#1a7f37}.verdict-disagrees{color:#cf222e}.verdict-inconclusive{color:#9a6700}
"""


def render_html(con: duckdb.DuckDBPyConnection, figures: Mapping[str, Mapping[str, Path]], missing: Mapping[str, str],
                inputs: ReportInputs) -> str:
    """The report page: one string with every figure embedded as base64 PNG (opens offline)."""
    e = html.escape
    head = headline_table(con)
    lead = _table(con, """SELECT benchmark, method AS "FADE method", baseline AS "best static baseline",
        fade_peak_step AS "FADE peak step", baseline_peak_step AS "baseline peak step",
        steps_earlier AS "steps earlier", steps_seed_spread AS "seed spread (steps)",
        100 * fade_peak_pass_at_1 AS "FADE peak pass@1 (%)", 100 * baseline_peak_pass_at_1 AS "baseline peak pass@1 (%)",
        fade_seeds || ' / ' || baseline_seeds AS "seeds" FROM fade_lead""")
    cmp_ = _table(con, """SELECT benchmark, k, method_a AS "method a", method_b AS "method b",
        100 * mean_a AS "a (%)", 100 * mean_b AS "b (%)", 100 * diff AS "a - b (%)", 100 * seed_spread AS "seed spread (%)",
        CASE WHEN exceeds_seed_spread IS NULL THEN 'unknown (1 seed)' WHEN exceeds_seed_spread THEN 'yes' ELSE 'no' END
            AS "exceeds spread", welch_t AS "Welch t", seeds_a || ' / ' || seeds_b AS seeds
        FROM comparisons ORDER BY benchmark, k, abs(diff) DESC""")
    buckets = _table(con, """PIVOT (SELECT benchmark, bucket, method, 'pass@' || k AS k, 100 * mean AS mean FROM pass_at_k_seeds s
        WHERE step = (SELECT max(step) FROM pass_at_k_seeds t WHERE t.method = s.method AND t.benchmark = s.benchmark)
        AND bucket <> 'all') ON k USING first(mean) ORDER BY benchmark, bucket, method""")
    runs = _table(con, """SELECT r.run_id, r.method, r.seed, r.advantage, r.is_fade, r.trained,
        count(DISTINCT s.step) AS checkpoints, max(s.step) AS last_step, count(*) AS samples
        FROM runs r JOIN samples s USING (run_id) GROUP BY ALL ORDER BY ALL""")
    flagged = _table(con, "SELECT count(*) AS n FROM pass_at_k WHERE too_few_samples")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(inputs.title)}</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{e(inputs.title)}</h1>",
             "<p class='muted'>RLVR advantage functions compared: accuracy (pass@1), coverage (pass@k), how early each "
             "method peaks, and the training dynamics behind it. Generated by fade; self-contained, opens offline.</p>",
             "<nav><a href='#headline'>Headline</a>"
             + "".join(f"<a href='#{e(sid)}'>{e(title.split(':')[0])}</a>" for sid, title, _ in inputs.sections)
             + "<a href='#figures'>Figures</a><a href='#stats'>Statistics</a>"
             "<a href='#runs'>Runs</a><a href='#params'>Params</a><a href='#card'>Data card</a></nav>"]
    parts.append("<h2 id='headline'>Headline: final pass@k (%), mean ± std over seeds</h2>")
    parts.append(_html_table(head))
    n_flag = int(flagged.n.iloc[0]) if not flagged.empty else 0
    parts.append("<p class='note'>pass@k is the unbiased estimator 1 - C(n-c,k)/C(n,k) per problem (n samples, c correct), "
                 "averaged over problems; never max-over-n. † marks pass@k estimated from n &lt; 2k samples on some "
                 f"problem (too few for a stable estimate); {n_flag} per-run pass@k values carry that flag.</p>")
    parts.append("<h3>How early FADE peaks, against the best static baseline</h3>")
    parts.append(_html_table(lead) if not lead.empty else "<p class='muted'>No FADE run, or no trained static baseline.</p>")
    for sid, title, fragment in inputs.sections:
        parts.append(f"<h2 id='{e(sid)}'>{e(title)}</h2>")
        parts.append(fragment)
    parts.append("<h2 id='figures'>Figures</h2><p class='muted'>Lines: mean over seeds; bands: min..max over seeds; "
                 "dashed horizontal lines: untrained baselines.</p>")
    captions = dict(FIGURES)
    for name, _ in FIGURES:
        if name in figures and "png" in figures[name]:
            data = base64.b64encode(Path(figures[name]["png"]).read_bytes()).decode()
            parts.append(f"<figure id='fig-{name}'><img alt='{e(name)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption><b>{e(captions[name])}</b></figcaption></figure>")
        elif name in figures:
            svg = Path(next(iter(figures[name].values()))).read_text()
            parts.append(f"<figure id='fig-{name}'>{svg}<figcaption><b>{e(captions[name])}</b></figcaption></figure>")
        else:
            parts.append(f"<p class='warn'>Figure “{e(captions[name])}” not available: {e(missing.get(name, 'no data'))}.</p>")
    parts.append("<h2 id='stats'>Statistics</h2><h3>Pairwise differences at the last step</h3>")
    parts.append("<p class='muted'>seed_spread = sqrt(sd_a² + sd_b²) (the spread of a single-seed difference); a "
                 "difference that does not exceed it is within seed-to-seed noise. Empty: one seed, so unknown.</p>")
    parts.append(_html_table(cmp_))
    parts.append("<h3>pass@k (%) by difficulty bucket (last step, mean over seeds)</h3>")
    parts.append(_html_table(buckets))
    parts.append("<h2 id='runs'>Runs</h2>")
    parts.append(_html_table(runs))
    for note in inputs.notes:
        parts.append(f"<p class='muted'>{e(note)}</p>")
    parts.append("<h2 id='params'>Params (exact, resolved)</h2>")
    parts.append(f"<pre>{e(inputs.params_yaml or '(not given)')}</pre>")
    parts.append("<h2 id='card'>Data card</h2>")
    parts.append(f"<pre>{e(inputs.data_card or '(no data card found)')}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


# ------------------------------------------------------------------------------------- trackers
def write_tensorboard(con: duckdb.DuckDBPyConnection, out_dir: str | Path) -> Path | None:
    """Every run's per-step training record (+ eval pass@k) as TensorBoard event files under
    ``out_dir/<run_id>/``. Returns out_dir, or None when tensorboard is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    curves = _table(con, "SELECT run_id, metric, step, value FROM train_curves ORDER BY run_id, step")
    evals = _table(con, """SELECT run_id, benchmark, k, step, pass_at_k FROM pass_at_k WHERE bucket = 'all'
                           ORDER BY run_id, step""")
    run_ids = sorted(set(curves.run_id if not curves.empty else []) | set(evals.run_id if not evals.empty else []))
    for run_id in run_ids:
        w = SummaryWriter(log_dir=str(out / re.sub(r"[^A-Za-z0-9._=()+,-]", "_", run_id)))
        if not curves.empty:
            for r in curves[curves.run_id == run_id].itertuples(index=False):
                w.add_scalar(f"train/{r.metric}", float(r.value), int(r.step))
        if not evals.empty:
            for r in evals[evals.run_id == run_id].itertuples(index=False):
                w.add_scalar(f"eval/{r.benchmark}/pass@{r.k}", float(r.pass_at_k), int(r.step))
        w.close()
    return out


def write_wandb_offline(con: duckdb.DuckDBPyConnection, out_dir: str | Path, project: str = "fade") -> Path | None:
    """The same record as W&B offline runs under ``out_dir`` (``wandb sync`` uploads them later).
    Returns out_dir, or None when wandb is not installed."""
    try:
        import wandb  # type: ignore[import-not-found]
    except ImportError:
        return None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    curves = _table(con, "SELECT run_id, method, seed, metric, step, value FROM train_curves ORDER BY run_id, step")
    for run_id, g in curves.groupby("run_id"):
        run = wandb.init(project=project, name=str(run_id), dir=str(out), mode="offline", reinit=True,
                         config={"method": g.method.iloc[0], "seed": int(g.seed.iloc[0])})
        for step, s in g.groupby("step"):
            run.log({f"train/{m}": float(v) for m, v in zip(s.metric, s.value, strict=True)}, step=int(step))
        run.finish()
    return out


# -------------------------------------------------------------------------------------------- main
def build_report(
    results: str | Path,
    out_dir: str | Path,
    inputs: ReportInputs | None = None,
    *,
    tensorboard: bool = True,
    wandb: bool = False,
) -> dict[str, Any]:
    """The report stage: ``results`` (results.duckdb or its folder) -> ``out_dir`` (see the module docstring).

    Returns {"html": path, "figures": {name: {fmt: path}}, "missing": {name: why}, "headline": csv path,
    "tensorboard": path or None, "wandb": path or None}.
    """
    from fade_core.aggregate import open_results

    inputs = inputs or ReportInputs()
    out = Path(out_dir)
    con = open_results(results)
    try:
        figures, missing = make_figures(con, out / "figures", inputs.formats if inputs.formats else ("png",))
        if "png" not in inputs.formats:  # the page embeds PNG: draw them too, beside the asked formats
            extra, _ = make_figures(con, out / "figures", ("png",))
            for k, v in extra.items():
                figures[k] = {**figures.get(k, {}), **v}
        head = headline_table(con)
        head_csv = atomic_write_bytes(out / "tables" / "headline.csv", head.to_csv(index=False).encode())
        page = render_html(con, figures, missing, inputs)
        html_path = atomic_write_bytes(out / "index.html", page.encode())
        tb = write_tensorboard(con, out / "tensorboard") if tensorboard else None
        wb = write_wandb_offline(con, out / "wandb") if wandb else None
        summary = {"html": html_path, "figures": figures, "missing": missing, "headline": head_csv,
                   "tensorboard": tb, "wandb": wb}
        atomic_write_bytes(out / "report.json", json.dumps(
            {"figures": sorted(figures), "missing": missing, "tensorboard": str(tb) if tb else None,
             "wandb": str(wb) if wb else None}, indent=2).encode())
        return summary
    finally:
        con.close()
