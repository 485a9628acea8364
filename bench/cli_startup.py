"""CPU seconds of `fade --help`, `fade params` and a config error: this checkout's CLI against the CLI at a git
ref, in one run.

    python bench/cli_startup.py [--ref main] [--rounds 5]

The peer is fade's own CLI as of ``--ref`` (issue 16: it imported torch, transformers, Prefect and every
flow before parsing arguments), exported with ``git archive`` to a temporary folder and run with the same
Python and packages (``PYTHONPATH`` puts the exported tree first). Each command runs ``--rounds`` times per
side, interleaved; the CPU time (user + system) of each child process is read from ``getrusage``, and the
median per side and the ratio peer / this checkout are printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {"fade --help": (["--help"], 0), "fade params": (["params"], 0),
            "fade run --set train.nope=1 (a config error)": (["run", "--set", "train.nope=1"], 2)}
"""Command line after `fade`, and the exit status it must end with (the error is one on both sides: exit 2)."""
ENTRY = "import sys; from flows.cli import main; sys.argv[0] = 'fade'; main()"


def export(ref: str, dest: Path) -> Path:
    """The tree of ``ref`` (flows/, fade_core/, tasks/) in ``dest``."""
    archive = dest / "ref.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref, "flows", "fade_core", "tasks"],
                   check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "tree", filter="data")
    return dest / "tree"


def cpu_seconds(tree: Path, args: list[str], expect: int, cwd: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one `fade ARGS` run from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != expect:
        raise SystemExit(f"{tree}: fade {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="main", help="git ref of the peer CLI (default: main)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        peer = export(a.ref, Path(tmp))
        cwd = Path(tmp) / "cwd"
        cwd.mkdir()
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(a.rounds):
            for name, (args, expect) in COMMANDS.items():
                for side, tree in (("this checkout", ROOT), (f"`{a.ref}`", peer)):
                    results.setdefault((name, side), []).append(cpu_seconds(tree, args, expect, cwd))
    load = os.getloadavg()[0]
    print(f"rounds: {a.rounds}, median per side; load average {load:.1f}; Python {sys.version.split()[0]}\n")
    print("| command | side | CPU s | wall s | CPU ratio peer / this |")
    print("|---|---|---:|---:|---:|")
    for name in COMMANDS:
        this = results[(name, "this checkout")]
        other = results[(name, f"`{a.ref}`")]
        cpu_this, cpu_peer = statistics.median(c for c, _ in this), statistics.median(c for c, _ in other)
        print(f"| {name} | this checkout | {cpu_this:.2f} | {statistics.median(w for _, w in this):.2f} | |")
        print(f"| {name} | `{a.ref}` | {cpu_peer:.2f} | {statistics.median(w for _, w in other):.2f} | "
              f"**{cpu_peer / cpu_this:.1f}x** |")


if __name__ == "__main__":
    main()
