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

Prints a markdown table: programs per second for each side and the ratios (this / peer).
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
import json, sys, time
sys.path.insert(0, {root!r})
from fade_core import verifiers
rows = [json.loads(x) for x in open({rows!r})]
problems = [r["problem"] for r in rows] * {copies}
programs = [r["program"] for r in rows] * {copies}
verifiers.score_batch(problems[:8], programs[:8], workers={workers})  # start the pool (not timed)
t = time.perf_counter()
scores = verifiers.score_batch(problems, programs, workers={workers})
dt = time.perf_counter() - t
print(json.dumps({{"per_s": len(programs) / dt, "passed": sum(s.passed for s in scores), "n": len(programs)}}))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", required=True, help="another fade checkout (its fade_core is imported)")
    ap.add_argument("--source", default=str(ROOT.parent / "shared" / "realdata" / "taco"))
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    rows = stdio_rows(args.source)
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
    print(f"{len(rows)} stdio rows x {args.copies} copies, {args.rounds} rounds per side\n")
    print("| judge | programs/s, median | programs/s, best | passed |")
    print("|---|---|---|---|")
    for name, root in sides.items():
        last = runs[name][-1]
        print(f"| {name} ({root}) | {median[name]:.1f} | {rate[name][-1]:.1f} | {last['passed']}/{last['n']} |")
    this, peer = "this checkout", "peer"
    print(f"\nratio this / peer: median {median[this] / median[peer]:.2f}, best {rate[this][-1] / rate[peer][-1]:.2f}")


if __name__ == "__main__":
    main()
