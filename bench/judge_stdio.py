"""Judge throughput on stdio rows: this checkout of fade against another checkout (the peer), same run.

Scores the reference solutions of the stdio rows of a TACO source (default: the real-format sample
in ../shared/realdata/taco) ``--copies`` times each with :func:`fade_core.verifiers.score_batch`,
once with this checkout's fade_core and once with the peer's (e.g. main before a change:
``mkdir /tmp/fade-peer && git archive <commit> | tar -x -C /tmp/fade-peer``). Each side runs in its
own subprocess, ``--rounds`` times, in A B B A order so that a drift in the machine's load favours
neither; the median and the best round of each are reported (the machine may be shared: the best
round is the least disturbed one). The problems are the ones this checkout loads, passed to both as
plain rows, so both judge identical programs against identical tests.

    python bench/judge_stdio.py --peer /tmp/fade-peer [--copies 5] [--rounds 6] [--workers N]
    python bench/judge_stdio.py --peer /tmp/fade-peer --prelude-cost   # the import blocks alone

Prints a markdown table: programs per second for each side and the ratios (this / peer), and the CPU
time per program: the programs' own (each verdict's ``cpu_s``: everything a program does, its
prelude included, summed over its tests) and the parent's (building jobs, comparing outputs). CPU time
is disturbed far less than wall time by a busy machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNNER = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from fade_core import verifiers
from fade_core.sandbox import default_sandbox
rows = [json.loads(x) for x in open({rows!r})]
problems = [r["problem"] for r in rows] * {copies}
programs = [r["program"] for r in rows] * {copies}
verifiers.score_batch(problems[:8], programs[:8], workers={workers})  # start the pool (not timed)
self0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
jobs = [verifiers.code_job(p, c) for p, c in zip(problems, programs)]  # what score_batch does
verdicts = default_sandbox({workers}).run_batch(jobs)
dt = time.perf_counter() - t
self1 = resource.getrusage(resource.RUSAGE_SELF)
parent = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
print(json.dumps({{"per_s": len(jobs) / dt, "program_cpu_ms": 1e3 * sum(v.cpu_s for v in verdicts) / len(jobs),
                  "parent_cpu_ms": 1e3 * parent / len(jobs), "passed": sum(v.passed for v in verdicts),
                  "n": len(jobs)}}))
verifiers.shutdown()
"""


def stdio_rows(source: str) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from fade_core import data
    from fade_core.data.gold import reference_programs

    res = data.load_result("taco", source)
    out = []
    for row in data.records(res.table):
        if row["kind"] != "code_stdio":
            continue
        for program in reference_programs(row)[:1]:
            out.append({"problem": row, "program": program})
    return out


def run_side(root: Path, rows_file: str, copies: int, workers: int | None) -> dict:
    code = RUNNER.format(root=str(root), rows=rows_file, copies=copies, workers=workers)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"{root}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def prelude_cost(rows: list[dict], forks: int = 40) -> None:
    """Time, in forked children of a process that has the standard library loaded (as the sandbox
    worker has), the whole import block of each harness against the part each program needs."""
    import gc
    import os
    import time

    sys.path.insert(0, str(ROOT))
    from fade_core import verifiers

    def child_us(source: str) -> float:
        code = compile(source, "<prelude>", "exec")
        times = []
        for _ in range(forks):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                t = time.perf_counter()
                exec(code, {"__name__": "__main__"})
                os.write(w, repr(time.perf_counter() - t).encode())
                os._exit(0)
            os.close(w)
            times.append(float(os.read(r, 64)))
            os.close(r)
            os.waitpid(pid, 0)
        return 1e6 * statistics.median(times)

    for p in verifiers.PRELUDES.values():
        exec(p.text(stdio=True), {})  # load every module once, as the worker has them loaded
    gc.collect()
    gc.freeze()
    print(
        "\n| prelude | whole block, us per forked process | the part programs need, us (median over rows) |"
    )
    print("|---|---|---|")
    for name, p in verifiers.PRELUDES.items():
        whole = child_us(p.text(stdio=True))
        parts = [
            child_us(p.apply(r["program"], stdio=True)[: -len(r["program"])] or "pass\n") for r in rows[:20]
        ]
        print(f"| {name} | {whole:.0f} | {statistics.median(parts):.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", required=True, help="another fade checkout (its fade_core is imported)")
    ap.add_argument("--source", default=str(ROOT.parent / "shared" / "realdata" / "taco"))
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument(
        "--prelude-cost", action="store_true", help="only time the import blocks in forked children"
    )
    args = ap.parse_args()
    rows = stdio_rows(args.source)
    if args.prelude_cost:
        prelude_cost(rows)
        return
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    sides = {"this checkout": ROOT, "peer": Path(args.peer)}
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for i in range(args.rounds):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for name in order:
            runs[name].append(run_side(sides[name], f.name, args.copies, args.workers))
    rate = {name: sorted(r["per_s"] for r in rs) for name, rs in runs.items()}
    median = {name: statistics.median(v) for name, v in rate.items()}
    prog = {name: statistics.median(r["program_cpu_ms"] for r in rs) for name, rs in runs.items()}
    parent = {name: statistics.median(r["parent_cpu_ms"] for r in rs) for name, rs in runs.items()}
    print(f"{len(rows)} stdio rows x {args.copies} copies, {args.rounds} rounds per side\n")
    print(
        "| judge | programs/s, median | programs/s, best | program CPU ms, median | parent CPU ms, median | passed |"
    )
    print("|---|---|---|---|---|---|")
    for name, root in sides.items():
        last = runs[name][-1]
        print(
            f"| {name} ({root}) | {median[name]:.1f} | {rate[name][-1]:.1f} | {prog[name]:.2f} | "
            f"{parent[name]:.2f} | {last['passed']}/{last['n']} |"
        )
    this, peer = "this checkout", "peer"
    print(
        f"\nratio this / peer, programs/s: median {median[this] / median[peer]:.2f}, best "
        f"{rate[this][-1] / rate[peer][-1]:.2f}; CPU per program (programs + parent): "
        f"{(prog[this] + parent[this]) / (prog[peer] + parent[peer]):.2f}"
    )


if __name__ == "__main__":
    main()
