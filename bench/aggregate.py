"""pass@k aggregation over many samples: fade's DuckDB SQL against pandas + numpy, in one run.

    python bench/aggregate.py [--samples 10000000] [--n 100] [--ks 1,10,100]

The input is a parquet file of one row per sample (run, step, problem, passed), like the results store
holds. Both sides start from that file and end with the mean pass@k per (run, step) for every k:

- fade: one DuckDB query: count per problem, the spec's exact product form of pass@k, mean per run/step
  (the SQL of fade_core.aggregate.pass_at_k_sql);
- peer: pandas reads the parquet, groups per problem, numpy computes pass@k
  (fade_core.metrics.pass_at_k, vectorised) and pandas averages per run/step.

It checks that both agree to 1e-9 and prints seconds for each, their ratio and the peak memory of each
side (each side runs in a fresh process so that its peak RSS is its own).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_samples(path: Path, samples: int, n: int, seed: int = 0) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    groups = samples // n
    runs, steps = 10, 10
    problems = max(1, groups // (runs * steps))
    g = np.arange(problems * runs * steps)
    p = rng.beta(0.5, 2.0, size=g.size)  # per-problem solve rates, many hard problems
    passed = rng.random((g.size, n)) < p[:, None]
    table = pa.table({
        "run_id": np.repeat((g // (problems * steps)).astype(np.int32), n),
        "step": np.repeat(((g // problems) % steps).astype(np.int32), n),
        "problem_id": np.repeat((g % problems).astype(np.int32), n),
        "passed": passed.reshape(-1),
    })
    pq.write_table(table, path, row_group_size=1 << 20)


def fade_side(path: str, ks: list[int]) -> dict:
    import duckdb

    from fade_core.aggregate import pass_at_k_sql

    t = time.perf_counter()
    con = duckdb.connect()
    cols = ", ".join(f"avg({pass_at_k_sql('n', 'c', str(k))}) AS p{k}" for k in ks)
    df = con.execute(f"""
        WITH per_problem AS (
            SELECT run_id, step, problem_id, count(*) AS n, sum(passed::INT) AS c
            FROM read_parquet('{path}') GROUP BY ALL)
        SELECT run_id, step, {cols} FROM per_problem GROUP BY run_id, step ORDER BY run_id, step""").df()
    return {"seconds": time.perf_counter() - t, "result": df.to_dict("list")}


def peer_side(path: str, ks: list[int]) -> dict:
    import pandas as pd

    from fade_core.metrics import pass_at_k

    t = time.perf_counter()
    df = pd.read_parquet(path)
    per = df.groupby(["run_id", "step", "problem_id"], sort=False)["passed"].agg(["size", "sum"]).reset_index()
    for k in ks:
        per[f"p{k}"] = pass_at_k(per["size"].to_numpy(), per["sum"].to_numpy(), k)
    out = per.groupby(["run_id", "step"])[[f"p{k}" for k in ks]].mean().reset_index().sort_values(["run_id", "step"])
    return {"seconds": time.perf_counter() - t, "result": out.to_dict("list")}


def child(side: str, path: str, ks: list[int]) -> None:
    res = (fade_side if side == "fade" else peer_side)(path, ks)
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(res, default=float))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--n", type=int, default=100, help="samples per problem")
    ap.add_argument("--ks", default="1,10,100")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    if args.child:
        child(args.child[0], args.child[1], ks)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "samples.parquet"
        make_samples(path, args.samples, args.n)
        runs: dict[str, list[dict]] = {"fade": [], "peer": []}
        for _ in range(args.repeats):
            for side in ("fade", "peer"):
                out = subprocess.run([sys.executable, __file__, "--ks", args.ks, "--child", side, str(path)],
                                     capture_output=True, text=True, check=True)
                runs[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    import numpy as np

    a, b = runs["fade"][0]["result"], runs["peer"][0]["result"]
    diff = max(float(np.max(np.abs(np.asarray(a[f"p{k}"]) - np.asarray(b[f"p{k}"])))) for k in ks)
    assert diff < 1e-9, f"fade and peer disagree by {diff}"
    med = {s: float(np.median([r["seconds"] for r in runs[s]])) for s in runs}
    mem = {s: max(r["peak_rss_mb"] for r in runs[s]) for s in runs}
    print(f"\npass@k aggregation, {args.samples:,} samples ({args.n} per problem), k in {ks}; "
          f"{platform.machine()}, {os.cpu_count()} cores; median of {args.repeats}")
    print("| side | seconds | peak RSS (MB) |\n|---|---:|---:|")
    print(f"| fade (DuckDB SQL) | {med['fade']:.2f} | {mem['fade']:.0f} |")
    print(f"| peer (pandas + numpy) | {med['peer']:.2f} | {mem['peer']:.0f} |")
    print(f"\nspeed ratio peer/fade: {med['peer'] / med['fade']:.2f}x; memory ratio peer/fade: "
          f"{mem['peer'] / mem['fade']:.2f}x; max abs difference {diff:.1e}")
    print(f"command: python bench/aggregate.py --samples {args.samples} --n {args.n} --ks {args.ks}")


if __name__ == "__main__":
    main()
