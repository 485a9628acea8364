"""The report page: one self-contained HTML string (figures embedded as base64 PNG, no external resource).

Sections, in reading order: headline (pass@k with confidence intervals), FADE's lead, extra sections
(the study's claims), the arms and what differs between them, training curves, evaluation figures, the
atlas, example completions, statistics (pairwise differences), runs and wall times, provenance, the
params and the data card. Everything here formats what :func:`fade_core.report.build_report` computed;
every piece of text from the inputs is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fade_core.report import markdown
from fade_core.report.arms import ArmSummary
from fade_core.report.examples import Example
from fade_core.report.figures import FIGURES
from fade_core.report.provenance import Provenance, as_rows, duration, durations
from fade_core.report.schedule import ScheduleCheck, schedule_html

e = html.escape

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;margin:24px auto;padding:0 16px;
color:#222;line-height:1.45}
h1{font-size:26px;margin-bottom:4px}h2{font-size:20px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:34px}
h3{font-size:16px;margin-bottom:6px}.muted{color:#666}.note{background:#f6f8fa;border-left:3px solid #888;padding:8px 12px}
table.tbl{border-collapse:collapse;font-size:13px;margin:8px 0}table.tbl th,table.tbl td{padding:4px 10px;
border-bottom:1px solid #e5e5e5;text-align:right;vertical-align:top}table.tbl th{background:#f3f3f3}
table.tbl td:first-child,table.tbl th:first-child{text-align:left}table.tbl td.text,table.tbl th.text{text-align:left}
figure{margin:14px 0 22px}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:13px;color:#555}pre{background:#f6f8fa;padding:10px;font-size:12px;overflow:auto;max-height:420px;
white-space:pre-wrap;word-break:break-word}
nav a{margin-right:14px;font-size:14px}.warn{color:#a15c00}.scroll{overflow-x:auto}
table.claims{border-collapse:collapse;font-size:12.5px}table.claims td,table.claims th{padding:4px 8px;
border-bottom:1px solid #e5e5e5;text-align:left;vertical-align:top}table.claims th{background:#f3f3f3}
.verdict-agrees{color:#1a7f37}.verdict-disagrees{color:#cf222e}.verdict-inconclusive{color:#9a6700}.verdict-passes{color:#1a7f37}.verdict-FAILS{color:#cf222e}
.ex{border-left:4px solid #ccc;margin:8px 0;padding:2px 10px}.ex.pass{border-color:#1a7f37}.ex.fail{border-color:#cf222e}
.ex pre{max-height:220px;margin:4px 0}.exhead{font-size:13px}.prompt{font-size:12px;color:#555}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}.card h1{font-size:18px}.card h2{font-size:16px}
"""


@dataclass
class PageContent:
    """Everything the page shows, computed by build_report (tables already formatted for display)."""

    title: str
    headline: pd.DataFrame
    ci_note: str = ""
    flagged: int = 0
    lead: pd.DataFrame = field(default_factory=pd.DataFrame)
    sections: Sequence[tuple[str, str, str]] = ()
    schedule: Sequence[ScheduleCheck] = ()
    arms: Sequence[ArmSummary] = ()
    differing: pd.DataFrame = field(default_factory=pd.DataFrame)
    figures: Mapping[str, Mapping[str, Path]] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)
    train_panels: Mapping[str, Any] = field(default_factory=dict)
    examples: Sequence[Example] = ()
    comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)
    key_comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)
    buckets: pd.DataFrame = field(default_factory=pd.DataFrame)
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    wall: pd.DataFrame = field(default_factory=pd.DataFrame)
    provenance: Provenance | None = None
    tensorboard_dir: str | None = None
    params_yaml: str = ""
    data_card: str = ""
    notes: Sequence[str] = ()


