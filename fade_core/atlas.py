"""The gradient-mass atlas: every advantage method on the FADE paper's three axes, in one table and figure.

For each method (at the paper's settings) :func:`fade_core.decomposition.profile` gives the exact
expected positive and negative gradient mass m_S(p), m_F(p) at group size G over a grid of solve
rates p. The atlas stacks these profiles into one table (``atlas.csv``, one row per method and p) and
draws one figure with a row per method family and three panels per row:

    sign        (m_S - m_F) / (m_S + m_F): +1 all weight on successes, -1 all on failures, 0 balanced
    difficulty  total mass m_S + m_F, normalised to its peak, with the peak marked (where over p
                a method spends its gradient)
    scale       total mass m_S + m_F in absolute units (1/G-normalised advantage per rollout)

FADE is stateful, so it appears at representative (alpha, delta) states of its schedule (pinned with
its ``fixed_alpha`` / ``fixed_delta`` switches): "start" (p_hat = 0.5 -> alpha = 1.5, delta = 1),
"explore" on hard batches (entropy above target: delta = 1; p_hat <= 1/3 -> alpha = 3) and "exploit"
(entropy below target: delta = 0.6 < 1; solve rates up, p_hat ~ 0.55 -> alpha ~ 1.2).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fade_core import advantages as adv_lib
from fade_core import decomposition

CORE = "core"
OTHER = "other"
CUSTOM = "custom"
GROUP_TITLES = {
    CORE: "The FADE paper's comparison",
    OTHER: "Other baselines",
    CUSTOM: "Requested settings",
    "arms": "The configured arms (pipeline.arms)",
}


# Okabe & Ito's colour-blind-safe palette (yellow darkened for contrast on white).
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE, GREY = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#C9B200", "#0072B2", "#D55E00", "#CC79A7", "#7F7F7F")
PALETTE = [BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE, GREY]
DASHES: list[Any] = ["-", (0, (5, 2)), (0, (1.2, 1.2)), (0, (6, 1.5, 1.5, 1.5))]


@dataclass(frozen=True)
class AtlasEntry:
    """One curve of the atlas: a method at given parameters, its label, its row of the figure and,
    optionally, its line style (``color``, ``linestyle``, ``linewidth``; defaults cycle the palette)."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    group: str = OTHER
    context: dict[str, float] = field(default_factory=dict)
    style: dict[str, Any] = field(default_factory=dict)

    def display(self) -> str:
        if self.label:
            return self.label
        if not self.params:
            return self.method
        return self.method + "(" + ",".join(f"{k}={v}" for k, v in self.params.items()) + ")"


def _st(color: str, dash: Any = "-", width: float = 1.9) -> dict[str, Any]:
    return {"color": color, "linestyle": dash, "linewidth": width}


DEFAULT_ENTRIES: tuple[AtlasEntry, ...] = (
    AtlasEntry("reinforce", {}, "REINFORCE", CORE, style=_st(GREY)),
    AtlasEntry("grpo", {}, "GRPO", CORE, style=_st(BLACK)),
    AtlasEntry("dr_grpo", {}, "Dr.GRPO", CORE, style=_st(SKY)),
    AtlasEntry("power", {"alpha": 2}, "Power α=2", CORE, style=_st(ORANGE, "-", 2.2)),
    AtlasEntry("power_asym", {"alpha": 2, "delta": 2}, "Power-asym (2,2)", CORE, style=_st(ORANGE, DASHES[1])),
    AtlasEntry("asym_grpo", {"delta": 0.5}, "AsymGRPO δ=0.5", CORE, style=_st(VERMILLION)),
    AtlasEntry("asym_grpo", {"delta": 2}, "AsymGRPO δ=2", CORE, style=_st(PURPLE)),
    AtlasEntry("fade", {"fixed_alpha": 1.5, "fixed_delta": 1.0}, "FADE start (α=1.5, δ=1)", CORE,
               style=_st(BLUE, "-", 3.0)),
    AtlasEntry("fade", {"fixed_alpha": 3.0, "fixed_delta": 1.0}, "FADE explore (α=3, δ=1)", CORE,
               style=_st(GREEN, (0, (4, 1.5)), 3.0)),
    AtlasEntry("fade", {"fixed_alpha": 1.2, "fixed_delta": 0.6}, "FADE exploit (α=1.2, δ=0.6)", CORE,
               style=_st(BLUE, (0, (1, 1)), 3.0)),
    AtlasEntry("rloo", {}, "RLOO", OTHER, style=_st(BLACK)),
    AtlasEntry("dapo", {}, "DAPO (= GRPO on kept groups)", OTHER, style=_st(YELLOW, DASHES[1])),
    AtlasEntry("codapo", {}, "CoDaPO (confidence 1)", OTHER, {"mean_logprob": 0.0}, style=_st(GREY)),
    AtlasEntry("w_reinforce", {"lam": 0.1}, "W-REINFORCE λ=0.1", OTHER, style=_st(SKY)),
    AtlasEntry("psr", {}, "PSR", OTHER, style=_st(GREEN)),
    AtlasEntry("nsr", {}, "NSR", OTHER, style=_st(VERMILLION)),
    AtlasEntry("passk", {"k": 4}, "Pass@k Training k=4", OTHER, style=_st(BLUE)),
    AtlasEntry("pkpo", {"k": 4}, "PKPO k=4", OTHER, style=_st(PURPLE)),
    AtlasEntry("maxpo", {"k": 4}, "MaxPO k=4", OTHER, style=_st(ORANGE)),
    AtlasEntry("bbg", {"k": 16, "tau": 0.01}, "BBG k=16 (provisional)", OTHER, style=_st(BLACK, DASHES[1])),
)


