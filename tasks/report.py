"""Prefect task of the `report` stage: aggregated tables -> figures, index.html, TensorBoard (and W&B offline).
Under a flow it publishes the headline table and FADE's lead as a Prefect markdown artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from fade_core import report as rep


@task(name="build-report")
def build_report(
    results_dir: str,
    out_dir: str,
    *,
    title: str,
    params_yaml: str,
    data_card_path: str | None,
    formats: list[str],
    tensorboard: bool,
    wandb: bool,
) -> dict[str, Any]:
    """Write reports/<name>/ (see fade_core.report); return the paths and the figures left out (with why)."""
    card = ""
    if data_card_path and Path(data_card_path).exists():
        card = Path(data_card_path).read_text()
    inputs = rep.ReportInputs(title=title, params_yaml=params_yaml, data_card=card, formats=formats)
    out = rep.build_report(results_dir, out_dir, inputs, tensorboard=tensorboard, wandb=wandb)
    _publish(results_dir, out)
    return {
        "html": str(out["html"]),
        "figures": {k: {f: str(p) for f, p in v.items()} for k, v in out["figures"].items()},
        "missing": dict(out["missing"]),
        "headline": str(out["headline"]),
        "tensorboard": str(out["tensorboard"]) if out["tensorboard"] else None,
        "wandb": str(out["wandb"]) if out["wandb"] else None,
    }


def _publish(results_dir: str, out: dict[str, Any]) -> None:
    from prefect.artifacts import create_markdown_artifact
    from prefect.context import TaskRunContext

    from fade_core.aggregate import open_results

    if TaskRunContext.get() is None:
        return
    with open_results(results_dir) as con:
        head = rep.headline_table(con)
        lead = con.execute("SELECT benchmark, method, baseline, steps_earlier, peak_gain FROM fade_lead").df()
    md = ["## Final pass@k (%), mean ± std over seeds", "", rep.markdown_table(head),
          "", "## FADE's lead over the best static baseline (mean peak step)", "",
          rep.markdown_table(lead, empty="(no FADE run or no static baseline)"), "",
          f"Report: `{out['html']}`"]
    if out["missing"]:
        md += ["", "Figures not drawn: " + ", ".join(f"{k} ({v})" for k, v in out["missing"].items())]
    create_markdown_artifact(markdown="\n".join(md), key="fade-report", description="fade report headline")
