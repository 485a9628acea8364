"""The data card: what `fade prepare` produced, as JSON (for machines) and Markdown (for people).

Per benchmark: rows, counts by split, kind, normalized difficulty level and the source's own difficulty
labels (summarized as min/median/max when they are numbers, e.g. countdown's shares), rows left out on
purpose (a selection: version, date window, year; special-judge rows nothing can decide; rows whose
reference solutions fail), bad rows dropped (each with file, row, field and reason), notes on how the
source was read (files ignored, a JSON array named .jsonl), the gold validation of reference solutions
(rows validated, passed, failed, the gold pass rate, the failures) and the special-judge rows by how
they are judged (a checker, a rule for TACO's cases 2 and 3, the labelled lenient rule).
Across benchmarks: decontamination findings (exact and near duplicates between training and evaluation
statements) and the training problems dropped for them. No timestamps, so the same inputs give the same
card byte for byte (DVC-friendly).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fade_core.data.decontamination import Overlap
from fade_core.data.schema import RowIssue

MAX_LISTED = 50  # issues / overlaps listed in the Markdown card (all are in the JSON)


def _counts(s: pd.Series) -> dict[str, int]:
    return {str(k): int(v) for k, v in sorted(s.value_counts().items(), key=lambda kv: str(kv[0]))}


def _difficulty_labels(s: pd.Series) -> dict[str, Any]:
    nums = pd.to_numeric(s, errors="coerce")
    if len(s) and nums.notna().all() and s.nunique() > 20:
        return {
            "numeric": True,
            "min": float(nums.min()),
            "median": float(nums.median()),
            "max": float(nums.max()),
        }
    return _counts(s)


def special_judge_summary(table: pd.DataFrame) -> dict[str, int]:
    """Rows flagged special-judge in the table, by the judge that decides them (from metadata)."""
    from fade_core.sandbox.compare import judge_from_metadata

    out: dict[str, int] = {}
    for text in table["metadata"]:
        try:
            meta = json.loads(text)
        except (TypeError, ValueError):
            continue
        if meta.get("special_judge") is True:
            judge = judge_from_metadata(meta)[0]
            out[judge] = out.get(judge, 0) + 1
    return dict(sorted(out.items()))


def benchmark_summary(
    table: pd.DataFrame,
    *,
    source: str | None = None,
    dropped: Iterable[RowIssue] = (),
    filtered: Mapping[str, int] | None = None,
    notes: Iterable[str] = (),
    gold: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Counts and losses of one prepared benchmark."""
    issues = [i.to_dict() if isinstance(i, RowIssue) else dict(i) for i in dropped]
    return {
        "source": source,
        "rows": len(table),
        "splits": _counts(table["split"]),
        "kinds": _counts(table["kind"]),
        "difficulty_level": _counts(table["difficulty_level"]),
        "difficulty": _difficulty_labels(table["difficulty"]),
        "by_split": {
            str(split): {"kinds": _counts(g["kind"]), "difficulty_level": _counts(g["difficulty_level"])}
            for split, g in sorted(table.groupby("split"), key=lambda kv: str(kv[0]))
        },
        "filtered": dict(sorted((filtered or {}).items())),
        "dropped_bad_rows": len({(i["file"], i["row"]) for i in issues}),
        "bad_row_issues": issues,
        "notes": list(notes),
        "gold": dict(gold) if gold is not None else None,
        "special_judge": special_judge_summary(table),
    }


