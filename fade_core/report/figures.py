"""The report's figures (PNG + SVG), drawn from the aggregated tables.

Evaluation figures read ``pass_at_k``, ``frontier``, ``peak`` and ``problem_stats``; training figures read
``train_curves`` (every run's step record in long form) by the names the trainer writes
(:data:`TRAIN_METRICS`, fade_core.train.record). Seeds are drawn as bands: the line is the mean over seeds,
the band spans min..max over seeds. A figure, or a training panel, whose data the runs did not log is
listed as unavailable rather than drawn empty.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from fade_core.store import atomic_write_bytes  # noqa: E402

TRAIN_PANELS = (
    ("reward_mean", "mean reward"),
    ("loss", "loss"),
    ("kl_ref", "KL to the reference policy"),
    ("approx_kl_old", "KL to the sampling policy (approx.)"),
    ("clip_frac_low", "clipped: ratio < 1 - eps_low"),
    ("clip_frac_high", "clipped: ratio > 1 + eps_high"),
    ("entropy", "mean token entropy (nats)"),
    ("len_mean", "mean completion length (tokens)"),
    ("truncated_frac", "truncated completions (share)"),
    ("grad_norm", "gradient norm (before clipping)"),
    ("zero_var_frac", "groups without signal (all pass / all fail)"),
    ("kept_frac", "rollouts kept by the method's mask"),
)
"""The panels of the training-curves figure: (step-record field, axis title)."""

TRAIN_METRICS = tuple(name for name, _ in TRAIN_PANELS) + ("m_s", "m_f", "rank1_frac", "alpha", "delta")
"""Every training-record column the report draws, by the names the trainer writes (fade_core.train.record)."""

FIGURES = (
    ("training_curves", "Training curves against step, per method (the step record's fields)"),
    ("mass", "Gradient mass against step: sign balance (m_S - m_F) / (m_S + m_F) and total m_S + m_F"),
    ("fade_schedules", "FADE's alpha and delta schedules"),
    ("rank1_fraction", "Rank-1 fraction of the output head's update against step"),
    ("pass_at_k_vs_step", "pass@k against training step, per method"),
    ("frontier", "Accuracy-diversity frontier: pass@1 against pass@k"),
    ("peak_step", "Step of peak pass@1 per method, on the evaluated checkpoints (descriptive: checkpoint "
                  "resolution; the study judges FADE's speed in rollouts to a threshold)"),
    ("distinct_correct", "Distinct correct solutions per problem against step"),
    ("atlas", "The arms' expected gradient-mass profiles over the solve rate p (the FADE paper's atlas)"),
)
TRAINING_FIGURES = ("training_curves", "mass", "fade_schedules", "rank1_fraction")
MISSING_WHY = {
    "training_curves": "no training records", "mass": "no m_S / m_F in the training records",
    "fade_schedules": "no FADE run with alpha / delta in its training record",
    "rank1_fraction": "no rank-1 fraction in the training records",
    "pass_at_k_vs_step": "no evaluated samples", "frontier": "no k > 1 evaluated", "peak_step": "no trained run",
    "distinct_correct": "no evaluated samples", "atlas": "no trained arm of a registered method",
}
FADE_COLOR = "#d62728"
# 18 distinct colours for the non-FADE methods (matplotlib's tab20 without its reds): a study's 14 baselines
# never share one
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
           "#aec7e8", "#98df8a", "#c5b0d5", "#ffbb78", "#c49c94", "#f7b6d2", "#9edae5", "#dbdb8d", "#c7c7c7")


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


def table(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    """``sql``'s rows, or an empty frame when a table it reads does not exist."""
    try:
        return con.execute(sql, list(params)).df()
    except duckdb.CatalogException:
        return pd.DataFrame()


def smoothing_window(num_steps: int) -> int:
    """Steps of the rolling mean of the training curves: about 1/25 of the run (1: none, up to 25 steps)."""
    return max(1, round(num_steps / 25))


