"""Aggregation: SQL pass@k against exact arithmetic and fade_core.metrics, and the derived tables on known data."""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from fade_core import aggregate as agg
from fade_core.store import SAMPLE_COLUMNS, ResultsStore


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(comb(n - c, k), comb(n, k)))


def sql_pass_at_k(triples: list[tuple[int, int, int]]) -> np.ndarray:
    con = duckdb.connect()
    df = pd.DataFrame(triples, columns=["n", "c", "k"])
    df["row"] = np.arange(len(df))
    con.register("t", df)
    return con.execute(f"SELECT {agg.pass_at_k_sql('n', 'c', 'k')} AS p FROM t ORDER BY row").df().p.to_numpy()


def random_triples(seed: int, count: int = 3000) -> list[tuple[int, int, int]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 300))
        c = int(rng.integers(0, n + 1))
        k = int(rng.choice([1, 2, 5, 10, 100, n, int(rng.integers(1, n + 1))]))
        if k <= n:
            out.append((n, c, k))
    out += [(10, 0, 1), (10, 10, 10), (10, 9, 2), (100, 0, 100), (100, 1, 100), (1, 1, 1), (1, 0, 1), (200, 101, 100)]
    return out


def test_sql_pass_at_k_matches_exact_rationals():
    triples = random_triples(0)
    got = sql_pass_at_k(triples)
    want = np.array([exact_pass_at_k(*t) for t in triples])
    assert np.max(np.abs(got - want)) < 1e-12
    # boundary facts of the estimator, exactly
    assert got[triples.index((10, 0, 1))] == 0.0  # empty product: the coalesce
    assert got[triples.index((100, 1, 100))] == 1.0  # n - c < k
    assert got[triples.index((10, 9, 2))] == 1.0


def test_sql_pass_at_k_matches_metrics_pass_at_k():
    metrics = pytest.importorskip("fade_core.metrics")
    triples = random_triples(1)
    got = sql_pass_at_k(triples)
    want = np.array([float(metrics.pass_at_k(n, c, k)) for n, c, k in triples])
    assert np.max(np.abs(got - want)) < 1e-12


# ----------------------------------------------------------------------------------- synthetic store
def synth_samples(spec: dict[tuple[str, int], dict[int, list[tuple[int, int]]]], benchmark: str = "countdown",
                  distinct: int | None = None) -> list[pd.DataFrame]:
    """spec: (method, seed) -> step -> [(n, c) per problem]. Correct completions cycle over `distinct` texts."""
    frames = []
    for (method, seed), steps in spec.items():
        run_id = f"{method}-s{seed}-0000abcd"
        for step, problems in steps.items():
            rows = []
            for p, (n, c) in enumerate(problems):
                for i in range(n):
                    ok = i < c
                    text = f"sol{i % distinct if distinct else i}" if ok else f"bad{i}"
                    rows.append(dict(run_id=run_id, method=method, seed=seed, step=step, benchmark=benchmark,
                                     problem_id=f"p{p}", difficulty_level="easy" if p % 2 == 0 else "hard",
                                     sample_index=i, completion=text, status="passed" if ok else "wrong", passed=ok,
                                     reward=float(ok), tokens=5, finish_reason="stop", latency_s=0.01))
            frames.append(pd.DataFrame(rows, columns=list(SAMPLE_COLUMNS)))
    return frames


def build(tmp_path: Path, frames: list[pd.DataFrame], ks=(1, 10, 100), train: pd.DataFrame | None = None,
          configs: dict | None = None) -> duckdb.DuckDBPyConnection:
    store = ResultsStore(tmp_path)
    for f in frames:
        store.write(f)
    con = store.connect()
    agg.build_tables(con, opts=agg.AggregateOptions(ks=ks), train=train, configs=configs)
    return con


