"""Prefect task of the `report` stage: aggregated tables -> figures and index.html (fade_core.report).

Under a flow it adds the Prefect flow runs (this one and the pipeline's) to the report's provenance, with
how long the pipeline had run when the report was built, and publishes the headline table and FADE's lead
as a Prefect markdown artifact."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import task

from fade_core import report as rep
from fade_core import runs as runs_lib
from fade_core import study as study_lib
from fade_core.config import Arm
from fade_core.report import provenance


@task(name="build-report")
def build_report(
    results_dir: str,
    out_dir: str,
    *,
    title: str,
    params_yaml: str,
    data_card_path: str | None,
    formats: list[str],
    runs_dir: str | None = None,
    tensorboard_dir: str | None = None,
    problem_paths: dict[str, str] | None = None,
    study: dict[str, Any] | None = None,
    pipeline: str = "fade",
    benchmarks: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Write reports/<name>/ (see fade_core.report); return the paths and the figures left out (with why).

    runs_dir: the runs (their configs say what each arm is); tensorboard_dir: the runs' live TensorBoard
    logs (linked); problem_paths: {benchmark: problem table} for the prompts of the example completions.
    ``study`` ({"runs_dir", "arms": {label: {method, params}}, "benchmark"}) adds the study section: the
    claims of fade_core.study computed from those runs and this results.duckdb, and the sign-axis figure.
    ``pipeline``: pipeline.name, the prefix of the artifacts' keys (tasks.artifacts). ``benchmarks``
    ({"prepared", "trained", "evaluated"}: lists of names) puts a line on top of the data card saying which of
    its benchmarks this run used."""
    card = ""
    if data_card_path and Path(data_card_path).exists():
        card = Path(data_card_path).read_text()
        if benchmarks is not None:  # say which of the card's benchmarks this run used
            from fade_core.data.card import usage_note

            card = usage_note(benchmarks.get("prepared", []), benchmarks.get("trained", []),
                              benchmarks.get("evaluated", [])) + card
    links, notes = prefect_links()
    links += saved_links(results_dir, runs_dir)
    inputs = rep.ReportInputs(title=title, params_yaml=params_yaml, data_card=card, formats=formats, runs_dir=runs_dir,
                              prompts=read_prompts(problem_paths or {}),
                              provenance=provenance.collect(links=links, notes=notes,
                                                            runs=runs_lib.find_run_dirs(runs_dir) if runs_dir else ()),
                              tensorboard_dir=tensorboard_dir if tensorboard_dir and Path(tensorboard_dir).is_dir()
                              else None)
    claims = []
    if study is not None:
        db = Path(results_dir) / "results.duckdb" if Path(results_dir).is_dir() else Path(results_dir)
        arms = {k: Arm(**a) for k, a in study["arms"].items()}
        claims, figs = study_lib.study_from_results(study["runs_dir"], db, arms=arms, benchmark=study.get("benchmark"),
                                                    fig_dir=Path(out_dir) / "figures",
                                                    formats=sorted({"png", *formats}))
        inputs.sections.append(("study", "Study: the FADE paper's claims on these runs",
                                study_lib.render_claims_html(claims, figs.get("png"))))
    out = rep.build_report(results_dir, out_dir, inputs)
    if study is not None:
        out["claims"] = {c.id: c.verdict for c in claims}
    _publish(out, pipeline)
    return {
        "html": str(out["html"]),
        "figures": {k: {f: str(p) for f, p in v.items()} for k, v in out["figures"].items()},
        "missing": dict(out["missing"]),
        "headline": str(out["headline"]),
        "comparisons": str(out["comparisons"]),
        "claims": out.get("claims"),
    }


def read_prompts(problem_paths: dict[str, str]) -> dict[str, str]:
    """{problem_id: prompt} of the prepared problem tables that exist."""
    from fade_core.data.schema import read_table

    prompts: dict[str, str] = {}
    for path in problem_paths.values():
        if Path(path).exists():
            df = read_table(path)
            prompts.update(zip(df.problem_id.astype(str), df.prompt.astype(str), strict=True))
    return prompts