def _band(ax: Any, df: pd.DataFrame, x: str, y: str, color: str, label: str, window: int = 1, **kw: Any) -> None:
    """Mean line over seeds and a min..max band; df has columns x, y, seed. ``window`` > 1: each seed's
    series is a centred rolling mean over that many steps first."""
    if window > 1:
        df = df.sort_values(x).copy()
        df[y] = df.groupby("seed")[y].transform(lambda s: s.rolling(window, center=True, min_periods=1).mean())
    g = df.groupby(x)[y].agg(["mean", "min", "max", "count"]).reset_index().sort_values(x)
    ax.plot(g[x], g["mean"], color=color, label=label, lw=1.6, **kw)
    if (g["count"] > 1).any():
        ax.fill_between(g[x], g["min"], g["max"], color=color, alpha=0.18, lw=0)


def save(fig: Any, path_stem: Path, formats: Sequence[str]) -> dict[str, Path]:
    """Write ``fig`` as ``path_stem.<fmt>`` for each format (atomically) and close it."""
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


def curves(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """{metric: its (method, seed, step, value) rows} for the ``names`` the runs logged."""
    logged = table(con, "SELECT DISTINCT metric FROM train_curves")
    have = set(logged.metric) if not logged.empty else set()
    return {name: con.execute("SELECT method, seed, step, value FROM train_curves WHERE metric = ? ORDER BY step",
                              [name]).df() for name in names if name in have}


# ----------------------------------------------------------------------------------- training figures
def fig_training_curves(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> tuple[Any, dict[str, Any]]:
    """The :data:`TRAIN_PANELS` the runs logged, one panel each; a field that is one constant in every run
    and step (e.g. kl_ref with kl_coef = 0) is named instead of drawn flat. Returns (figure or None,
    {"missing": fields not logged, "constant": {field: value}, "window": rolling-mean steps})."""
    cur = curves(con, [name for name, _ in TRAIN_PANELS])
    info: dict[str, Any] = {"missing": [n for n, _ in TRAIN_PANELS if n not in cur or cur[n].empty], "constant": {},
                            "window": 1}
    drawn = []
    for name, title in TRAIN_PANELS:
        if name in info["missing"]:
            continue
        values = cur[name].value
        if values.nunique() == 1:
            info["constant"][name] = float(values.iloc[0])
        else:
            drawn.append((name, title))
    if not drawn:
        return None, info
    info["window"] = window = smoothing_window(int(max(cur[n].step.nunique() for n, _ in drawn)))
    fig, axes = _grid(len(drawn), 2.9, 11.0)
    for ax, (name, title) in zip(axes, drawn, strict=True):
        for m, g in cur[name].groupby("method"):
            _band(ax, g, "step", "value", colors.get(m, "gray"), m, window=window)
        ax.set_title(f"{title}\n[{name}]", fontsize=9.5)
        ax.set_xlabel("step", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig, info


def fig_train_metric(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str], metric: str, ylabel: str) -> Any:
    cur = curves(con, [metric]).get(metric)
    if cur is None or cur.empty:
        return None
    fig, ax = plt.subplots(figsize=(9.0, 3.4))
    for m, g in cur.groupby("method"):
        _band(ax, g, "step", "value", colors.get(m, "gray"), m)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


BALANCED_TOL = 1e-9
"""|sign balance| below this at every logged step: the method's weights sum to zero within each group."""


def fig_mass(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str], info: dict[str, Any] | None = None) -> Any:
    """Sign balance (m_S - m_F)/(m_S + m_F) and total mass m_S + m_F against step: the two numbers that
    say how a method splits its gradient between successes and failures (m_S and m_F drawn apart look
    alike for every method). ``info["balanced"]``: the methods whose balance is 0 (within
    :data:`BALANCED_TOL`) at every step, measured: an advantage that sums to zero within each group (GRPO,
    Dr.GRPO, RLOO, Power, FADE at delta = 1) has m_S = m_F exactly."""
    from fade_core.decomposition import sign_balance

    cur = curves(con, ["m_s", "m_f"])
    if set(cur) != {"m_s", "m_f"}:
        return None
    both = cur["m_s"].merge(cur["m_f"], on=["method", "seed", "step"], suffixes=("_s", "_f"))
    if both.empty:
        return None
    both["balance"] = sign_balance(both.value_s.to_numpy(), both.value_f.to_numpy(), rel_tol=1e-12)
    both["total"] = both.value_s + both.value_f
    if info is not None:
        reach = both.dropna(subset=["balance"]).groupby("method").balance.apply(lambda b: float(np.abs(b).max()))
        info["balanced"] = sorted(str(m) for m, r in reach.items() if r < BALANCED_TOL)
    window = smoothing_window(both.step.nunique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), squeeze=False)
    for ax, col, title in zip(axes[0], ("balance", "total"),
                              ("sign balance (m_S - m_F) / (m_S + m_F): + success-biased, - failure-biased",
                               "total gradient mass m_S + m_F"), strict=True):
        for m, g in both.dropna(subset=[col]).groupby("method"):
            _band(ax, g, "step", col, colors.get(m, "gray"), m, window=window)
        ax.set_title(title, fontsize=9.5)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].axhline(0.0, color="gray", lw=0.8)
    reach = float(np.nanmax(np.abs(both.balance.to_numpy()))) if both.balance.notna().any() else 0.0
    span = min(1.05, max(0.05, 1.15 * reach))  # zoomed to the data: small departures from balance stay visible
    axes[0][0].set_ylim(-span, span)
    _legend(fig, list(axes[0]))
    return fig