def test_pass_at_k_table_averages_problems_and_buckets(tmp_path):
    rng = np.random.default_rng(3)
    spec = {("grpo", s): {st: [(int(n), int(rng.integers(0, n + 1))) for n in rng.integers(12, 40, size=6)]
                          for st in (10, 20)} for s in (0, 1)}
    con = build(tmp_path, synth_samples(spec))
    got = con.execute("SELECT seed, step, bucket, k, pass_at_k, num_problems, too_few_samples, incomplete "
                      "FROM pass_at_k").df()
    for (_, seed), steps in spec.items():
        for step, probs in steps.items():
            for bucket, idx in (("all", range(6)), ("easy", range(0, 6, 2)), ("hard", range(1, 6, 2))):
                for k in (1, 10, 100):
                    vals = [exact_pass_at_k(probs[i][0], probs[i][1], k) for i in idx if k <= probs[i][0]]
                    row = got[(got.seed == seed) & (got.step == step) & (got.bucket == bucket) & (got.k == k)]
                    if not vals:
                        assert row.empty
                        continue
                    assert abs(row.pass_at_k.item() - np.mean(vals)) < 1e-12
                    assert row.num_problems.item() == len(vals)
                    ns = [probs[i][0] for i in idx]
                    assert row.too_few_samples.item() == (min(ns) < 2 * k)
                    assert row.incomplete.item() == (len(vals) < len(ns))
    assert not (got.k == 100).any()  # n < 100 everywhere: pass@100 is never computed


def test_seed_stats_peak_frontier_and_fade_lead(tmp_path):
    # per-run pass@1 = c/n on one problem with n=20; FADE peaks at step 20, GRPO at step 40
    def curve(cs):
        return {step: [(20, c)] for step, c in zip((10, 20, 30, 40), cs, strict=True)}

    spec = {
        ("fade", 0): curve([4, 12, 10, 11]), ("fade", 1): curve([6, 14, 12, 12]),
        ("grpo", 0): curve([2, 6, 8, 10]), ("grpo", 1): curve([2, 4, 8, 12]),
        ("dr_grpo", 0): curve([1, 2, 3, 4]),
        ("base", 0): {0: [(20, 3)]},
    }
    con = build(tmp_path, synth_samples(spec, distinct=3), ks=(1, 10))
    seeds = con.execute("SELECT mean, std, num_seeds FROM pass_at_k_seeds WHERE method='fade' AND step=20 AND k=1 "
                        "AND bucket='all'").fetchone()
    assert seeds[0] == pytest.approx(0.65, abs=1e-12) and seeds[1] == pytest.approx(np.std([0.6, 0.7], ddof=1))
    assert seeds[2] == 2
    peak = con.execute("SELECT method, seed, peak_step, peak_pass_at_1, final_pass_at_1 FROM peak ORDER BY ALL").df()
    g0 = peak[(peak.method == "grpo") & (peak.seed == 1)].iloc[0]
    assert g0.peak_step == 40 and g0.peak_pass_at_1 == pytest.approx(0.6) and g0.final_pass_at_1 == pytest.approx(0.6)
    f1 = peak[(peak.method == "fade") & (peak.seed == 0)].iloc[0]
    assert f1.peak_step == 20 and f1.final_pass_at_1 == pytest.approx(0.55)
    lead = con.execute("SELECT method, baseline, steps_earlier, peak_gain FROM fade_lead").fetchall()
    # best static = grpo (peak 0.55 mean > dr_grpo 0.2; base is untrained); FADE peaks 20 steps earlier
    assert lead == [("fade", "grpo", 20.0, pytest.approx(0.65 - 0.55))]
    # distinct correct: 3 distinct correct texts once c >= 3
    dc = con.execute("SELECT mean_distinct_correct FROM distinct_correct WHERE method='dr_grpo' ORDER BY step").df()
    assert dc.mean_distinct_correct.tolist() == [1, 2, 3, 3]
    # frontier: the Pareto set holds no dominated point
    fr = con.execute("SELECT * FROM frontier WHERE k = 10").df()
    assert fr.pareto.any()
    for _, p in fr[fr.pareto].iterrows():
        dom = fr[(fr.pass_at_1 >= p.pass_at_1) & (fr.pass_at_k >= p.pass_at_k)
                 & ((fr.pass_at_1 > p.pass_at_1) | (fr.pass_at_k > p.pass_at_k))]
        assert dom.empty
    assert not fr[~fr.pareto].empty
    # comparisons at the last step: fade (0.55, 0.6) vs grpo (0.5, 0.6): diff 0.025 and each side's sd, no verdict
    cmp_ = con.execute("SELECT diff, std_a, std_b FROM comparisons WHERE k=1 AND "
                       "method_a='fade' AND method_b='grpo'").fetchone()
    assert cmp_[0] == pytest.approx(0.025) and cmp_[1] == pytest.approx(np.std([0.55, 0.6], ddof=1))
    cols = {r[0] for r in con.execute("DESCRIBE comparisons").fetchall()}
    assert not cols & {"seed_spread", "exceeds_seed_spread"}  # the old non-test rule is gone
    m = agg.headline_metrics(con)
    assert m["countdown"]["fade"]["pass@1"] == pytest.approx(0.575)
    assert m["countdown"]["fade"]["steps_earlier_than_baseline"] == 20.0
    assert "flags" not in m["countdown"]["fade"]  # n = 20 is not below 2 * 10


