"""The math judge (kind ``math``): math-verify, run on the main thread of long-lived worker processes.

The gold answer (``problem["answer"]``) and the completion are parsed and compared with
``verify(gold, prediction)``, gold first (the order matters: the gold decides which forms count as
equal). Boxed answers (the last ``\\boxed{}``, ``\\fbox{}`` or ``\\framebox{}``) and plain answers
both parse. Integer answers compare as integers, so AIME's ``042`` equals ``42`` (:func:`fast_score`
skips sympy when both sides are plain integers). math-verify guards its parsing with signal-based
timeouts, which only work on a process's main thread, so every math-verify call runs on the main
thread of a long-lived worker process (:class:`MathPool`; a worker that hangs is killed and
replaced): threads and pools may call :func:`score_math` freely.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import re
import select
import subprocess
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from fade_core.verifiers import fields
from fade_core.verifiers.result import Score, failed, passed

MATH_TIMEOUT_S = 10.0

_BOXED = re.compile(r"\\(?:boxed|fbox|framebox)\s*\{")
_BOX_COMMANDS = re.compile(r"\\(?:fbox|framebox)(?=\s*\{)")
_INT = re.compile(r"^\s*[-+]?\d[\d,]*\s*$")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}``, ``\\fbox{...}`` or ``\\framebox{...}`` (balanced braces), or
    None."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    i = starts[-1]
    depth, j = 1, i
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return text[i : j - 1] if depth == 0 else None


def _as_int(s: str | None) -> int | None:
    if s is None:
        return None
    s = s.strip().strip("$").strip()
    if not _INT.match(s):
        return None
    digits = s.replace(",", "")
    try:
        return int(digits)
    except ValueError:
        return None


def _math_verify_worker(gold: str, completion: str) -> tuple[bool, str]:
    """Runs in a pool process (main thread): parse both sides and verify gold first."""
    from math_verify import parse, verify

    gold_text = gold if "$" in gold or "\\boxed" in gold else f"${gold}$"
    g = parse(gold_text, parsing_timeout=5)
    if not g:
        g = parse(gold, parsing_timeout=5)
    if not g:
        return False, "unparsable gold"
    p = parse(completion, parsing_timeout=5)
    if not p:
        return False, "no_answer"
    ok = bool(verify(g, p, timeout_seconds=5))
    return ok, "verified" if ok else "answer does not match the gold"


class MathPool:
    """A few long-lived Python processes that run math-verify on their main thread.

    Each worker reads ``[gold, completion]`` JSON lines on stdin and answers ``[ok, why]`` lines; a
    worker that does not answer within ``timeout`` seconds is killed and replaced (the answer is a
    timeout). Any thread may call :meth:`verify`; a worker serves one request at a time.
    """

    def __init__(self, workers: int | None = None, timeout: float = MATH_TIMEOUT_S * 3):
        self.n = max(1, workers or min(4, os.cpu_count() or 1))
        self.timeout = timeout
        self._free: queue.Queue[subprocess.Popen | None] = queue.Queue()
        for _ in range(self.n):
            self._free.put(None)  # started lazily
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        paths = json.dumps([p for p in sys.path if p])
        code = f"import sys, json; sys.path[:0] = json.loads({paths!r}); from fade_core.verifiers.math_answers import serve; serve()"
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, bufsize=1)  # fmt: skip
        with self._lock:
            self._procs.append(proc)
        return proc

    def _kill(self, proc: subprocess.Popen) -> None:
        proc.kill()
        proc.wait()
        with self._lock:
            if proc in self._procs:
                self._procs.remove(proc)

    def verify(self, gold: str, completion: str) -> tuple[bool, str]:
        proc = self._free.get()
        try:
            if proc is None or proc.poll() is not None:
                proc = self._start()
            proc.stdin.write(json.dumps([gold, completion]) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], self.timeout)
            line = proc.stdout.readline() if ready else ""
            if not line:
                self._kill(proc)
                proc = None
                return False, "timeout"
            ok, why = json.loads(line)
            return bool(ok), str(why)
        except (OSError, ValueError) as e:
            if proc is not None:
                self._kill(proc)
            proc = None
            return False, f"error: {e}"
        finally:
            self._free.put(proc)

    def close(self) -> None:
        with self._lock:
            procs, self._procs = list(self._procs), []
        for proc in procs:
            proc.kill()
            proc.wait()


def serve() -> None:
    """The math worker's loop (runs in its own process, main thread)."""
    for line in sys.stdin:
        gold, completion = json.loads(line)
        try:
            ok, why = _math_verify_worker(gold, completion)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            ok, why = False, f"error: {type(e).__name__}: {e}"
        sys.stdout.write(json.dumps([ok, why]) + "\n")
        sys.stdout.flush()


_pool: MathPool | None = None
_pool_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def _math_pool(workers: int | None = None) -> MathPool:
    global _pool, _executor
    with _pool_lock:
        if _pool is None:
            _pool = MathPool(workers)
            _executor = ThreadPoolExecutor(max_workers=_pool.n)
            atexit.register(close_pool)
        return _pool


def close_pool() -> None:
    """Stop the math workers (they restart on next use)."""
    global _pool, _executor
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _executor.shutdown(cancel_futures=True)
            _pool = _executor = None


def fast_score(gold: str, completion: str) -> Score | None:
    """Integer gold and an integer boxed answer (or an all-integer completion): no sympy needed."""
    g = _as_int(gold)
    if g is None:
        return None
    pred = last_boxed(completion)
    p = _as_int(pred) if pred is not None else _as_int(completion)
    if p is None:
        return None
    return passed() if p == g else failed("wrong_answer", f"{p} != {g}")


def as_boxed(completion: str) -> str:
    """``\\fbox{..}`` and ``\\framebox{..}`` written as ``\\boxed{..}`` (the form math-verify reads)."""
    return _BOX_COMMANDS.sub(r"\\boxed", completion)


def submit(gold: str, completion: str, workers: int | None = None) -> Future:
    """Start math-verify on ``completion`` against ``gold`` in the worker pool; :func:`collect` reads it."""
    pool = _math_pool(workers)
    return _executor.submit(pool.verify, gold, as_boxed(completion))


def collect(fut: Future) -> Score:
    """The score of a :func:`submit` call."""
    ok, why = fut.result()
    if ok:
        return passed()
    if why == "timeout":
        return failed("timeout", "math-verify did not finish")
    if why.startswith("error"):
        return failed("error", why)
    return failed("no_answer" if why == "no_answer" else "wrong_answer", why)


def score_math(problem: Mapping[str, Any], completion: str) -> Score:
    """One completion against the row's ``answer`` (see the module docstring)."""
    gold = fields.get(problem, "answer")
    if gold is None or str(gold).strip() == "":
        raise ValueError(f"problem {problem.get('problem_id')!r}: math problem without an answer")
    fast = fast_score(str(gold), completion)
    if fast is not None:
        return fast
    return collect(submit(str(gold), completion))