def default_grid(points: int = 201) -> np.ndarray:
    """Solve rates 0, 1/(points-1), ..., 1."""
    return np.linspace(0.0, 1.0, points)


# ------------------------------------------------------------------------------------ choosing methods
_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split 'a,b(x=1,y=2),c' on commas outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _parse_value(text: str) -> Any:
    text = text.strip()
    if text.lower() in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_methods(spec: str | Sequence[str] | None) -> list[AtlasEntry]:
    """Entries for a method list such as ``"grpo,power,asym_grpo(delta=0.25)"``.

    A bare name picks every default entry of that method (e.g. both AsymGRPO settings), or the method
    at its defaults when the atlas has none; ``name(key=value,...)`` gives explicit parameters.
    None or empty: every default entry. Unknown names or parameters raise ValueError.
    """
    if spec is None:
        return list(DEFAULT_ENTRIES)
    items = _split_top_level(spec) if isinstance(spec, str) else [s.strip() for s in spec if s.strip()]
    if not items:
        return list(DEFAULT_ENTRIES)
    entries: list[AtlasEntry] = []
    for item in items:
        m = _SPEC.match(item)
        if not m:
            raise ValueError(f"bad method spec {item!r}; use NAME or NAME(key=value,...), e.g. power(alpha=3)")
        name, args = m.group(1), m.group(2)
        adv_lib.method(name)  # unknown name -> ValueError listing the valid ones
        if args is None:
            picked = [e for e in DEFAULT_ENTRIES if e.method == name]
            entries += picked or [AtlasEntry(name, {}, name, CUSTOM)]
            continue
        params: dict[str, Any] = {}
        for kv in _split_top_level(args):
            if "=" not in kv:
                raise ValueError(f"bad parameter {kv!r} in {item!r}; use key=value")
            key, value = kv.split("=", 1)
            params[key.strip()] = _parse_value(value)
        adv = adv_lib.build(name, **params)  # validates now, naming the bad parameter
        entries.append(AtlasEntry(name, params, adv.label if params else name, CUSTOM))
    return entries


# ------------------------------------------------------------------------------------ the table
TABLE_COLUMNS = ["label", "method", "params", "group", "group_size", "p", "m_s", "m_f", "total", "ratio",
                 "balance", "peak_p", "peak_mass"]


def build_table(entries: Sequence[AtlasEntry] | None = None, group_size: int = 16,
                ps: Sequence[float] | np.ndarray | None = None) -> pd.DataFrame:
    """Every entry's exact profile over ``ps`` (default :func:`default_grid`), stacked.

    Columns: ``TABLE_COLUMNS`` (ratio = m_S/m_F, inf where m_F = 0; balance = (m_S - m_F)/(m_S + m_F)).
    """
    entries = list(DEFAULT_ENTRIES if entries is None else entries)
    if not entries:
        raise ValueError("the atlas needs at least one method")
    labels = [e.display() for e in entries]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ValueError(f"atlas labels must be unique; repeated: {dupes}")
    grid = default_grid() if ps is None else np.asarray(ps, dtype=np.float64)
    frames = []
    for entry in entries:
        prof = decomposition.profile(entry.method, group_size, grid, context=entry.context or None,
                                     label=entry.display(), **entry.params)
        frame = prof.to_frame()
        frame["group"] = entry.group
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)[TABLE_COLUMNS]