def test_runs_stopped_at_different_steps_share_one_final_row(tmp_path):
    # a rollout budget stops dapo's seeds at different steps (296, 293, 308); every seed's last checkpoint is
    # its final, so the final row holds all three, not the one seed that ran longest
    spec = {
        ("dapo", 0): {100: [(20, 2)], 296: [(20, 4)]},
        ("dapo", 1): {100: [(20, 3)], 293: [(20, 8)]},
        ("dapo", 2): {100: [(20, 1)], 200: [(20, 5)], 308: [(20, 6)]},
        ("grpo", 0): {100: [(20, 2)], 600: [(20, 10)]},
        ("grpo", 1): {100: [(20, 4)], 600: [(20, 12)]},
    }
    con = build(tmp_path, synth_samples(spec), ks=(1, 10))
    rows = con.execute("SELECT step, mean, num_seeds, seeds, run_step_min, run_step_max FROM pass_at_k_seeds "
                       "WHERE method = 'dapo' AND k = 1 AND bucket = 'all' ORDER BY step").fetchall()
    assert [r[0] for r in rows] == [100, 200, 308]  # no single-seed rows at 293 and 296
    fin = rows[-1]
    assert fin[1] == pytest.approx((4 + 8 + 6) / 60) and fin[2] == 3 and fin[3] == [0, 1, 2]
    assert (fin[4], fin[5]) == (293, 308)
    assert rows[1][2] == 1 and (rows[1][4], rows[1][5]) == (200, 200)  # a non-final step stays as it was
    m = agg.headline_metrics(con)
    assert m["countdown"]["dapo"]["num_seeds"] == 3 and m["countdown"]["dapo"]["pass@1"] == pytest.approx(0.3)
    cmp_ = con.execute("SELECT step_a, mean_a, seeds_a FROM comparisons WHERE k = 1 AND method_a = 'dapo'").fetchone()
    assert cmp_ == (308, pytest.approx(0.3), 3)
    fin_pts = con.execute("SELECT step, num_seeds FROM frontier WHERE method = 'dapo' AND is_final").fetchall()
    assert fin_pts == [(308, 3)]
    # the report's final per-problem scores: each run at its own last step
    from fade_core.report.tables import final_scores, headline_intervals

    fs = final_scores(con)
    got = fs[(fs.method == "dapo") & (fs.k == 1)].sort_values("seed")
    assert got.step.tolist() == [296, 293, 308] and got.pass_at_k.tolist() == pytest.approx([0.2, 0.4, 0.3])
    hl = headline_intervals(con)
    d = hl[(hl.method == "dapo") & (hl.k == 1)].iloc[0]
    assert d.final_step == "293-308" and d.seeds == 3 and d["mean"] == pytest.approx(0.3)
    assert hl[(hl.method == "grpo") & (hl.k == 1)].iloc[0].final_step == "600"


def test_training_records_and_export(tmp_path):
    runs = tmp_path / "runs"
    for method, seed in (("fade", 0), ("grpo", 0)):
        d = runs / f"{method}-s{seed}-0000abcd"
        d.mkdir(parents=True)
        (d / "config.yaml").write_text(f"train:\n  method: {method}\n  seed: {seed}\n")
        lines = [json.dumps({"step": s, "entropy": 1.0 - 0.1 * s, "m_S": 0.1 * s, "alpha": 2.0,
                             "hist": [1, 2], "clip": {"low": 0.01}}) for s in range(1, 5)]
        (d / "metrics.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 5, "entr')  # torn last line
    spec = {("fade", 0): {2: [(10, 5)], 4: [(10, 7)]}, ("grpo", 0): {2: [(10, 3)], 4: [(10, 4)]}}
    store = ResultsStore(tmp_path / "results")
    for f in synth_samples(spec):
        store.write(f)
    written = agg.aggregate(tmp_path / "results", runs_dir=runs, opts=agg.AggregateOptions(ks=(1, 10)))
    con = agg.open_results(tmp_path / "results")
    assert con.execute("SELECT count(*) FROM train_steps").fetchone()[0] == 8
    curves = con.execute("SELECT DISTINCT metric FROM train_curves ORDER BY 1").df().metric.tolist()
    assert curves == ["alpha", "clip.low", "entropy", "m_S"]
    et = con.execute("SELECT run_id, step, pass_at_1, entropy FROM eval_train ORDER BY ALL").fetchall()
    assert et[0] == ("fade-s0-0000abcd", 2, pytest.approx(0.5), pytest.approx(0.8))
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 40
    assert con.execute("SELECT is_fade FROM runs ORDER BY run_id").df().is_fade.tolist() == [True, False]
    con.close()
    for name in agg.TABLES:
        assert (tmp_path / "results" / "tables" / f"{name}.parquet").exists(), name
    for name in agg.PLOT_QUERIES:
        assert (tmp_path / "results" / "plots" / f"{name}.csv").exists(), name
    metrics = json.loads(written["metrics"].read_text())
    assert metrics["countdown"]["grpo"]["pass@1"] == pytest.approx(0.4)
    assert metrics["countdown"]["grpo"]["flags"] == ["pass@10: too few samples"]  # n = 10 < 2 * 10
    assert not list((tmp_path / "results").glob(".*.tmp"))


def test_aggregate_empty_store_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="fade evaluate"):
        agg.aggregate(tmp_path / "results", runs_dir=None)


