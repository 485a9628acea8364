"""The `prepare` stage: every configured benchmark -> data/problems/<benchmark>.parquet + data card.

Reads the ``data`` section of the config (benchmarks, sources, countdown, livecodebench, aime_years,
aime_year, taco, code_prelude, gold, on_bad_rows, decontaminate, decontamination_ngram/threshold,
out_dir), and train.benchmark / eval.benchmarks (the two sides of the decontamination check), and writes,
under ``out_dir``:

    problems/<benchmark>.parquet    one validated problem table per benchmark (gold_pass per row where
                                    reference solutions were run)
    card.md, card.json              counts, selections, dropped bad rows, gold pass rates,
                                    special-judge rows, decontamination findings
    config.yaml                     the resolved config that produced them

`fade prepare [--params params.yaml] [--set data.benchmarks=[countdown,humaneval]]` runs this flow.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import typer
from prefect import flow

from fade_core import config as fconfig
from fade_core import data
from fade_core.data import decontamination, livecodebench
from flows.options import ParamsOpt, SetOpt, load_config
from tasks import prepare as tasks


def check_data_config(d: fconfig.DataConfig) -> None:
    """Fail before any work on an unknown benchmark or a source for a benchmark that is not prepared."""
    known = data.benchmarks()
    unknown = [b for b in d.benchmarks if not data.is_known(b)]
    if unknown:
        raise fconfig.ConfigError(
            f"data.benchmarks: unknown benchmark(s) {unknown}; known: {', '.join(known)}, math-<name>, code-<name>"
        )
    if len(set(d.benchmarks)) != len(d.benchmarks):
        raise fconfig.ConfigError(f"data.benchmarks: listed twice: {d.benchmarks}")
    stray = [b for b in d.sources if b not in d.benchmarks]
    if stray:
        raise fconfig.ConfigError(f"data.sources: {stray} not in data.benchmarks {d.benchmarks}")
    if "countdown" in d.sources:
        raise fconfig.ConfigError(
            "data.sources.countdown: the built-in task is generated, it takes no source"
        )
    lcb = d.livecodebench
    try:
        livecodebench.select_versions(lcb.version)
    except ValueError as e:
        raise fconfig.ConfigError(f"data.livecodebench.version: {e}") from None
    for key in ("date_from", "date_to"):
        value = getattr(lcb, key)
        try:
            if value is not None:
                date.fromisoformat(value[:10])
        except ValueError:
            raise fconfig.ConfigError(
                f"data.livecodebench.{key}: {value!r} is not an ISO date (YYYY-MM-DD)"
            ) from None


@flow(name="prepare")
def prepare(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Prepare every benchmark of ``config['data']``; return the written paths by name."""
    cfg = fconfig.from_dict(config or {})
    d = cfg.data
    check_data_config(d)
    out = Path(d.out_dir)
    results = [
        tasks.prepare_benchmark(
            b, d.sources.get(b), data.options_from_config(b, d), str(out / "problems" / f"{b}.parquet")
        )
        for b in d.benchmarks
    ]
    paths = {r["benchmark"]: r["path"] for r in results}
    # the training side: TACO (a training set by design) and whatever this config trains on; the evaluation
    # side: the held-out benchmarks and whatever this config evaluates, except a benchmark on the training side
    # (its own train/test split is disjoint by construction)
    training = list(dict.fromkeys([*decontamination.TRAINING_BENCHMARKS, cfg.train.benchmark]))
    evaluation = [b for b in dict.fromkeys([*decontamination.EVALUATION_BENCHMARKS, *cfg.eval.benchmarks])
                  if b not in training]
    dec = tasks.decontaminate(
        paths, drop=d.decontaminate, n=d.decontamination_ngram, threshold=d.decontamination_threshold,
        training=training, evaluation=evaluation,
    )
    card_md, card_json = tasks.write_card(results, dec, str(out))
    saved = fconfig.save(cfg, out / "config.yaml")
    return {"problems": paths, "card_md": card_md, "card_json": card_json, "config": str(saved)}


def register(app: typer.Typer) -> None:
    """Add `fade prepare` to the CLI."""

    @app.command("prepare")
    def prepare_command(params: ParamsOpt = Path("params.yaml"), overrides: SetOpt = None) -> None:
        """Write data/problems/<benchmark>.parquet for each configured benchmark, and the data card."""
        cfg = load_config(params, overrides)
        check_data_config(cfg.data)  # a bad key or source stops here (exit 2, flows/errors.py), before any work
        written = prepare(cfg.to_dict())  # a malformed source file: DataError naming file, row, field (exit 2)
        for b, p in written["problems"].items():
            typer.echo(f"{b}: {p}")
        typer.echo(f"data card: {written['card_md']}, {written['card_json']}")