# ------------------------------------------------------------------------------------ the figure
def _styles(entries: Sequence[AtlasEntry]) -> dict[str, dict[str, Any]]:
    """Line style per label: an entry's own style, else the next unused colour (then dash) of the palette."""
    styles: dict[str, dict[str, Any]] = {}
    taken = {(e.style.get("color"), str(e.style.get("linestyle", "-"))) for e in entries if e.style}
    cycle = ((c, d) for d in DASHES for c in PALETTE if (c, str(d)) not in taken)
    for e in entries:
        if e.style:
            styles[e.display()] = {"linewidth": 1.9, "linestyle": "-", **e.style}
        else:
            color, dash = next(cycle, (GREY, ":"))
            styles[e.display()] = _st(color, dash)
    return styles


def _shared_curves(curves: dict[str, np.ndarray]) -> list[list[str]]:
    """Groups (of 2 or more labels) whose curves coincide wherever both are defined (most of the grid)."""
    groups: list[list[str]] = []
    for lab, y in curves.items():
        for g in groups:
            ref = curves[g[0]]
            both = np.isfinite(ref) & np.isfinite(y)
            if both.sum() >= 0.5 * len(y) and np.allclose(ref[both], y[both], rtol=0, atol=1e-6):
                g.append(lab)
                break
        else:
            groups.append([lab])
    return [g for g in groups if len(g) > 1]


def _short(label: str) -> str:
    """A label without its spaced parenthetical details: 'FADE start (α=1.5, δ=1)' -> 'FADE start'."""
    return re.sub(r"\s*\([^)]*\s[^)]*\)", "", label).strip()


