"""Prefect task of the `report` stage: aggregated tables -> figures, index.html, TensorBoard (and W&B offline).
Under a flow it publishes the headline table and FADE's lead as a Prefect markdown artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task

from fade_core import report as rep
from fade_core import study as study_lib
from fade_core.config import Arm


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
    study: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write reports/<name>/ (see fade_core.report); return the paths and the figures left out (with why).

    ``study`` ({"runs_dir", "arms": {label: {method, params}}, "benchmark"}) adds the study section: the
    claims of fade_core.study computed from those runs and this results.duckdb, and the sign-axis figure."""
    card = ""
    if data_card_path and Path(data_card_path).exists():
        card = Path(data_card_path).read_text()
    inputs = rep.ReportInputs(title=title, params_yaml=params_yaml, data_card=card, formats=formats)
    claims = []
    if study is not None:
        db = Path(results_dir) / "results.duckdb" if Path(results_dir).is_dir() else Path(results_dir)
        arms = {k: Arm(**a) for k, a in study["arms"].items()}
        claims, figs = study_lib.study_from_results(study["runs_dir"], db, arms=arms, benchmark=study.get("benchmark"),
                                                    fig_dir=Path(out_dir) / "figures",
                                                    formats=sorted({"png", *formats}))
        inputs.sections.append(("study", "Study: the FADE paper's claims on these runs",
                                study_lib.render_claims_html(claims, figs.get("png"))))
    out = rep.build_report(results_dir, out_dir, inputs, tensorboard=tensorboard, wandb=wandb)
    if study is not None:
        out["claims"] = {c.id: c.verdict for c in claims}
    _publish(results_dir, out)
    return {
        "html": str(out["html"]),
        "figures": {k: {f: str(p) for f, p in v.items()} for k, v in out["figures"].items()},
        "missing": dict(out["missing"]),
        "headline": str(out["headline"]),
        "tensorboard": str(out["tensorboard"]) if out["tensorboard"] else None,
        "wandb": str(out["wandb"]) if out["wandb"] else None,
        "claims": out.get("claims"),
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