def fig_fade_schedules(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str], fade: Sequence[str]) -> Any:
    """FADE's alpha and delta per step, and what drives them: p_hat against the solve rates where alpha leaves its
    cap (1/3) and reaches 1 (0.6), and H_hat against H_target (delta < 1 only below it)."""
    cur = curves(con, ["alpha", "delta", "p_hat", "h_hat", "h_target"])
    cur = {k: v[v.method.isin(fade)] for k, v in cur.items()}
    cur = {k: v for k, v in cur.items() if not v.empty}
    if "alpha" not in cur and "delta" not in cur:
        return None
    drivers = "p_hat" in cur or "h_hat" in cur
    fig, axes = plt.subplots(2 if drivers else 1, 2, figsize=(11, 6.4 if drivers else 3.4), squeeze=False)
    panels = [("alpha", "FADE alpha (dotted: clip bounds)", (1.0, 3.0)),
              ("delta", "FADE delta (dotted: clip bounds)", (0.3, 1.0))]
    if drivers:
        panels += [("p_hat", "p_hat (dotted: alpha leaves 3 at 1/3, reaches 1 at 0.6)", (1 / 3, 0.6)),
                   ("h_hat", "H_hat, nats (dashed: H_target; delta < 1 below it)", ())]
    for ax, (name, title, bounds) in zip(axes.flat, panels, strict=True):
        df = cur.get(name)
        if df is None:
            ax.text(0.5, 0.5, f"{name} not logged", ha="center", transform=ax.transAxes)
            continue
        for m, g in df.groupby("method"):
            _band(ax, g, "step", "value", colors.get(m, FADE_COLOR), m)
            if name == "h_hat" and "h_target" in cur:
                tgt = cur["h_target"][cur["h_target"].method == m].groupby("step").value.mean()
                ax.plot(tgt.index, tgt.values, ls="--", lw=1, color=colors.get(m, FADE_COLOR))
        for b in bounds:
            ax.axhline(b, color="gray", ls=":", lw=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    _legend(fig, list(axes[0]))
    return fig


# --------------------------------------------------------------------------------- evaluation figures
def fig_pass_at_k(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> Any:
    df = table(con, "SELECT benchmark, k, method, seed, step, pass_at_k FROM pass_at_k WHERE bucket = 'all'")
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
    df = table(con, "SELECT * FROM frontier")
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
    df = table(con, "SELECT p.*, r.trained FROM peak p JOIN runs r USING (run_id) WHERE r.trained")
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


def fig_distinct(con: duckdb.DuckDBPyConnection, colors: Mapping[str, str]) -> Any:
    df = table(con, """SELECT p.benchmark, p.method, p.seed, p.step, avg(p.distinct_correct) AS distinct_correct
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


# ------------------------------------------------------------------------------------------ the atlas
def atlas_entries(arms: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[Any]:
    """Atlas curves of the arms, given as (label, method, params): one per arm; a FADE arm whose alpha and
    delta are not pinned is stateful and appears at the atlas's three representative states."""
    from fade_core import advantages, atlas

    fade_states = [e for e in atlas.DEFAULT_ENTRIES if e.method == "fade"]
    contexts = {e.method: e.context for e in atlas.DEFAULT_ENTRIES if e.context}
    out = []
    for label, method, params in arms:
        if method not in advantages.names():
            continue
        if method == "fade" and not {"fixed_alpha", "fixed_delta"} <= set(params):
            for state in fade_states:
                pinned = {**dict(params), **state.params}
                out.append(atlas.AtlasEntry("fade", pinned, f"{label}: {state.label.removeprefix('FADE ')}", "arms"))
            continue
        out.append(atlas.AtlasEntry(method, dict(params), label, "arms", context=contexts.get(method, {})))
    return out


def draw_atlas(arms: Sequence[tuple[str, str, Mapping[str, Any]]], group_size: int, out_dir: Path,
               formats: Sequence[str]) -> dict[str, Path] | None:
    """The atlas figure of the arms (fade_core.atlas) as ``out_dir/atlas.<fmt>``; None without an arm."""
    from fade_core import atlas

    entries = atlas_entries(arms)
    if not entries:
        return None
    tab = atlas.build_table(entries, group_size, atlas.default_grid(101))
    paths = atlas.render(tab, out_dir, stem="atlas", formats=formats, entries=entries, page_width=True)
    return {p.suffix.lstrip("."): p for p in paths}


# -------------------------------------------------------------------------------------------- all
def make_figures(con: duckdb.DuckDBPyConnection, out_dir: str | Path, formats: Sequence[str] = ("png", "svg"), *,
                 arms: Sequence[tuple[str, str, Mapping[str, Any]]] = (), group_size: int | None = None,
                 ) -> tuple[dict[str, dict[str, Path]], dict[str, str], dict[str, Any]]:
    """Draw every figure of :data:`FIGURES` into ``out_dir/<name>.<fmt>``.

    arms: (label, method, params) of the trained arms, and group_size, for the atlas. Returns
    ({name: {fmt: path}}, {name: why it is missing}, the training panels' details: {"missing": fields not
    logged, "constant": {field: its one value}, "window": rolling-mean steps}).
    """
    out_dir = Path(out_dir)
    runs = table(con, "SELECT method, bool_or(is_fade) AS is_fade FROM runs GROUP BY method")
    fade = runs[runs.is_fade].method.tolist() if not runs.empty else []
    methods = set(runs.method) if not runs.empty else set()
    logged = table(con, "SELECT DISTINCT method FROM train_curves")
    methods |= set(logged.method) if not logged.empty else set()
    evaluated = table(con, "SELECT DISTINCT method FROM pass_at_k")  # the uniform sampler's rows have no run
    methods |= set(evaluated.method) if not evaluated.empty else set()
    colors = method_colors(methods, fade)
    details: dict[str, Any] = {"missing": [], "constant": {}, "window": 1}

    def training() -> Any:
        fig, info = fig_training_curves(con, colors)
        details.update(info)
        return fig

    builders = {
        "training_curves": training,
        "mass": lambda: fig_mass(con, colors, details),
        "fade_schedules": lambda: fig_fade_schedules(con, colors, fade),
        "rank1_fraction": lambda: fig_train_metric(con, colors, "rank1_frac", "rank-1 fraction of dW (head)"),
        "pass_at_k_vs_step": lambda: fig_pass_at_k(con, colors),
        "frontier": lambda: fig_frontier(con, colors),
        "peak_step": lambda: fig_peak_step(con, colors),
        "distinct_correct": lambda: fig_distinct(con, colors),
    }
    made: dict[str, dict[str, Path]] = {}
    missing: dict[str, str] = {}
    for name, _caption in FIGURES:
        if name == "atlas":
            drawn = draw_atlas(arms, group_size or 16, out_dir, formats) if arms else None
            if drawn:
                made[name] = drawn
            else:
                missing[name] = MISSING_WHY[name]
            continue
        fig = builders[name]()
        if fig is None:
            missing[name] = MISSING_WHY[name]
            continue
        made[name] = save(fig, out_dir / name, formats)
    return made, missing, details