def build(
    summaries: Mapping[str, dict[str, Any]],
    *,
    overlaps: Iterable[Overlap] = (),
    decontaminated: Mapping[str, list[str]] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole card as a JSON-ready dict."""
    ov = [o.to_dict() if isinstance(o, Overlap) else dict(o) for o in overlaps]
    dec = {k: sorted(v) for k, v in sorted((decontaminated or {}).items())}
    return {
        "benchmarks": {k: summaries[k] for k in sorted(summaries)},
        "decontamination": {
            "settings": dict(settings or {}),
            "exact": sum(1 for o in ov if o["kind"] == "exact"),
            "near": sum(1 for o in ov if o["kind"] == "near"),
            "training_problems_flagged": len({o["train_id"] for o in ov}),
            "overlaps": ov,
            "dropped": dec,
        },
    }


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


JUDGE_LABELS = {
    "checker": "decided by the row's checker",
    "casefold": "case-insensitive rule (TACO case 2)",
    "numeric": "numeric tolerance rule (TACO case 3)",
    "special_lenient": "LENIENT any-order tokens (passes some invalid answers)",
    "no_checker": "undecidable (scored 0)",
}


def _gold_rate(gold: Mapping[str, Any] | None) -> str:
    if not gold:
        return "not run"
    if gold.get("pass_rate") is None:
        return "none validated"
    return f"{gold['pass_rate']:.1%} ({gold['passed']}/{gold['validated']})"


def _gold_lines(gold: Mapping[str, Any] | None) -> list[str]:
    if not gold:
        return []
    action = "dropped" if gold["on_fail"] == "drop" else "kept, flagged gold_pass=false"
    lines = [
        "",
        f"Gold validation (reference solutions run in the sandbox): {gold['validated']} rows validated, "
        f"{gold['passed']} pass, {gold['failed']} fail ({action}), {gold['not_validated']} not validated; "
        f"gold pass rate {_gold_rate(gold)}.",
    ]
    if gold.get("failures"):
        lines.append("")
        lines += _table(
            ["problem", "why the reference fails"],
            [[f["problem_id"], f["detail"][:200]] for f in gold["failures"][:MAX_LISTED]],
        )
        if len(gold["failures"]) > MAX_LISTED:
            lines.append(f"... and {len(gold['failures']) - MAX_LISTED} more (see card.json)")
    return lines


def usage_note(prepared: Iterable[str], trained: Iterable[str], evaluated: Iterable[str]) -> str:
    """One Markdown paragraph for the top of a run's data card: which of the prepared benchmarks the run
    trained on and evaluated, and which it prepared but never used (the card lists everything `fade
    prepare` wrote, e.g. humaneval by default, which the default run does not evaluate)."""
    prepared, trained, evaluated = list(prepared), list(trained), list(evaluated)
    used = set(trained) | set(evaluated)
    unused = [b for b in prepared if b not in used]
    text = (f"This run trained on {', '.join(trained) or 'nothing'} and evaluated on {', '.join(evaluated) or 'nothing'}"
            f" (train.benchmark, eval.benchmarks).")
    if unused:
        text += (f" Also prepared, but neither trained on nor evaluated: {', '.join(unused)} (data.benchmarks); "
                 "the card lists every prepared benchmark.")
    return text + "\n\n"


def to_markdown(card: Mapping[str, Any]) -> str:
    """The card as Markdown."""
    lines = ["# Data card", ""]
    benches = card["benchmarks"]
    lines += _table(
        [
            "benchmark",
            "rows",
            "splits",
            "kinds",
            "levels",
            "filtered out",
            "bad rows dropped",
            "gold pass rate",
        ],
        [
            [
                b,
                s["rows"],
                ", ".join(f"{k} {v}" for k, v in s["splits"].items()),
                ", ".join(f"{k} {v}" for k, v in s["kinds"].items()),
                ", ".join(f"{k} {v}" for k, v in s["difficulty_level"].items()),
                sum(s["filtered"].values()),
                s["dropped_bad_rows"],
                _gold_rate(s.get("gold")),
            ]
            for b, s in benches.items()
        ],
    )
    for b, s in benches.items():
        lines += ["", f"## {b}", "", f"Source: `{s['source'] or 'default'}`", ""]
        rows = [
            [
                split,
                ", ".join(f"{k} {v}" for k, v in d["kinds"].items()),
                ", ".join(f"{k} {v}" for k, v in d["difficulty_level"].items()),
            ]
            for split, d in s["by_split"].items()
        ]
        lines += _table(["split", "kinds", "difficulty levels"], rows)
        diff = s["difficulty"]
        if diff.get("numeric") is True:
            lines += [
                "",
                f"Source difficulty (numeric): min {diff['min']:.4g}, median {diff['median']:.4g}, max {diff['max']:.4g}",
            ]
        else:
            lines += ["", "Source difficulty labels: " + ", ".join(f"{k} {v}" for k, v in diff.items())]
        if s["filtered"]:
            lines += [
                "",
                "Left out on purpose: " + ", ".join(f"{k}: {v}" for k, v in s["filtered"].items()),
            ]
        lines += _gold_lines(s.get("gold"))
        if s.get("special_judge"):
            lines += [
                "",
                "Special-judge rows kept, by judge: "
                + ", ".join(f"{JUDGE_LABELS.get(k, k)} {v}" for k, v in s["special_judge"].items())
                + ".",
            ]
        if s.get("notes"):
            lines += ["", "Notes on reading the source:", ""]
            lines += [f"- {n}" for n in s["notes"][:MAX_LISTED]]
        if s["bad_row_issues"]:
            lines += ["", f"Bad rows dropped: {s['dropped_bad_rows']}", ""]
            lines += _table(
                ["file", "row", "field", "problem"],
                [[i["file"], i["row"], i["field"], i["message"]] for i in s["bad_row_issues"][:MAX_LISTED]],
            )
            if len(s["bad_row_issues"]) > MAX_LISTED:
                lines.append(f"... and {len(s['bad_row_issues']) - MAX_LISTED} more (see card.json)")
    dec = card["decontamination"]
    lines += ["", "## Decontamination", ""]
    settings = ", ".join(f"{k}={v}" for k, v in dec["settings"].items())
    lines.append(f"Settings: {settings or 'n/a'}.")
    lines.append(
        f"Exact duplicates: {dec['exact']}; near duplicates: {dec['near']}; "
        f"training problems flagged: {dec['training_problems_flagged']}."
    )
    dropped = sum(len(v) for v in dec["dropped"].values())
    lines.append(
        f"Training problems dropped: {dropped}"
        + (f" ({', '.join(f'{k} {len(v)}' for k, v in dec['dropped'].items())})." if dropped else ".")
    )
    if dec["overlaps"]:
        lines.append("")
        lines += _table(
            ["training problem", "evaluation problem", "kind", "overlap"],
            [[o["train_id"], o["eval_id"], o["kind"], o["score"]] for o in dec["overlaps"][:MAX_LISTED]],
        )
        if len(dec["overlaps"]) > MAX_LISTED:
            lines.append(f"... and {len(dec['overlaps']) - MAX_LISTED} more (see card.json)")
    return "\n".join(lines) + "\n"


def write(card: Mapping[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write card.md and card.json into ``out_dir``; returns their paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    md, js = d / "card.md", d / "card.json"
    js.write_text(json.dumps(card, indent=2, sort_keys=False, default=str) + "\n")
    md.write_text(to_markdown(card))
    return md, js