def prefect_links() -> tuple[list[tuple[str, str]], list[str]]:
    """(links, notes) of the Prefect flow runs around this task: the report's flow run and, when it is a
    subflow, the pipeline's (root) flow run, with how long that had run. Empty outside a flow run; a run
    without a Prefect UI URL is named by its id."""
    from prefect.runtime import flow_run

    links: list[tuple[str, str]] = []
    notes: list[str] = []
    run_id = flow_run.id
    if not run_id:
        return links, notes
    url = flow_run.ui_url
    gone = temporary_server_note()
    tail = " (temporary server: gone)" if gone else ""
    links.append((f"Prefect flow run '{flow_run.name}' (report){tail}", url or f"flow run id {run_id}"))
    root = flow_run.root_flow_run_id
    if root and str(root) != str(run_id):
        root_url = url.replace(str(run_id), str(root)) if url else None
        links.append((f"Prefect flow run (the whole pipeline){tail}", root_url or f"flow run id {root}"))
        started = _flow_run_start(str(root))
        if started is not None:
            seconds = (datetime.now(UTC) - started).total_seconds()
            notes.append(f"The pipeline's flow run had been running {provenance.duration(seconds)} when this report "
                         "was built (its last stage).")
    if gone:
        notes.append(gone)
    return links, notes


def temporary_server_note() -> str:
    """What to say when the Prefect API is the temporary server the `fade` command started (flows.prefect_api
    sets FADE_TEMPORARY_PREFECT_API to its URL): its links stop working when the command ends. Empty otherwise
    (a server of the user's own, or Prefect Cloud, keeps its runs)."""
    url = os.environ.get("FADE_TEMPORARY_PREFECT_API")
    if not url or url != os.environ.get("PREFECT_API_URL"):
        return ""
    return (f"The Prefect links above point at the temporary Prefect server ({url}) that this fade command "
            "started and stopped when it ended: they do not open afterwards. What is kept is listed as "
            "'saved': the command's log (every flow and task run's lines), the run folders and the aggregated "
            "results. To keep the Prefect UI's view, run against a server of your own (`prefect server start`, "
            "then PREFECT_API_URL=http://127.0.0.1:4200/api).")


def saved_links(results_dir: str, runs_dir: str | None) -> list[tuple[str, str]]:
    """(label, path) of what outlives the command: its log file (FADE_COMMAND_LOG, set by the `fade` CLI), the
    aggregated results and the run folders, those that exist."""
    items = [("saved: the command's log (Prefect's flow and task lines)", os.environ.get("FADE_COMMAND_LOG") or ""),
             ("saved: aggregated results (results.duckdb, metrics.json, plots/)", results_dir),
             ("saved: the run folders (config, metrics.jsonl, checkpoints)", runs_dir or "")]
    return [(label, path) for label, path in items if path and Path(path).exists()]


def _flow_run_start(flow_run_id: str) -> datetime | None:
    """Start time of a flow run from the Prefect API (None when the API cannot say)."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            started = client.read_flow_run(flow_run_id).start_time
    except Exception:  # provenance is best effort: an unreachable API leaves the note out
        return None
    return started.astimezone(UTC) if started is not None else None


def png_data_uri(path: str | Path) -> str:
    """A PNG file as a ``data:`` URI: an image artifact the Prefect UI shows without reaching the machine
    that wrote the file."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


HEADLINE_FIGURES = ("pass_at_k_vs_step", "frontier", "peak_step")
"""The report's figures published as image artifacts (when drawn as PNG)."""


def report_markdown(out: dict[str, Any]) -> str:
    """The report artifact: the headline tables, and the page as a link (a ``file://`` URI of the html)."""
    html = Path(out["html"]).resolve()
    md = ["## Final pass@k (%) with 95% confidence intervals", "", rep.markdown_table(out["headline_table"]),
          "", "## FADE's lead over the best static baseline", "",
          rep.markdown_table(out["lead_table"], empty="(no FADE run or no static baseline)"), "",
          f"Report: [{html.parent.name}/{html.name}]({html.as_uri()}) (on the machine that built it: {html})"]
    if out["missing"]:
        md += ["", "Figures not drawn: " + ", ".join(f"{k} ({v})" for k, v in out["missing"].items())]
    return "\n".join(md)


def _publish(out: dict[str, Any], pipeline: str) -> None:
    from prefect.artifacts import create_image_artifact, create_link_artifact, create_markdown_artifact
    from prefect.context import TaskRunContext

    from fade_core.report.figures import FIGURES
    from tasks.naming import artifact_key

    if TaskRunContext.get() is None:
        return
    create_markdown_artifact(markdown=report_markdown(out), key=artifact_key(pipeline, "report"),
                             description="fade report headline")
    html = Path(out["html"]).resolve()
    create_link_artifact(link=html.as_uri(), link_text=f"{pipeline}: {html.parent.name}/{html.name}",
                         key=artifact_key(pipeline, "report-page"), description="The fade report's html page")
    captions = dict(FIGURES)
    for name in HEADLINE_FIGURES:
        png = (out["figures"].get(name) or {}).get("png")
        if png is not None and Path(png).exists():
            create_image_artifact(image_url=png_data_uri(png), key=artifact_key(pipeline, f"figure-{name}"),
                                  description=captions.get(name, name))
