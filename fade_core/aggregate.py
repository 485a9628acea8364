"""Aggregation: evaluated samples -> pass@k and the derived tables, all in DuckDB SQL.

Input: the view ``samples`` of :class:`fade_core.store.ResultsStore` (one row per sample) and,
optionally, the training records of ``runs/*/`` (:func:`fade_core.runs.load_training_records`). Output:
DuckDB tables (exported as parquet, CSV for DVC plots and ``metrics.json``).

pass@k is the unbiased estimator of Chen et al. (2021) from ``n`` samples with ``c`` correct::

    pass@k = 1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i)      (k <= n)

written in SQL as ``1 - coalesce(list_product(list_transform(range(n-c+1, n+1), lambda i: 1.0 - k/i)), 1.0)``.
The ``coalesce`` matters: for c = 0 the product is empty, which DuckDB returns as NULL, and pass@k is 0.
When n - c < k one factor is exactly 0 and pass@k is exactly 1. It is never a bootstrap or max-over-n.

Tables (each a DuckDB table of the same name; see :data:`TABLES`):

    problem_stats     per (run, step, benchmark, problem): n, c, mean reward, distinct correct solutions
    pass_at_k_problem per problem and k <= n: pass@k; with AggregateOptions.uniform_shares also the uniform
                      sampler's exact pass@k (run_id and method "uniform", step 0; :func:`uniform_rows`), so
                      every table built on pass@k shows it beside the base model
    pass_at_k         mean pass@k per run, method, seed, step, benchmark, difficulty bucket ('all' = every
                      problem), with flags: too_few_samples (some problem has n < flag_n_per_k * k) and
                      incomplete (some problem has n < k and is left out)
    pass_at_k_seeds   mean, sample std, min, max over seeds per method, step, benchmark, bucket, k; every run's
                      last evaluated step counts as its method's final step (the largest of its runs' last
                      steps), so runs that a rollout budget stopped at different steps share one final row;
                      run_step_min / run_step_max give the runs' own steps behind a row
    frontier          accuracy-diversity frontier: per method and step, mean pass@1 against mean pass@k (k > 1),
                      pareto = no other (method, step) point is at least as good on both and better on one
    peak              per run: the first step reaching its peak pass@1, the peak and the final pass@1
    peak_by_method    mean / std over seeds of the peak step and peak pass@1
    fade_lead         per benchmark: how many steps earlier (mean peak step) each FADE method peaks than
                      the best static baseline (the non-FADE trained method with the highest mean peak pass@1)
    distinct_correct  per method, step, benchmark: mean number of distinct correct solutions per problem
    comparisons       at each benchmark's last step: every pair of methods, the difference of mean pass@k and
                      each side's sd over seeds (descriptive: verdicts are the study's bootstrap tests,
                      fade_core.stats; the old "|diff| > sqrt(sd_a^2 + sd_b^2)" rule is no test and is gone)
    runs              run_id, method, seed, advantage (the registry name), is_fade, trained
    train_steps       the training records of every run (wide, as written by the trainer)
    train_curves      the same in long form (run_id, method, seed, step, metric, value), numeric metrics only
    eval_train        pass@1 per run and step joined with the training record of that step
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from fade_core.runs import load_training_records
from fade_core.store import ResultsStore, atomic_duckdb, atomic_write_bytes

DEFAULT_KS = (1, 10, 100)
UNTRAINED_METHODS = ("base", "sft", "warmstart", "uniform")
UNIFORM = "uniform"
"""run_id and method of the uniform-sampler baseline's rows (:func:`uniform_rows`)."""

TABLES = (
    "runs",
    "problem_stats",
    "pass_at_k_problem",
    "pass_at_k",
    "pass_at_k_seeds",
    "frontier",
    "peak",
    "peak_by_method",
    "fade_lead",
    "distinct_correct",
    "comparisons",
    "train_steps",
    "train_curves",
    "eval_train",
)


