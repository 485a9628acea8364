"""Example completions: a few good and bad rollouts per method and step, the first thing one reads in an
RLVR run.

Two sources, both read from the aggregated results:

- evaluation samples (table ``samples``): per method and evaluated step, one problem on which the
  checkpoint both passed and failed when there is one (the contrast is the informative case), else the
  first problems; up to ``per_kind`` passed and ``per_kind`` failed completions, chosen deterministically.
- training rollouts: the step record's field ``examples`` (:data:`fade_core.train.loggers.EXAMPLES_FIELD`:
  a list of {problem_id, prompt, completion, reward, verdict} per step, as
  ``fade_core.train.rewards.pick_examples`` writes it), when the runs logged it, read from the aggregated
  ``train_steps`` table (as a list of structs or as JSON text). Its pass/fail label comes from the verdict
  (:func:`example_outcome`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pandas as pd

EXAMPLES_FIELD = "examples"
"""The step record's field of example completions, by the name the trainer's loggers use
(fade_core.train.loggers.EXAMPLES_FIELD; a unit test keeps the two equal without the report importing the trainer)."""
MAX_CHARS = 800  # a completion longer than this is cut (the cut is marked)


@dataclass(frozen=True)
class Example:
    """One completion shown in the report."""

    source: str  # "evaluation" or "training"
    method: str
    seed: int
    step: int
    problem_id: str
    completion: str
    passed: bool
    reward: float
    status: str = ""
    prompt: str = ""


def clip(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with how much was left out."""
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"


def evaluation_examples(con: duckdb.DuckDBPyConnection, *, per_kind: int = 2, steps_per_method: int = 3,
                        prompts: Mapping[str, str] | None = None) -> list[Example]:
    """Examples from the evaluated samples of every method at up to ``steps_per_method`` of its steps (the
    first, the last and one in between), seed = the lowest of the method. ``prompts``: {problem_id: prompt}."""
    try:
        steps = con.execute("""SELECT method, min(seed) AS seed, list(DISTINCT step ORDER BY step) AS steps
                               FROM samples GROUP BY method ORDER BY method""").df()
    except duckdb.CatalogException:
        return []
    out: list[Example] = []
    for row in steps.itertuples(index=False):
        chosen = pick_steps(list(row.steps), steps_per_method)
        for step in chosen:
            out += _examples_at(con, row.method, int(row.seed), int(step), per_kind, prompts or {})
    return out


def pick_steps(steps: Sequence[int], count: int) -> list[int]:
    """Up to ``count`` of ``steps`` (sorted): the first, the last and evenly spaced ones between."""
    steps = sorted(steps)
    if len(steps) <= count:
        return steps
    if count == 1:
        return [steps[-1]]
    picks = {steps[round(i * (len(steps) - 1) / (count - 1))] for i in range(count)}
    return sorted(picks)


def _examples_at(con: duckdb.DuckDBPyConnection, method: str, seed: int, step: int, per_kind: int,
                 prompts: Mapping[str, str]) -> list[Example]:
    rows = con.execute(
        """WITH s AS (SELECT * FROM samples WHERE method = ? AND seed = ? AND step = ?),
        mixed AS (SELECT problem_id FROM s GROUP BY problem_id HAVING bool_or(passed) AND NOT bool_and(passed)
                  ORDER BY problem_id LIMIT 1),
        pick AS (SELECT s.*, row_number() OVER (PARTITION BY passed ORDER BY
                        (problem_id IN (SELECT problem_id FROM mixed)) DESC, problem_id, sample_index) AS rank
                 FROM s)
        SELECT benchmark, problem_id, completion, passed, reward, status FROM pick WHERE rank <= ?
        ORDER BY passed DESC, rank""",
        [method, seed, step, per_kind],
    ).fetchall()
    return [Example("evaluation", method, seed, step, str(pid), clip(str(text or "")), bool(ok), float(reward),
                    str(status or ""), clip(prompts.get(str(pid), ""), 400))
            for _bench, pid, text, ok, reward, status in rows]


def training_examples(con: duckdb.DuckDBPyConnection, *, steps_per_method: int = 3, per_kind: int = 2
                      ) -> list[Example]:
    """Examples from the training records' ``examples`` field (empty when no run logged it)."""
    try:
        cols = {r[0] for r in con.execute("DESCRIBE train_steps").fetchall()}
    except duckdb.CatalogException:
        return []
    if EXAMPLES_FIELD not in cols:
        return []
    df = con.execute(f"""SELECT method, seed, step, "{EXAMPLES_FIELD}" AS examples FROM train_steps
                         WHERE "{EXAMPLES_FIELD}" IS NOT NULL ORDER BY method, seed, step""").df()
    return examples_from_records(df, steps_per_method=steps_per_method, per_kind=per_kind)


def parse_examples(value: Any) -> list[dict[str, Any]]:
    """The ``examples`` field of one record as a list of dicts (it arrives as a list or as JSON text)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if hasattr(value, "tolist") and not isinstance(value, list):
        value = value.tolist()
    return [dict(v) for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


PASSED_VERDICT = "passed"
"""The verdict of an accepted rollout (fade_core.train.rewards.VERDICTS[0])."""


def example_outcome(item: Mapping[str, Any]) -> tuple[bool, str]:
    """(passed, status) of one training example: from its ``verdict`` (what the trainer writes; passed when
    it is "passed"), else an explicit ``passed`` flag with its ``status``, else its reward (passed when >= 1,
    the verifiers' full score)."""
    verdict = item.get("verdict")
    if verdict:
        return str(verdict) == PASSED_VERDICT, str(verdict)
    if "passed" in item and item["passed"] is not None:
        return bool(item["passed"]), str(item.get("status", "") or "")
    reward = float(item.get("reward", math.nan))
    return bool(reward >= 1.0), str(item.get("status", "") or "")


def examples_from_records(records: pd.DataFrame, *, steps_per_method: int = 3, per_kind: int = 2) -> list[Example]:
    """Examples from step records (columns method, seed, step, examples): per method, its lowest seed, up to
    ``steps_per_method`` steps, ``per_kind`` passed and ``per_kind`` failed completions per step."""
    out: list[Example] = []
    if records.empty:
        return out
    for method, rows in records.groupby("method", sort=True):
        rows = rows[rows.seed == rows.seed.min()]
        have = rows[rows.examples.map(lambda v: bool(parse_examples(v)))]
        for step in pick_steps(have.step.astype(int).tolist(), steps_per_method):
            items = parse_examples(have[have.step == step].examples.iloc[0])
            outcome = [(x, *example_outcome(x)) for x in items]
            passed = [o for o in outcome if o[1]][:per_kind]
            failed = [o for o in outcome if not o[1]][:per_kind]
            for x, ok, status in passed + failed:
                out.append(Example("training", str(method), int(rows.seed.iloc[0]), int(step),
                                   str(x.get("problem_id", "?")), clip(str(x.get("completion", ""))),
                                   ok, float(x.get("reward", math.nan)), status,
                                   clip(str(x.get("prompt", "") or ""), 400)))
    return out
