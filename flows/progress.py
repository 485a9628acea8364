"""Per-stage progress of `fade run`, with an ETA, read from what the stage writes (issue 16 point 10).

The work of a stage runs in other processes (Dask workers, the warm start's task), so progress is counted
from the files it leaves as it goes: lines of the warm start's ``warmstart.jsonl``, steps in each training
run's ``metrics.jsonl``, results parts in the store. :func:`watch` runs a thread that prints one line

    fade run: train 37/96 steps (38%), 1m12s elapsed, ETA 1m58s

every :data:`INTERVAL_PIPE` seconds when stderr is not a terminal (a log file, a pipe, a CI job), or
rewrites it in place every :data:`INTERVAL_TTY` seconds on a terminal; the ETA is the rate since the stage
started (work done before it, e.g. by a run resumed from its checkpoint, does not count towards the rate).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

INTERVAL_PIPE = 10.0
INTERVAL_TTY = 1.0


def duration(seconds: float) -> str:
    """'1h02m', '3m05s', '42s'."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def progress_line(stage: str, unit: str, done: int, total: int, start_done: int, elapsed: float) -> str:
    """One progress line; the ETA extrapolates the rate of the work done since the stage started."""
    done = min(done, total)
    pct = f" ({100 * done // total}%)" if total else ""
    line = f"fade run: {stage} {done}/{total} {unit}{pct}, {duration(elapsed)} elapsed"
    rate_done = done - start_done
    if 0 < rate_done and done < total:
        line += f", ETA {duration(elapsed / rate_done * (total - done))}"
    return line


def jsonl_last_step(path: Path) -> int:
    """The ``step`` of the last complete line of a JSON-lines log (0: none yet). Read from the end in growing
    windows: a real model's step record (with its example completions) is often longer than any fixed tail, and
    a window that held no whole line made the count fall back to 0 mid-run."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            window = 4096
            while True:
                start = max(0, size - window)
                f.seek(start)
                lines = f.read(size - start).splitlines()
                if start > 0:
                    lines = lines[1:]  # cut by the window: not a whole line
                for raw in reversed(lines):
                    try:
                        return int(json.loads(raw)["step"])
                    except (ValueError, KeyError, TypeError):
                        continue
                if start == 0:
                    return 0
                window *= 4
    except OSError:
        return 0


def training_steps(runs_dirs: list[Path], steps: int) -> int:
    """Steps recorded so far by every run under ``runs_dirs`` (each run counted up to ``steps``)."""
    return sum(min(steps, jsonl_last_step(m)) for d in runs_dirs for m in d.glob("*/metrics.jsonl"))


def planned_steps(run_dirs: list[Path], steps: int) -> int:
    """Steps recorded so far by exactly the runs ``run_dirs`` (each counted up to ``steps``): other runs in the
    same folders (another config's, left by an earlier study) do not count."""
    return sum(min(steps, jsonl_last_step(d / "metrics.jsonl")) for d in run_dirs)


def results_parts(results_dir: Path) -> int:
    """Results parts committed so far (one per evaluated checkpoint and benchmark)."""
    return sum(1 for _ in (results_dir / "samples").rglob("step-*.parquet")) if results_dir.is_dir() else 0


def note(text: str, *, stream=None) -> None:
    """One line of fade's own progress that is not a count (a stage found current and not redone), on stderr
    beside the progress lines: the terminal keeps only fade's lines, Prefect's INFO records go to the log file."""
    out = stream if stream is not None else sys.stderr
    out.write(f"fade run: {text}\n")
    out.flush()


@contextlib.contextmanager
def watch(stage: str, unit: str, total: int, count: Callable[[], int], *, stream=None,
          interval: float | None = None) -> Iterator[None]:
    """Print :func:`progress_line` of ``count()`` out of ``total`` until the block ends (then a final line)."""
    out = stream if stream is not None else sys.stderr
    tty = bool(getattr(out, "isatty", lambda: False)())
    every = interval if interval is not None else (INTERVAL_TTY if tty else INTERVAL_PIPE)
    t0 = time.monotonic()
    start = _safe(count)
    stop = threading.Event()

    def show(final: bool = False) -> None:
        line = progress_line(stage, unit, _safe(count), total, start, time.monotonic() - t0)
        if tty:
            out.write("\r\033[K" + line + ("\n" if final else ""))
        else:
            out.write(line + "\n")
        out.flush()

    def loop() -> None:
        while not stop.wait(every):
            show()

    thread = threading.Thread(target=loop, name=f"fade-progress-{stage}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        show(final=True)


def _safe(count: Callable[[], int]) -> int:
    try:
        return int(count())
    except OSError:  # a file replaced while it was read: the next tick counts it
        return 0