def pass_at_k_sql(n: str, c: str, k: str) -> str:
    """The SQL expression of unbiased pass@k for column expressions ``n``, ``c`` and ``k`` (k <= n)."""
    n_, c_ = f"CAST({n} AS BIGINT)", f"CAST({c} AS BIGINT)"  # sum() of ints is HUGEINT; range() wants BIGINT
    return f"(1.0 - coalesce(list_product(list_transform(range({n_} - {c_} + 1, {n_} + 1), lambda i: 1.0 - ({k}) / i)), 1.0))"


def normalise_completion_sql(col: str = "completion") -> str:
    """SQL that maps a completion to its comparison form for "distinct" counting (trimmed, whitespace runs -> one space)."""
    return f"regexp_replace(trim({col}), '\\s+', ' ', 'g')"


# --------------------------------------------------------------------------------------- the build
@dataclass
class AggregateOptions:
    """ks: k values (each computed where k <= n); flag_n_per_k: pass@k from fewer than flag_n_per_k * k
    samples of some problem is flagged; fade_methods: advantage names counted as FADE."""

    ks: Sequence[int] = DEFAULT_KS
    flag_n_per_k: float = 2.0
    fade_methods: Sequence[str] = ("fade",)
    untrained_methods: Sequence[str] = UNTRAINED_METHODS
    extra: dict[str, Any] = field(default_factory=dict)
    uniform_shares: dict[str, dict[str, float]] = field(default_factory=dict)
    """{benchmark: {problem_id: share}}: per problem, the share of candidate answers that are correct (the
    built-in task's metadata.share_correct); each benchmark here gets the uniform sampler's exact pass@k rows."""


def countdown_shares(problems_dir: str | Path | None) -> dict[str, dict[str, float]]:
    """{"countdown": {problem_id: share_correct}} from <problems_dir>/countdown.parquet (empty when there is
    no such table or no row carries a finite share)."""
    path = Path(problems_dir) / "countdown.parquet" if problems_dir is not None else None
    if path is None or not path.exists():
        return {}
    df = pd.read_parquet(path, columns=["problem_id", "metadata"])
    out = {}
    for pid, meta in zip(df["problem_id"], df["metadata"], strict=True):
        try:
            share = float((json.loads(meta) if isinstance(meta, str) else dict(meta)).get("share_correct"))
        except (TypeError, ValueError, AttributeError):
            continue
        if math.isfinite(share) and 0.0 <= share <= 1.0:
            out[str(pid)] = share
    return {"countdown": out} if out else {}


def uniform_rows(problems: pd.DataFrame, shares: dict[str, dict[str, float]], ks: Sequence[int]) -> pd.DataFrame:
    """The uniform sampler's pass_at_k_problem rows: for every evaluated problem (``problems``: benchmark,
    problem_id, difficulty_level) that has a share, and every k, pass@k = 1 - (1 - share)^k exactly (k draws
    with replacement among the candidates; fade_core.countdown_task.uniform_pass_at_k). run_id and method
    :data:`UNIFORM`, seed 0, step 0, n and c null (nothing was sampled)."""
    rows = []
    for b, pid, level in problems[["benchmark", "problem_id", "difficulty_level"]].drop_duplicates().itertuples(
            index=False):
        share = shares.get(str(b), {}).get(str(pid))
        if share is None:
            continue
        rows += [(UNIFORM, UNIFORM, 0, 0, b, pid, level, None, None, int(k), 1.0 - (1.0 - share) ** int(k))
                 for k in ks]
    cols = ["run_id", "method", "seed", "step", "benchmark", "problem_id", "difficulty_level", "n", "c", "k",
            "pass_at_k"]
    return pd.DataFrame(rows, columns=cols)


def _runs_table(con: duckdb.DuckDBPyConnection, configs: dict[str, dict[str, Any]], opts: AggregateOptions) -> None:
    ids = con.execute("SELECT DISTINCT run_id, method, seed FROM samples ORDER BY ALL").fetchall()
    rows = []
    for run_id, method, seed in ids:
        train = (configs.get(run_id) or {}).get("train") or {}
        advantage = train.get("method") or re.split(r"[(\[]", method, maxsplit=1)[0]
        trained = advantage not in opts.untrained_methods
        rows.append(dict(run_id=run_id, method=method, seed=int(seed), advantage=advantage,
                         is_fade=advantage in opts.fade_methods, trained=trained))
    df = pd.DataFrame(rows, columns=["run_id", "method", "seed", "advantage", "is_fade", "trained"])
    con.register("runs_df", df)
    con.execute("CREATE OR REPLACE TABLE runs AS SELECT * FROM runs_df")
    con.unregister("runs_df")


