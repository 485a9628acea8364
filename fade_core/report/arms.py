"""What differs between the compared arms: each arm's method with every parameter resolved (defaults
included, the ones its config sets marked), the trainer hints the method brings, and the config keys
whose values differ between arms.

Read from the runs' own config.yaml (fade_core.runs), so the report shows what trained each run, not
what params.yaml says now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

PER_RUN_KEYS = ("train.seed", "train.label", "train.runs_dir", "train.method")
"""Config keys that differ between runs by construction (the seed, the arm's name and folder) or are
shown in the arms table (the method and its parameters, ``train.params.*``)."""


@dataclass
class ArmSummary:
    """One arm: its label, method, the method's one-line summary, every parameter with its value and
    whether the config set it, and the trainer hints of the method (loss aggregation, clip range)."""

    label: str
    method: str
    summary: str = ""
    params: list[tuple[str, Any, bool]] = field(default_factory=list)
    hints: dict[str, Any] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    trained: bool = True


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"train.params.alpha": 2, ...}: nested mappings flattened with '.', other values kept."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def read_run_configs(runs_dir: str | Path | None) -> dict[str, dict[str, Any]]:
    """{run_id: its config.yaml mapping} for every run folder under ``runs_dir`` ({} without one)."""
    from fade_core import runs

    if runs_dir is None or not Path(runs_dir).is_dir():
        return {}
    return {run.name: runs.read_run_config(run) for run in runs.find_run_dirs(runs_dir)}


def group_size(configs: Mapping[str, Mapping[str, Any]]) -> int | None:
    """The runs' group size G (train.group_size of the first run that says), for the atlas."""
    for cfg in configs.values():
        size = ((cfg or {}).get("train") or {}).get("group_size")
        if isinstance(size, int) and size >= 1:
            return size
    return None


def summarize_arms(runs_table: pd.DataFrame, configs: Mapping[str, Mapping[str, Any]]) -> list[ArmSummary]:
    """One :class:`ArmSummary` per method label of ``runs_table`` (run_id, method, seed, advantage, trained),
    resolved through the advantage registry from the first run's config (its train.method and train.params;
    without a config, the registry name in ``advantage`` at its defaults)."""
    from fade_core import advantages

    out: list[ArmSummary] = []
    if runs_table.empty:
        return out
    for label, rows in runs_table.groupby("method", sort=True):
        trained = bool(rows.trained.any()) if "trained" in rows else True
        seeds = sorted(int(s) for s in rows.seed.unique())
        cfg = next((configs[r] for r in rows.run_id if r in configs), {})
        train = (cfg.get("train") or {}) if isinstance(cfg, Mapping) else {}
        name = train.get("method") or (rows.advantage.iloc[0] if "advantage" in rows else str(label))
        arm = ArmSummary(str(label), str(name), seeds=seeds, trained=trained)
        if trained and name in advantages.names():
            adv = advantages.build(name, **(train.get("params") or {}))
            arm.summary = advantages.method(name).summary
            arm.params = [(p.name, adv.params[p.name], p.name in adv.given) for p in adv.method.params]
            arm.hints = adv.recommended()
        elif not trained:
            arm.summary = "the untrained base model (the policy before RL), evaluated once"
        out.append(arm)
    return out


def differing_keys(runs_table: pd.DataFrame, configs: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The config keys whose values differ between the arms (trained method labels), one row per key and a
    column per arm; :data:`PER_RUN_KEYS` and ``train.params.*`` left out (the arms table shows them).
    Keys that differ between the seeds of one arm are listed with every value that arm took."""
    per_arm: dict[str, dict[str, set[str]]] = {}
    if runs_table.empty:
        return pd.DataFrame()
    trained = runs_table[runs_table.trained] if "trained" in runs_table else runs_table
    for label, rows in trained.groupby("method", sort=True):
        values: dict[str, set[str]] = {}
        for run_id in rows.run_id:
            if run_id not in configs:
                continue
            for key, value in flatten(configs[run_id]).items():
                values.setdefault(key, set()).add(_show(value))
        if values:
            per_arm[str(label)] = values
    if len(per_arm) < 2:
        return pd.DataFrame()
    keys = sorted(set().union(*(v.keys() for v in per_arm.values())))
    rows_out = []
    for key in keys:
        if key in PER_RUN_KEYS or key == "train.params" or key.startswith("train.params."):
            continue
        cells = {arm: " | ".join(sorted(v.get(key, {"(absent)"}))) for arm, v in per_arm.items()}
        if len(set(cells.values())) > 1:
            rows_out.append({"config key": key, **cells})
    return pd.DataFrame(rows_out)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def params_text(arm: ArmSummary) -> str:
    """'alpha=2 (set), beta=1' style text of an arm's parameters (the set ones first)."""
    ordered = sorted(arm.params, key=lambda p: not p[2])
    return ", ".join(f"{name}={_show(value)}" + (" (set)" if given else "") for name, value, given in ordered)