def render(table: pd.DataFrame, out_dir: str | Path, stem: str = "atlas",
           formats: Sequence[str] = ("png", "svg"), entries: Sequence[AtlasEntry] | None = None,
           page_width: bool = False) -> list[Path]:
    """Draw the atlas figure from a :func:`build_table` table; returns the written files.

    ``entries`` supply line styles by label (default: the styles of ``DEFAULT_ENTRIES``, others cycle).
    ``page_width``: drawn for a page column (the report's ~1150 px): 11 inches wide, larger type, the legend
    under the panels, so that its labels stay readable when the page scales the image down (the default
    16-inch figure with the legend beside it shrinks its text to ~9 px there).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing = sorted(set(TABLE_COLUMNS) - set(table.columns))
    if missing:
        raise ValueError(f"atlas table lacks columns {missing}")
    if table.empty:
        raise ValueError("atlas table is empty")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    group_size = int(table["group_size"].iloc[0])
    groups = [g for g in (CORE, OTHER, CUSTOM) if g in set(table["group"])]
    groups += sorted(set(table["group"]) - set(groups))
    known = {e.display(): e for e in (entries or DEFAULT_ENTRIES)}
    labels_all = list(dict.fromkeys(table["label"]))
    styles = _styles([known.get(lab, AtlasEntry("", label=lab)) for lab in labels_all])

    rc = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10.5, "legend.fontsize": 9.5,
          "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False, "axes.spines.right": False,
          "svg.fonttype": "none", "font.family": "DejaVu Sans", "mathtext.fontset": "dejavusans"}
    if page_width:
        rc.update({"font.size": 11, "axes.titlesize": 11.5, "axes.labelsize": 11, "legend.fontsize": 11,
                   "xtick.labelsize": 10, "ytick.labelsize": 10})
    width, height = (11.0, 4.9) if page_width else (16.0, 4.4)
    with plt.rc_context(rc):
        fig, axes = plt.subplots(len(groups), 3, figsize=(width, height * len(groups)), squeeze=False,
                                 gridspec_kw={"wspace": 0.42 if page_width else 0.3,
                                              "hspace": 0.75 if page_width else 0.45})
        for row, group in enumerate(groups):
            sub = table[table["group"] == group]
            labels = list(dict.fromkeys(sub["label"]))
            ax_sign, ax_diff, ax_scale = axes[row]
            handles, balances = [], {}
            for lab in labels:
                d = sub[sub["label"] == lab].sort_values("p")
                st = styles[lab]
                p = d["p"].to_numpy()
                total = d["total"].to_numpy()
                balances[lab] = d["balance"].to_numpy(dtype=np.float64)
                (h,) = ax_sign.plot(p, balances[lab], label=lab, **st)
                peak = float(np.nanmax(total)) if np.any(total > 0) else math.nan
                ax_diff.plot(p, total / peak if peak > 0 else np.full_like(total, np.nan), **st)
                if peak > 0:
                    ax_diff.plot([float(d["peak_p"].iloc[0])], [1.0], marker="o", markersize=7, color=st["color"],
                                 markeredgecolor="white", markeredgewidth=1.0, zorder=5, clip_on=False,
                                 linestyle="none")
                ax_scale.plot(p, total, **st)
                handles.append(h)
            _annotate_shared(ax_sign, balances, p, width=30 if page_width else 44)

            ax_sign.axhline(0.0, color="#BBBBBB", linewidth=0.8, zorder=0)
            ax_sign.set_ylim(-1.1, 1.1)
            ax_sign.set_yticks([-1, -0.5, 0, 0.5, 1])
            ax_sign.set_ylabel("sign balance  $(m_S - m_F)\\,/\\,(m_S + m_F)$\n"
                               "$\\leftarrow$ failure-biased      success-biased $\\rightarrow$")
            ax_diff.set_ylim(0, 1.1)
            ax_diff.set_ylabel("total mass / its peak over $p$")
            ax_scale.set_ylabel("total mass  $m_S + m_F$")
            ax_scale.set_ylim(bottom=0)
            for ax in axes[row]:
                ax.set_xlim(0, 1)
                ax.set_xlabel("solve rate  $p$")
                ax.grid(True, color="#EEEEEE", linewidth=0.8)
                ax.set_axisbelow(True)
            title = GROUP_TITLES.get(group, group)
            if page_width:  # short titles over narrow panels (the report names the group)
                ax_sign.set_title("Sign", loc="left", fontweight="bold")
                ax_diff.set_title("Difficulty: peak (●)", loc="left", fontweight="bold")
                ax_scale.set_title("Scale: total mass", loc="left", fontweight="bold")
                ax_diff.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False,
                               ncol=min(3, len(handles)), handlelength=2.6, columnspacing=1.6)
            else:
                ax_sign.set_title(f"Sign  ·  {title}", loc="left", fontweight="bold")
                ax_diff.set_title("Difficulty: where the mass peaks (●)", loc="left", fontweight="bold")
                ax_scale.set_title("Scale: total gradient mass", loc="left", fontweight="bold")
                ax_scale.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.04, 1.0), frameon=False,
                                handlelength=3.4, borderaxespad=0.0, labelspacing=0.55)
        fig.subplots_adjust(top=1 - (1.15 if page_width else 0.75) / fig.get_figheight())
        fig.suptitle(
            "Gradient-mass atlas: exact expected positive ($m_S$) and negative ($m_F$) gradient mass "
            + ("\n" if page_width else "")
            + f"per group of G = {group_size} rollouts, over c ~ Binomial(G, p) successes",
            x=0.07, ha="left", y=1 - 0.2 / fig.get_figheight(), fontsize=12.5, fontweight="bold",
        )
        paths = []
        for fmt in formats:
            path = out_dir / f"{stem}.{fmt}"
            fig.savefig(path, dpi=200 if fmt == "png" else None, bbox_inches="tight")
            paths.append(path)
        plt.close(fig)
    return paths


def _annotate_shared(ax: Any, curves: dict[str, np.ndarray], p: np.ndarray, width: int = 44) -> None:
    """Write the labels of coinciding sign curves next to the curve they share (they hide each other),
    wrapped at ``width`` characters."""
    for members in _shared_curves(curves):
        y = curves[members[0]]
        finite = np.flatnonzero(np.isfinite(y))
        if finite.size == 0:
            continue
        i = int(finite[finite.size // 20])
        y0 = float(y[i])
        above = y0 < 0.85
        text = textwrap.fill(", ".join(_short(m) for m in members), width=width)
        ax.annotate(
            f"coincide: {text}" if len(members) > 2 else text.replace(", ", " = "),
            xy=(max(p[i], 0.03), y0), xytext=(0, 4 if above else -4), textcoords="offset points",
            ha="left", va="bottom" if above else "top", fontsize=8, color="#333333", linespacing=1.1,
            bbox={"boxstyle": "round,pad=0.12", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
        )


def write_atlas(out_dir: str | Path = "atlas", methods: str | Sequence[str] | None = None,
                group_size: int = 16, points: int = 201) -> dict[str, Path]:
    """Build the table for ``methods`` (see :func:`parse_methods`), write atlas.csv, atlas.png, atlas.svg."""
    return write_atlas_entries(out_dir, parse_methods(methods), group_size=group_size, points=points)


def write_atlas_entries(out_dir: str | Path, entries: Sequence[AtlasEntry], group_size: int = 16,
                        points: int = 201) -> dict[str, Path]:
    """Write ``atlas.csv`` (:data:`TABLE_COLUMNS`), ``atlas.png`` and ``atlas.svg`` for ``entries``."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group size must be an integer >= 1, got {group_size!r}")
    if points < 3:
        raise ValueError(f"the p grid needs at least 3 points, got {points}")
    table = build_table(entries, group_size, default_grid(points))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "atlas.csv"
    table.to_csv(csv_path, index=False)
    png, svg = render(table, out, entries=entries)
    return {"csv": csv_path, "png": png, "svg": svg}