def _train_tables(con: duckdb.DuckDBPyConnection, train: pd.DataFrame) -> None:
    if train.empty:
        con.execute("CREATE OR REPLACE TABLE train_steps (run_id VARCHAR, method VARCHAR, seed BIGINT, step BIGINT)")
        con.execute("CREATE OR REPLACE TABLE train_curves (run_id VARCHAR, method VARCHAR, seed BIGINT, step BIGINT, "
                    "metric VARCHAR, value DOUBLE)")
        return
    ids = ["run_id", "method", "seed", "step"]
    train = train[ids + [c for c in train.columns if c not in ids]]
    con.register("train_df", train)
    con.execute("CREATE OR REPLACE TABLE train_steps AS SELECT * FROM train_df")
    con.unregister("train_df")
    numeric = [c for c in train.columns if c not in ids and pd.api.types.is_numeric_dtype(train[c])
               and not pd.api.types.is_bool_dtype(train[c])]
    if not numeric:
        con.execute("CREATE OR REPLACE TABLE train_curves AS SELECT run_id, method, seed, step, "
                    "NULL::VARCHAR AS metric, NULL::DOUBLE AS value FROM train_steps WHERE false")
        return
    cols = ", ".join(f'"{c}"' for c in numeric)
    casts = ", ".join(f'CAST("{c}" AS DOUBLE) AS "{c}"' for c in numeric)
    con.execute(
        f"""CREATE OR REPLACE TABLE train_curves AS
        SELECT run_id, method, CAST(seed AS BIGINT) AS seed, CAST(step AS BIGINT) AS step, metric, value FROM (
            UNPIVOT (SELECT run_id, method, seed, step, {casts} FROM train_steps)
            ON {cols} INTO NAME metric VALUE value)
        WHERE value IS NOT NULL AND isfinite(value)
        ORDER BY run_id, metric, step"""
    )