def html_table(df: pd.DataFrame | None, text_columns: Sequence[str] = (), empty: str = "(no rows)") -> str:
    """``df`` as an HTML table (every cell escaped; cells are shown as they are: format them first)."""
    if df is None or df.empty:
        return f"<p class='muted'>{e(empty)}</p>"
    head = "".join(f"<th class='text'>{e(str(c))}</th>" if c in text_columns or i == 0 else f"<th>{e(str(c))}</th>"
                   for i, c in enumerate(df.columns))
    rows = []
    for values in df.itertuples(index=False):
        cells = []
        for i, (c, v) in enumerate(zip(df.columns, values, strict=True)):
            text = "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
            cls = " class='text'" if c in text_columns or i == 0 else ""
            cells.append(f"<td{cls}>{e(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='scroll'><table class='tbl'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def _figure(name: str, files: Mapping[str, Path], caption: str, extra: str = "") -> str:
    if "png" in files:
        data = base64.b64encode(Path(files["png"]).read_bytes()).decode()
        body = f"<img alt='{e(name)}' src='data:image/png;base64,{data}'>"
    else:
        body = Path(next(iter(files.values()))).read_text()
    return f"<figure id='fig-{e(name)}'>{body}<figcaption><b>{e(caption)}</b>{extra}</figcaption></figure>"


def _figures(c: PageContent, names: Sequence[str], captions: Mapping[str, str]) -> list[str]:
    parts = []
    for name in names:
        if name in c.figures:
            extra = ""
            if name == "training_curves":
                window = c.train_panels.get("window", 1)
                extra = (f" Each seed's curve is a centred rolling mean over {window} steps." if window > 1
                         else " Raw per-step values.")
                if constant := c.train_panels.get("constant"):
                    extra += " The same value in every run and step, not drawn: " + ", ".join(
                        f"{k} = {v:g}" for k, v in constant.items()) + "."
                if missing := c.train_panels.get("missing"):
                    extra += " Not logged by these runs: " + ", ".join(missing) + "."
            if name == "mass" and (balanced := c.train_panels.get("balanced")):
                extra = (" Sign balance 0 at every step (measured, not missing) for " + ", ".join(balanced)
                         + ": their advantages sum to zero within each group, so m_S = m_F exactly; it moves only "
                         "for sign-asymmetric weights (AsymGRPO with delta != 1, FADE once its delta falls below 1).")
            parts.append(_figure(name, c.figures[name], captions[name], e(extra)))
        else:
            parts.append(f"<p class='warn'>Figure “{e(captions[name])}” not available: "
                         f"{e(c.missing.get(name, 'no data'))}.</p>")
    return parts


def _arms(c: PageContent) -> list[str]:
    if not c.arms:
        return ["<p class='muted'>No runs.</p>"]
    rows = []
    for a in c.arms:
        params = ", ".join((f"<b>{e(n)}={e(_value(v))}</b>" if given else f"{e(n)}={e(_value(v))}")
                           for n, v, given in sorted(a.params, key=lambda p: not p[2])) or "none"
        hints = ", ".join(f"{e(k)}={e(_value(v))}" for k, v in a.hints.items()) or "none"
        seeds = ", ".join(str(s) for s in a.seeds)
        rows.append(f"<tr><td class='text'><b>{e(a.label)}</b></td><td class='text'>{e(a.method)}</td>"
                    f"<td class='text'>{e(a.summary)}</td><td class='text'>{params if a.trained else 'n/a'}</td>"
                    f"<td class='text'>{hints if a.trained else 'n/a'}</td><td>{e(seeds)}</td></tr>")
    out = ["<div class='scroll'><table class='tbl'><thead><tr><th class='text'>arm</th><th class='text'>method</th>"
           "<th class='text'>what it does</th><th class='text'>parameters (bold: set by the arm's config; "
           "the rest are defaults)</th><th class='text'>trainer settings the method brings</th><th>seeds</th>"
           "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"]
    out.append("<h3>Config keys that differ between the arms</h3>")
    if c.differing.empty:
        out.append("<p class='muted'>None besides the method and its parameters (above): every other key of the "
                   "runs' configs is the same in every arm (seeds, run names and folders aside).</p>")
    else:
        out.append(html_table(c.differing, text_columns=list(c.differing.columns)))
    return out


def _value(v: Any) -> str:
    if v is None:
        return "null"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _examples(examples: Sequence[Example]) -> list[str]:
    if not examples:
        return ["<p class='muted'>No completions to show (no evaluated samples and no <code>examples</code> "
                "in the training records).</p>"]
    out = ["<p class='muted'>Per method (its lowest seed) and step: completions that passed (green) and failed "
           "(red), on a problem where the checkpoint did both when there is one. Evaluation: the checkpoint's "
           "samples on the test problems; training: the rollouts the step record kept (field "
           "<code>examples</code>).</p>"]
    groups: dict[tuple[str, str], list[Example]] = {}
    for ex in examples:
        groups.setdefault((ex.method, ex.source), []).append(ex)
    for (method, source), items in sorted(groups.items()):
        steps = sorted({x.step for x in items})
        out.append(f"<details><summary>{e(method)}: {e(source)} rollouts at step "
                   f"{e(', '.join(str(s) for s in steps))}</summary>")
        shown_prompts: set[tuple[int, str]] = set()
        for x in items:
            verdict = "passed" if x.passed else f"failed ({x.status})" if x.status else "failed"
            reward = "n/a" if math.isnan(x.reward) else f"{x.reward:.3g}"
            out.append(f"<div class='ex {'pass' if x.passed else 'fail'}'><div class='exhead'>step {x.step} · "
                       f"seed {x.seed} · {e(x.problem_id)} · <b>{e(verdict)}</b> · reward {e(reward)}</div>")
            if x.prompt and (x.step, x.problem_id) not in shown_prompts:
                shown_prompts.add((x.step, x.problem_id))
                out.append(f"<div class='prompt'>prompt: {e(x.prompt)}</div>")
            out.append(f"<pre>{e(x.completion) or '(empty completion)'}</pre></div>")
        out.append("</details>")
    return out


def _provenance(c: PageContent) -> list[str]:
    out = []
    rows: list[tuple[str, str]] = []
    if c.provenance is not None:
        extra: dict[str, str] = {}
        if not c.wall.empty:
            total = float(c.wall.train_seconds.sum())
            extra["training wall time"] = (f"{duration(total)} over {len(c.wall)} runs (sum of every step's time; "
                                           "set-up, checkpoints and evaluation not included)")
        rows = as_rows(c.provenance, extra)
    links = list(c.provenance.links) if c.provenance else []
    if c.tensorboard_dir:
        links.append(("TensorBoard (live training logs)", c.tensorboard_dir))
    cells = "".join(f"<tr><td class='text'>{e(k)}</td><td class='text'>{e(v)}</td></tr>" for k, v in rows)
    for label, target in links:
        if target.startswith(("http://", "https://")):
            link = f"<a href=\"{e(target, quote=True)}\">{e(target)}</a>"
        else:
            uri = Path(target).resolve().as_uri()
            link = f"<a href=\"{e(uri, quote=True)}\">{e(target)}</a>"
            if label.startswith("TensorBoard"):
                link += f" (view: <code>tensorboard --logdir {e(str(Path(target).resolve()))}</code>)"
        cells += f"<tr><td class='text'>{e(label)}</td><td class='text'>{link}</td></tr>"
    out.append("<div class='scroll'><table class='tbl'><tbody>" + cells + "</tbody></table></div>" if cells
               else "<p class='muted'>(no provenance recorded)</p>")
    for note in c.provenance.notes if c.provenance else ():
        out.append(f"<p class='muted'>{e(note)}</p>")
    return out


def render(c: PageContent) -> str:
    """The page (see the module docstring)."""
    captions = dict(FIGURES)
    nav = [("headline", "Headline")] + [(sid, title.split(":")[0]) for sid, title, _ in c.sections] + [
        ("arms", "Arms"), ("training", "Training"), ("evaluation", "Evaluation"), ("atlas", "Atlas"),
        ("examples", "Examples"), ("stats", "Statistics"), ("runs", "Runs"), ("provenance", "Provenance"),
        ("params", "Params"), ("card", "Data card")]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(c.title)}</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{e(c.title)}</h1>",
             "<p class='muted'>RLVR advantage functions compared: accuracy (pass@1), coverage (pass@k), how early each "
             "method peaks, and the training dynamics behind it. Generated by fade; self-contained, opens offline.</p>",
             "<nav>" + "".join(f"<a href='#{e(sid)}'>{e(label)}</a>" for sid, label in nav) + "</nav>"]

    parts.append("<h2 id='headline'>Headline: final pass@k (%) with 95% confidence intervals</h2>")
    parts.append(html_table(c.headline, text_columns=["benchmark", "method", "CI over"]))
    parts.append(f"<p class='note'>{e(c.ci_note)} pass@k is the unbiased estimator 1 - C(n-c,k)/C(n,k) per "
                 "problem (n samples, c correct), averaged over problems; never max-over-n. After the interval: each "
                 "seed's value. † (on a cell, or on a column's header when every cell has it) marks pass@k estimated "
                 "from n &lt; 2k samples on some problem: still unbiased, but noisy (at n = k a problem's estimate is 0 "
                 f"or 1, whether any of its n samples passed); {c.flagged} per-run pass@k values carry that flag."
                 + (" <b>uniform</b> is no model: a sampler that picks uniformly among a countdown problem's candidate "
                    "expressions, its pass@k exact (1 - (1 - share correct)^k), the floor a model has to beat."
                    if not c.headline.empty and "uniform" in set(c.headline["method"]) else "") + "</p>")
    if c.schedule:
        parts.append("<h3 id='schedule'>FADE's schedule: did alpha and delta adapt?</h3>")
        parts.append(schedule_html(c.schedule, html_table))
    parts.append("<h3>How early FADE peaks, against the best static baseline (descriptive: peaks on the evaluated "
                 "checkpoints; the study judges speed in rollouts to a threshold)</h3>")
    parts.append(html_table(c.lead, text_columns=["benchmark", "FADE method", "best static baseline", "CI over"],
                            empty="No FADE run, or no trained static baseline."))
    if not c.lead.empty:
        parts.append("<p class='muted'>Steps earlier = baseline peak step - FADE peak step (positive: FADE peaks "
                     "first); peak gain = FADE peak pass@1 - baseline peak pass@1, in percentage points. With one "
                     "seed per method the intervals come from recomputing both pass@1 curves on resampled problems; "
                     "with several, from the per-seed peaks.</p>")
    for sid, title, fragment in c.sections:
        parts.append(f"<h2 id='{e(sid)}'>{e(title)}</h2>")
        parts.append(fragment)

    parts.append("<h2 id='arms'>Arms: what each compared configuration is</h2>")
    parts += _arms(c)

    parts.append("<h2 id='training'>Training</h2><p class='muted'>From every run's step record (metrics.jsonl, the "
                 "rows the trainer also sends live to TensorBoard). Lines: mean over seeds; bands: min..max over "
                 "seeds. Panel titles name the record's field.</p>")
    parts += _figures(c, ["training_curves", "mass", "fade_schedules", "rank1_fraction"], captions)
    parts.append("<h2 id='evaluation'>Evaluation</h2><p class='muted'>Lines: mean over seeds; bands: min..max over "
                 "seeds; dashed horizontal lines: untrained baselines.</p>")
    parts += _figures(c, ["pass_at_k_vs_step", "frontier", "peak_step", "distinct_correct"], captions)
    parts.append("<h2 id='atlas'>Atlas: where each arm puts its gradient</h2><p class='muted'>The exact expected "
                 "success mass m_S(p) and failure mass m_F(p) of each arm's advantage for a group of G rollouts with "
                 "solve rate p (fade_core.atlas): sign balance, where over p the mass peaks, and its scale. A FADE "
                 "arm is drawn at representative states of its schedule.</p>")
    parts += _figures(c, ["atlas"], captions)

    parts.append("<h2 id='examples'>Example completions</h2>")
    parts += _examples(c.examples)

    cols = ["benchmark", "method a", "method b", "CI over"]
    parts.append("<h2 id='stats'>Statistics</h2><h3>The comparisons that matter: each method against the base "
                 "model, FADE against the best static baseline (last step)</h3>")
    parts.append("<p class='muted'>a - b in percentage points with its 95% bootstrap interval (problems paired "
                 "between the two methods; seeds too where both have several). The intervals are NOT adjusted for "
                 "multiple comparisons; p: two-sided bootstrap p-value, given unadjusted and Holm-adjusted over "
                 "this table's rows of each benchmark and k (a family of its own). An interval that excludes 0 "
                 "with a Holm p above 0.05 is not a detected difference.</p>")
    parts.append(html_table(c.key_comparisons, text_columns=cols,
                            empty="No base model, or no trained method to compare with it."))
    n_pairs = len(c.comparisons)
    parts.append(f"<details><summary>Every pair of methods ({n_pairs} rows; p Holm-adjusted over all pairs of each "
                 "benchmark and k, so larger than above)</summary>")
    parts.append(html_table(c.comparisons, text_columns=cols))
    parts.append("</details>")
    parts.append("<h3>pass@k (%) by difficulty bucket (last step, mean over seeds)</h3>")
    parts.append(html_table(c.buckets, text_columns=["benchmark", "bucket", "method"]))

    parts.append("<h2 id='runs'>Runs</h2>")
    parts.append(html_table(c.runs, text_columns=["run_id", "method", "advantage"]))
    if not c.wall.empty:
        wall = c.wall.assign(**{"training wall time": durations(c.wall.train_seconds)})
        parts.append("<h3>Training wall time per run (sum of its steps' time)</h3>")
        parts.append(html_table(wall.drop(columns="train_seconds"), text_columns=["run_id", "method"]))
    for note in c.notes:
        parts.append(f"<p class='muted'>{e(note)}</p>")

    parts.append("<h2 id='provenance'>Provenance</h2>")
    parts += _provenance(c)

    parts.append("<h2 id='params'>Params</h2><details><summary>The resolved params of this comparison "
                 "(the arms above override train.method / train.params)</summary>")
    parts.append(f"<pre>{e(c.params_yaml or '(not given)')}</pre></details>")
    parts.append("<h2 id='card'>Data card</h2>")
    parts.append(f"<div class='card'>{markdown.to_html(c.data_card)}</div>" if c.data_card
                 else "<p class='muted'>(no data card found)</p>")
    parts.append("</body></html>")
    return "\n".join(parts)