def test_uniform_sampler_rows_are_exact_and_never_a_baseline(tmp_path):
    """The uniform sampler's rows: 1 - (1 - share)^k per evaluated problem and its means per bucket; problems
    without a share (absent, NaN metadata, non-countdown) get none; it is untrained, so never the best static."""
    import json as _json

    problems = pd.DataFrame({
        "problem_id": ["p0", "p1", "p2", "p3", "p9"],
        "metadata": [_json.dumps({"share_correct": 0.1}), _json.dumps({"share_correct": 0.0}),
                     _json.dumps({"share_correct": 0.5}), None, _json.dumps({"share_correct": 0.3})],
    })
    (tmp_path / "problems").mkdir()
    problems.to_parquet(tmp_path / "problems" / "countdown.parquet")
    shares = agg.countdown_shares(tmp_path / "problems")
    assert shares == {"countdown": {"p0": 0.1, "p1": 0.0, "p2": 0.5, "p9": 0.3}}
    assert agg.countdown_shares(tmp_path / "nowhere") == {}
    spec = {("base", 0): {0: [(8, 1), (8, 0), (8, 4), (8, 2)]}, ("grpo", 0): {10: [(8, 2), (8, 0), (8, 5), (8, 3)]}}
    store = ResultsStore(tmp_path / "eval")
    for f in synth_samples(spec):
        store.write(f.assign(run_id=f.run_id.where(f.method != "base", "base")))
    con = store.connect()
    agg.build_tables(con, opts=agg.AggregateOptions(ks=(1, 4, 16), uniform_shares=shares))
    # n = 8 samples: no model has pass@16, so neither has the uniform sampler
    assert con.execute("SELECT count(*) FROM pass_at_k WHERE k = 16").fetchone()[0] == 0
    pp = con.execute("SELECT problem_id, k, pass_at_k FROM pass_at_k_problem WHERE method = 'uniform' "
                     "ORDER BY problem_id, k").fetchall()
    # p3 has no share; p9 was not evaluated: neither gets a row
    want = [(p, k, 1 - (1 - s) ** k) for p, s in (("p0", 0.1), ("p1", 0.0), ("p2", 0.5)) for k in (1, 4)]
    assert [(p, k) for p, k, _ in pp] == [(p, k) for p, k, _ in want]
    assert all(v == pytest.approx(w) for (_, _, v), (_, _, w) in zip(pp, want, strict=True))
    rows = dict(con.execute("SELECT bucket, pass_at_k FROM pass_at_k WHERE method = 'uniform' AND k = 4").fetchall())
    assert rows["all"] == pytest.approx(np.mean([1 - 0.9 ** 4, 0.0, 1 - 0.5 ** 4]))
    assert rows["easy"] == pytest.approx(np.mean([1 - 0.9 ** 4, 1 - 0.5 ** 4]))  # p0, p2 are the easy ones
    seeds = con.execute("SELECT mean FROM pass_at_k_seeds WHERE method = 'uniform' AND bucket = 'all' AND k = 1").fetchone()
    assert seeds[0] == pytest.approx(np.mean([0.1, 0.0, 0.5]))
    lead_baselines = {r[0] for r in con.execute("SELECT baseline FROM fade_lead").fetchall()}
    assert "uniform" not in lead_baselines and "uniform" in agg.UNTRAINED_METHODS