def build_tables(
    con: duckdb.DuckDBPyConnection,
    *,
    opts: AggregateOptions | None = None,
    train: pd.DataFrame | None = None,
    configs: dict[str, dict[str, Any]] | None = None,
) -> list[str]:
    """Create every table of :data:`TABLES` in ``con``, which must have the view/table ``samples``.

    Returns the table names. All pass@k arithmetic is SQL (see :func:`pass_at_k_sql`).
    """
    opts = opts or AggregateOptions()
    ks = sorted({int(k) for k in opts.ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"ks must be positive integers, got {list(opts.ks)}")
    ks_sql = "[" + ", ".join(str(k) for k in ks) + "]"
    _runs_table(con, configs or {}, opts)
    _train_tables(con, train if train is not None else pd.DataFrame())

    con.execute(
        f"""CREATE OR REPLACE TABLE problem_stats AS
        SELECT run_id, method, seed, step, benchmark, problem_id,
               coalesce(any_value(difficulty_level), 'unknown') AS difficulty_level,
               count(*)::BIGINT AS n,
               sum(CASE WHEN passed THEN 1 ELSE 0 END)::BIGINT AS c,
               avg(reward) AS mean_reward,
               count(DISTINCT CASE WHEN passed THEN {normalise_completion_sql()} END)::BIGINT AS distinct_correct,
               avg(tokens) AS mean_tokens,
               avg(latency_s) AS mean_latency_s
        FROM samples GROUP BY run_id, method, seed, step, benchmark, problem_id"""
    )
    con.execute(
        f"""CREATE OR REPLACE TABLE pass_at_k_problem AS
        SELECT p.run_id, p.method, p.seed, p.step, p.benchmark, p.problem_id, p.difficulty_level, p.n, p.c,
               k.k, {pass_at_k_sql('p.n', 'p.c', 'k.k')} AS pass_at_k
        FROM problem_stats p CROSS JOIN (SELECT unnest({ks_sql}) AS k) k
        WHERE k.k <= p.n"""
    )
    # buckets: every difficulty level plus 'all'; flags against the problems of that bucket
    con.execute(
        f"""CREATE OR REPLACE TABLE pass_at_k AS
        WITH bucketed AS (
            SELECT *, difficulty_level AS bucket FROM problem_stats
            UNION ALL SELECT *, 'all' AS bucket FROM problem_stats
        ), per_k AS (
            SELECT b.run_id, b.method, b.seed, b.step, b.benchmark, b.bucket, k.k,
                   avg(CASE WHEN k.k <= b.n THEN {pass_at_k_sql('b.n', 'b.c', 'k.k')} END) AS pass_at_k,
                   count(*) FILTER (WHERE k.k <= b.n) AS num_problems,
                   count(*) AS bucket_problems,
                   min(b.n) AS min_n
            FROM bucketed b CROSS JOIN (SELECT unnest({ks_sql}) AS k) k
            GROUP BY ALL
        )
        SELECT *, min_n < {float(opts.flag_n_per_k)} * k AS too_few_samples,
               num_problems < bucket_problems AS incomplete
        FROM per_k WHERE num_problems > 0
        ORDER BY benchmark, bucket, k, method, seed, step"""
    )
    if opts.uniform_shares:  # the uniform sampler beside the models, on the same problems
        uniform_df = uniform_rows(con.execute("SELECT DISTINCT benchmark, problem_id, difficulty_level FROM "
                                              "problem_stats").df(), opts.uniform_shares, ks)
        # only the k the models have (k <= their largest n): a pass@k column of the uniform sampler alone
        # would be read as a comparison that was never made
        max_n = dict(con.execute("SELECT benchmark, max(n) FROM problem_stats GROUP BY benchmark").fetchall())
        if not uniform_df.empty:
            uniform_df = uniform_df[uniform_df["k"] <= uniform_df["benchmark"].map(max_n)]
        if not uniform_df.empty:
            con.execute("INSERT INTO pass_at_k_problem BY NAME SELECT * FROM uniform_df")
            con.execute(
                """INSERT INTO pass_at_k BY NAME
                WITH b AS (SELECT *, difficulty_level AS bucket FROM uniform_df
                           UNION ALL SELECT *, 'all' AS bucket FROM uniform_df)
                SELECT run_id, method, seed, step, benchmark, bucket, k, avg(pass_at_k) AS pass_at_k,
                       count(*) AS num_problems, count(*) AS bucket_problems, NULL::BIGINT AS min_n,
                       false AS too_few_samples, false AS incomplete
                FROM b GROUP BY ALL"""
            )
    # Each run's last evaluated step counts as its method's final step (the largest last step of its runs):
    # under a rollout budget (train.max_rollouts) dapo's and codapo's seeds stop at different steps, and
    # grouping by the step alone made "final" one seed's checkpoint. No run has a non-final step at or
    # beyond that largest last step, so the relabelling never merges a final with another step.
    con.execute(
        """CREATE OR REPLACE TABLE pass_at_k_seeds AS
        WITH run_last AS (
            SELECT run_id, method, benchmark, max(step) AS last_step FROM pass_at_k GROUP BY ALL
        ), method_last AS (
            SELECT method, benchmark, max(last_step) AS final_step FROM run_last GROUP BY ALL
        ), labelled AS (
            SELECT p.*, CASE WHEN p.step = r.last_step THEN m.final_step ELSE p.step END AS at_step
            FROM pass_at_k p JOIN run_last r USING (run_id, method, benchmark) JOIN method_last m USING (method, benchmark)
        )
        SELECT method, at_step AS step, benchmark, bucket, k,
               avg(pass_at_k) AS mean, stddev_samp(pass_at_k) AS std, min(pass_at_k) AS min, max(pass_at_k) AS max,
               count(*) AS num_seeds, list(seed ORDER BY seed) AS seeds,
               bool_or(too_few_samples) AS too_few_samples, bool_or(incomplete) AS incomplete,
               sum(num_problems) AS num_problem_evals,
               min(step) AS run_step_min, max(step) AS run_step_max
        FROM labelled GROUP BY method, at_step, benchmark, bucket, k ORDER BY benchmark, bucket, k, method, step"""
    )
    con.execute(
        """CREATE OR REPLACE TABLE frontier AS
        WITH pts AS (
            SELECT a.method, a.step, a.benchmark, b.k, a.mean AS pass_at_1, b.mean AS pass_at_k,
                   a.std AS pass_at_1_std, b.std AS pass_at_k_std, a.num_seeds,
                   a.step = max(a.step) OVER (PARTITION BY a.method, a.benchmark) AS is_final
            FROM pass_at_k_seeds a JOIN pass_at_k_seeds b
              ON a.method = b.method AND a.step = b.step AND a.benchmark = b.benchmark AND a.bucket = b.bucket
            WHERE a.bucket = 'all' AND a.k = 1 AND b.k > 1
        )
        SELECT p.*, NOT EXISTS (
            SELECT 1 FROM pts q WHERE q.benchmark = p.benchmark AND q.k = p.k
              AND q.pass_at_1 >= p.pass_at_1 AND q.pass_at_k >= p.pass_at_k
              AND (q.pass_at_1 > p.pass_at_1 OR q.pass_at_k > p.pass_at_k)) AS pareto
        FROM pts p ORDER BY benchmark, k, method, step"""
    )
    con.execute(
        """CREATE OR REPLACE TABLE peak AS
        WITH p1 AS (
            SELECT run_id, method, seed, benchmark, step, pass_at_k AS pass_at_1 FROM pass_at_k
            WHERE bucket = 'all' AND k = 1
        )
        SELECT run_id, method, seed, benchmark,
               arg_min(step, struct_pack(neg := -pass_at_1, s := step)) AS peak_step,
               max(pass_at_1) AS peak_pass_at_1,
               arg_max(pass_at_1, step) AS final_pass_at_1,
               max(step) AS final_step, count(*) AS num_steps
        FROM p1 GROUP BY run_id, method, seed, benchmark ORDER BY benchmark, method, seed"""
    )
    con.execute(
        """CREATE OR REPLACE TABLE peak_by_method AS
        SELECT p.method, p.benchmark, any_value(r.advantage) AS advantage, bool_or(r.is_fade) AS is_fade,
               bool_or(r.trained) AS trained,
               avg(peak_step) AS mean_peak_step, stddev_samp(peak_step) AS std_peak_step,
               avg(peak_pass_at_1) AS mean_peak_pass_at_1, stddev_samp(peak_pass_at_1) AS std_peak_pass_at_1,
               avg(final_pass_at_1) AS mean_final_pass_at_1, count(*) AS num_seeds
        FROM peak p JOIN runs r USING (run_id) GROUP BY p.method, p.benchmark ORDER BY benchmark, method"""
    )
    con.execute(
        """CREATE OR REPLACE TABLE fade_lead AS
        WITH best_static AS (
            SELECT benchmark, arg_max(method, mean_peak_pass_at_1) AS baseline
            FROM peak_by_method WHERE NOT is_fade AND trained GROUP BY benchmark
        )
        SELECT f.benchmark, f.method, b.baseline,
               f.mean_peak_step AS fade_peak_step, s.mean_peak_step AS baseline_peak_step,
               s.mean_peak_step - f.mean_peak_step AS steps_earlier,
               f.mean_peak_pass_at_1 AS fade_peak_pass_at_1, s.mean_peak_pass_at_1 AS baseline_peak_pass_at_1,
               f.mean_peak_pass_at_1 - s.mean_peak_pass_at_1 AS peak_gain,
               f.num_seeds AS fade_seeds, s.num_seeds AS baseline_seeds
        FROM peak_by_method f JOIN best_static b USING (benchmark)
        JOIN peak_by_method s ON s.benchmark = b.benchmark AND s.method = b.baseline
        WHERE f.is_fade ORDER BY benchmark, method"""
    )
    con.execute(
        """CREATE OR REPLACE TABLE distinct_correct AS
        WITH per_run AS (
            SELECT run_id, method, seed, step, benchmark, avg(distinct_correct) AS mean_distinct_correct,
                   avg(CASE WHEN c > 0 THEN distinct_correct END) AS mean_distinct_correct_if_solved,
                   avg(c / n) AS mean_accuracy
            FROM problem_stats GROUP BY ALL
        )
        SELECT method, step, benchmark, avg(mean_distinct_correct) AS mean_distinct_correct,
               stddev_samp(mean_distinct_correct) AS std_distinct_correct,
               avg(mean_distinct_correct_if_solved) AS mean_distinct_correct_if_solved,
               avg(mean_accuracy) AS mean_accuracy, count(*) AS num_seeds
        FROM per_run GROUP BY ALL ORDER BY benchmark, method, step"""
    )
    con.execute(
        """CREATE OR REPLACE TABLE comparisons AS
        WITH last_step AS (
            SELECT benchmark, method, max(step) AS step FROM pass_at_k_seeds WHERE bucket = 'all' GROUP BY ALL
        ), fin AS (
            SELECT s.* FROM pass_at_k_seeds s JOIN last_step l USING (benchmark, method, step) WHERE s.bucket = 'all'
        )
        SELECT a.benchmark, a.k, a.method AS method_a, b.method AS method_b, a.step AS step_a, b.step AS step_b,
               a.mean AS mean_a, b.mean AS mean_b, a.mean - b.mean AS diff, a.std AS std_a, b.std AS std_b,
               a.num_seeds AS seeds_a, b.num_seeds AS seeds_b
        FROM fin a JOIN fin b ON a.benchmark = b.benchmark AND a.k = b.k AND a.method < b.method
        ORDER BY benchmark, k, method_a, method_b"""
    )
    con.execute(
        """CREATE OR REPLACE TABLE eval_train AS
        SELECT p.run_id, p.method, p.seed, p.step, p.benchmark, p.pass_at_k AS pass_at_1, t.* EXCLUDE (run_id, method, seed, step)
        FROM pass_at_k p LEFT JOIN train_steps t ON t.run_id = p.run_id AND t.step = p.step
        WHERE p.bucket = 'all' AND p.k = 1 ORDER BY p.benchmark, p.run_id, p.step"""
    )
    return list(TABLES)


# ------------------------------------------------------------------------------------------ export
def headline_metrics(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """metrics.json for DVC: per benchmark and method, final and peak pass@k (mean over seeds), peak step,
    and FADE's lead over the best static baseline."""
    out: dict[str, Any] = {}
    fin = con.execute(
        """SELECT s.benchmark, s.method, s.k, s.mean, s.std, s.num_seeds, s.too_few_samples FROM pass_at_k_seeds s
        JOIN (SELECT benchmark, method, max(step) AS step FROM pass_at_k_seeds GROUP BY ALL) l USING (benchmark, method, step)
        WHERE s.bucket = 'all' ORDER BY ALL"""
    ).fetchall()
    for bench, method, k, mean, std, seeds, few in fin:
        m = out.setdefault(bench, {}).setdefault(method, {})
        m[f"pass@{k}"] = _num(mean)
        if std is not None:
            m[f"pass@{k}_std"] = _num(std)
        m["num_seeds"] = int(seeds)
        if few:
            m.setdefault("flags", []).append(f"pass@{k}: too few samples")
    for bench, method, step, peak in con.execute(
        "SELECT benchmark, method, mean_peak_step, mean_peak_pass_at_1 FROM peak_by_method ORDER BY ALL"
    ).fetchall():
        m = out.setdefault(bench, {}).setdefault(method, {})
        m["peak_step"] = _num(step)
        m["peak_pass@1"] = _num(peak)
    for bench, method, base, earlier, gain in con.execute(
        "SELECT benchmark, method, baseline, steps_earlier, peak_gain FROM fade_lead ORDER BY ALL"
    ).fetchall():
        out.setdefault(bench, {}).setdefault(method, {}).update(
            {"baseline": base, "steps_earlier_than_baseline": _num(earlier), "peak_gain_over_baseline": _num(gain)}
        )
    return out


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


PLOT_QUERIES = {
    "pass_at_k_vs_step": "SELECT benchmark, k, method, step, mean, std, num_seeds FROM pass_at_k_seeds WHERE bucket = 'all' "
    "ORDER BY benchmark, k, method, step",
    "frontier": "SELECT benchmark, k, method, step, pass_at_1, pass_at_k, is_final, pareto FROM frontier ORDER BY ALL",
    "peak": "SELECT benchmark, method, seed, peak_step, peak_pass_at_1, final_pass_at_1 FROM peak ORDER BY ALL",
    "train_curves": "SELECT metric, method, seed, step, value FROM train_curves ORDER BY ALL",
}


def export(con: duckdb.DuckDBPyConnection, out_dir: str | Path, *, tables: Iterable[str] = TABLES) -> dict[str, Path]:
    """Write ``out_dir/tables/<name>.parquet``, ``out_dir/plots/<name>.csv`` and ``out_dir/metrics.json``.

    Every file is written under a temporary name and renamed into place. Returns name -> path.
    """
    out = Path(out_dir)
    written: dict[str, Path] = {}
    for name in tables:
        df = con.execute(f"SELECT * FROM {name}").df()
        buf = df.to_parquet(index=False)
        written[f"tables/{name}"] = atomic_write_bytes(out / "tables" / f"{name}.parquet", buf)
    for name, sql in PLOT_QUERIES.items():
        df = con.execute(sql).df()
        written[f"plots/{name}"] = atomic_write_bytes(out / "plots" / f"{name}.csv", df.to_csv(index=False).encode())
    metrics = headline_metrics(con)
    written["metrics"] = atomic_write_bytes(out / "metrics.json", (json.dumps(metrics, indent=2, sort_keys=True) + "\n").encode())
    return written


def aggregate(
    results_dir: str | Path,
    *,
    runs_dir: str | Path | None = "runs",
    opts: AggregateOptions | None = None,
    database: str | Path | None = None,
    problems_dir: str | Path | None = None,
) -> dict[str, Path]:
    """The aggregate stage: samples of ``results_dir`` (+ training records of ``runs_dir``) -> tables.

    Builds every table in ``results_dir/results.duckdb`` (with a copy of the samples), atomically, and
    exports parquet / CSV / metrics.json next to it. Raises when the store holds no samples. With
    ``problems_dir`` (data/problems/) the built-in task's shares give the uniform sampler's rows
    (:func:`countdown_shares`, unless ``opts.uniform_shares`` is already set).
    """
    opts = opts or AggregateOptions()
    if problems_dir is not None and not opts.uniform_shares:
        opts = replace(opts, uniform_shares=countdown_shares(problems_dir))
    results_dir = Path(results_dir)
    store = ResultsStore(results_dir)
    if not store.part_files():
        raise FileNotFoundError(f"{store.samples_dir}: no evaluated samples (run `fade evaluate` first)")
    store.verify()  # a part whose rows changed since it was written: DamagedFile naming it, before any table
    train, configs = load_training_records(runs_dir)
    db_path = Path(database) if database is not None else results_dir / "results.duckdb"
    with atomic_duckdb(db_path) as con:
        store.connect(con)
        con.execute("CREATE TABLE samples_snapshot AS SELECT * FROM samples")
        con.execute("DROP VIEW samples")
        con.execute("ALTER TABLE samples_snapshot RENAME TO samples")
        build_tables(con, opts=opts, train=train, configs=configs)
        written = export(con, results_dir)
    written["database"] = db_path
    return written


def open_results(path: str | Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to an aggregated ``results.duckdb``."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.duckdb"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no aggregated results (run `fade aggregate` first)")
    return duckdb.connect(str(p), read_only=True)
