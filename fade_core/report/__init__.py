"""The report: figures (PNG + SVG) and one self-contained HTML page from the aggregated results.

Input: ``results.duckdb`` written by :func:`fade_core.aggregate.aggregate` (tables pass_at_k_problem,
pass_at_k_seeds, frontier, peak, fade_lead, runs, samples, train_curves, ...) and, for the arms, the run
folders' config.yaml. Output, under ``reports/<name>/``::

    index.html                  everything embedded (figures as base64 PNG, tables, provenance, params, data card)
    figures/<figure>.{png,svg}  one file per figure and format
    tables/headline.csv         final pass@k per benchmark, method and k: mean, 95 % CI, what the CI resamples
    tables/headline.md          the page's headline table as Markdown, with its CI note (for a README or a paper)
    tables/comparisons.csv      every pair of methods: difference, 95 % CI, p, Holm-adjusted p
    report.json                 the figures drawn and those left out (with why)

Modules: :mod:`.intervals` (confidence intervals), :mod:`.tables` (the tables, formatted once per column),
:mod:`.figures` (training curves, evaluation figures, the atlas), :mod:`.schedule` (did each FADE arm's
schedule move: the study's check), :mod:`.arms` (what differs between arms), :mod:`.examples` (example completions), :mod:`.provenance` (commit, packages, machine, command,
wall time), :mod:`.markdown` (the data card as safe HTML), :mod:`.page` (the HTML).

The report reads the training records (the runs' metrics.jsonl, aggregated), never TensorBoard files:
the trainer writes those live as it steps (fade_core.train.loggers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fade_core.report.arms import differing_keys, group_size, read_run_configs, summarize_arms
from fade_core.report.examples import evaluation_examples, training_examples
from fade_core.report.figures import FIGURES, TRAIN_METRICS, make_figures, method_colors, table
from fade_core.report.page import PageContent, render
from fade_core.report.provenance import Provenance, wall_times
from fade_core.report.schedule import schedule_checks
from fade_core.report.tables import (
    HOLM_KEY,
    buckets,
    ci_note,
    comparisons,
    comparisons_display,
    fade_lead,
    fade_lead_display,
    headline_intervals,
    headline_table,
    key_comparisons,
    runs_table,
)

__all__ = ["FIGURES", "TRAIN_METRICS", "ReportInputs", "build_report", "headline_table", "markdown_table",
           "method_colors"]


@dataclass
class ReportInputs:
    """What goes into the page besides the aggregated tables.

    params_yaml: the resolved params (YAML text); data_card: the data card (Markdown); runs_dir: the runs'
    folder (their config.yaml say what each arm is); group_size: G of the atlas (default: the runs'
    train.group_size); prompts: {problem_id: prompt} for the example completions; provenance: what built
    it (fade_core.report.provenance.collect); tensorboard_dir: where the runs' live TensorBoard logs are;
    sections: extra sections after the headline, each (anchor id, title, HTML fragment): the study's claims.
    """

    title: str = "fade report"
    params_yaml: str = ""
    data_card: str = ""
    formats: Sequence[str] = ("png", "svg")
    notes: list[str] = field(default_factory=list)
    sections: list[tuple[str, str, str]] = field(default_factory=list)
    runs_dir: str | Path | None = None
    group_size: int | None = None
    prompts: Mapping[str, str] = field(default_factory=dict)
    provenance: Provenance | None = None
    tensorboard_dir: str | None = None


def markdown_table(df: Any, empty: str = "(no rows)") -> str:
    """A GitHub-flavoured markdown table of ``df`` (floats to 4 significant digits)."""
    import math

    if df is None or df.empty:
        return empty

    def fmt(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        return f"{v:.4g}" if isinstance(v, float) else str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def build_report(results: str | Path, out_dir: str | Path, inputs: ReportInputs | None = None) -> dict[str, Any]:
    """The report stage: ``results`` (results.duckdb or its folder) -> ``out_dir`` (see the module docstring).

    Returns {"html": path, "figures": {name: {fmt: path}}, "missing": {name: why}, "headline": csv path,
    "comparisons": csv path, "headline_table": the headline as shown, "lead_table": FADE's lead as shown}.
    """
    from fade_core.aggregate import open_results
    from fade_core.store import atomic_write_bytes

    inputs = inputs or ReportInputs()
    out = Path(out_dir)
    formats = list(dict.fromkeys([*inputs.formats, "png"]))  # the page embeds PNG: drawn beside the asked formats
    con = open_results(results)
    try:
        runs = table(con, "SELECT * FROM runs ORDER BY method, seed")
        configs = read_run_configs(inputs.runs_dir)
        arms = summarize_arms(runs, configs)
        specs = [(a.label, a.method, {name: value for name, value, given in a.params if given})
                 for a in arms if a.trained]  # the atlas draws each arm as its config set it
        figures, missing, details = make_figures(con, out / "figures", formats, arms=specs,
                                                 group_size=inputs.group_size or group_size(configs))
        fade_labels = set(runs[runs.is_fade].method) if "is_fade" in runs else set()
        checks = schedule_checks(con, {a.label: (a.method, {n: v for n, v, given in a.params if given})
                                       for a in arms if a.trained and a.label in fade_labels})
        long = headline_intervals(con)
        pairs = comparisons(con)
        lead = fade_lead(con)
        trained = set(runs[runs.trained].method) if "trained" in runs else set()
        compared = set(pairs.method_a) | set(pairs.method_b) if not pairs.empty else set()
        key = key_comparisons(pairs, sorted(compared - trained),
                              [(r.benchmark, r.method, r.baseline) for r in lead.itertuples(index=False)])
        flagged = table(con, "SELECT count(*) AS n FROM pass_at_k WHERE too_few_samples")
        curves = table(con, "SELECT run_id, method, seed, step, metric, value FROM train_curves "
                            "WHERE metric = 'time_step'")
        content = PageContent(
            title=inputs.title, headline=headline_table(long), ci_note=ci_note(long),
            flagged=int(flagged.n.iloc[0]) if not flagged.empty else 0, lead=fade_lead_display(lead),
            sections=inputs.sections, schedule=checks, arms=arms, differing=differing_keys(runs, configs),
            figures=figures, missing=missing, train_panels=details,
            examples=training_examples(con) + evaluation_examples(con, prompts=inputs.prompts),
            comparisons=comparisons_display(pairs), key_comparisons=comparisons_display(key, HOLM_KEY), buckets=buckets(con), runs=runs_table(con),
            wall=wall_times(curves), provenance=inputs.provenance, tensorboard_dir=inputs.tensorboard_dir,
            params_yaml=inputs.params_yaml, data_card=inputs.data_card, notes=inputs.notes,
        )
        head_csv = atomic_write_bytes(out / "tables" / "headline.csv", long.to_csv(index=False).encode())
        head_md = f"{markdown_table(content.headline)}\n\n{content.ci_note}\n" if not content.headline.empty else ""
        atomic_write_bytes(out / "tables" / "headline.md", head_md.encode())
        pairs_csv = atomic_write_bytes(out / "tables" / "comparisons.csv", pairs.to_csv(index=False).encode())
        html_path = atomic_write_bytes(out / "index.html", render(content).encode())
        atomic_write_bytes(out / "report.json", json.dumps(
            {"figures": sorted(figures), "missing": missing, "training_panels": details}, indent=2).encode())
        return {"html": html_path, "figures": figures, "missing": missing, "headline": head_csv,
                "comparisons": pairs_csv, "headline_table": content.headline, "lead_table": content.lead}
    finally:
        con.close()

