"""Verifiers: one entry point that turns (problem, completion) into a reward.

``score(problem, completion) -> Score`` dispatches on ``problem["kind"]`` (the problem table's
columns, see fade_core/data/schema.py):

- ``expression`` (countdown): :func:`fade_core.countdown.check` in-process (an AST whitelist, nothing
  evaluated); the numbers and target come from the row's metadata, else from the prompt text.
- ``math``: math-verify. The gold answer (``problem["answer"]``) and the completion are parsed and
  compared with ``verify(gold, prediction)``, gold first (the order matters: the gold decides which
  forms count as equal). Boxed answers (the last ``\\boxed{}``) and plain answers both parse. Integer
  answers compare as integers, so AIME's ``042`` equals ``42`` (a fast path skips sympy when both sides
  are plain integers). math-verify guards its parsing with signal-based timeouts, which only work on
  a process's main thread, so every math-verify call runs on the main thread of a long-lived worker
  process (:class:`MathPool`; a worker that hangs is killed and replaced): threads and pools may
  call :func:`score` freely.
- ``code_stdio`` / ``code_call``: the code is the last fenced ```python block of the completion if it
  has one, else the raw text; it runs in :mod:`fade_core.sandbox` against the row's tests. HumanEval
  rows (tests of testtype "humaneval") run ``prompt + completion`` (or ``prompt`` + the fenced block
  when the block itself defines the entry point) against the ``check`` program.

Reward is 1.0 when the answer is verified correct, else 0.0 (``Score.passed``); ``status`` says why.
:func:`score_batch` runs many at once: countdown in-process, math in the process pool, code in the
sandbox's worker pool.
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
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from fade_core import countdown_task as countdown

KINDS = ("code_stdio", "code_call", "math", "expression")
MATH_TIMEOUT_S = 10.0


@dataclass
class Score:
    """reward in [0, 1]; passed; status (passed, wrong_answer, no_answer, timeout, runtime_error,
    compile_error, memory_limit, output_limit, sandbox_error, error); detail (free text)."""

    reward: float
    passed: bool
    status: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ok(detail: str = "ok") -> Score:
    return Score(1.0, True, "passed", detail)


def _fail(status: str, detail: str = "") -> Score:
    return Score(0.0, False, status, detail)


def _metadata(problem: Mapping[str, Any]) -> dict[str, Any]:
    md = problem.get("metadata")
    if md is None or md == "":
        return {}
    if isinstance(md, Mapping):
        return dict(md)
    try:
        out = json.loads(md)
    except (TypeError, ValueError) as e:
        raise ValueError(f"problem {problem.get('problem_id')!r}: metadata is not a JSON object: {e}") from None
    if not isinstance(out, dict):
        raise ValueError(f"problem {problem.get('problem_id')!r}: metadata is not a JSON object")
    return out


def _tests(problem: Mapping[str, Any]) -> list[dict[str, Any]]:
    tests = problem.get("tests")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests) if tests else []
        except ValueError as e:
            raise ValueError(f"problem {problem.get('problem_id')!r}: tests is not JSON: {e}") from None
    if not isinstance(tests, list):
        raise ValueError(f"problem {problem.get('problem_id')!r}: tests must be a JSON list")
    return tests


# ------------------------------------------------------------------------------------- countdown
_PROMPT_RE = re.compile(r"^\s*([\d\s]+?)\s*->\s*(-?\d+)\s*:")


def score_expression(problem: Mapping[str, Any], completion: str) -> Score:
    """Countdown: numbers and target from metadata (or the prompt), checked by countdown.check."""
    md = _metadata(problem)
    numbers, target = md.get("numbers"), md.get("target")
    if numbers is None or target is None:
        m = _PROMPT_RE.match(str(problem.get("prompt", "")))
        if not m:
            raise ValueError(f"problem {problem.get('problem_id')!r}: no numbers/target in metadata or prompt")
        numbers, target = [int(x) for x in m.group(1).split()], int(m.group(2))
    ok, reason = countdown.check(completion, numbers, int(target))
    return _ok() if ok else _fail("wrong_answer" if reason != "empty" else "no_answer", reason)


# ------------------------------------------------------------------------------------------ math
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_INT = re.compile(r"^\s*[-+]?\d[\d,]*\s*$")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None."""
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
        code = f"import sys, json; sys.path[:0] = json.loads({paths!r}); from fade_core.verifiers import _math_serve; _math_serve()"
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


def _math_serve() -> None:
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
            atexit.register(shutdown)
        return _pool


def shutdown() -> None:
    """Stop the math workers and the default sandbox (both restart on next use)."""
    global _pool, _executor
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _executor.shutdown(cancel_futures=True)
            _pool = _executor = None
    from fade_core.sandbox import pool as sbpool

    if sbpool._default is not None:
        sbpool._default.close()


def _math_fast(gold: str, completion: str) -> Score | None:
    """Integer gold and an integer boxed answer (or an all-integer completion): no sympy needed."""
    g = _as_int(gold)
    if g is None:
        return None
    pred = last_boxed(completion)
    p = _as_int(pred) if pred is not None else _as_int(completion)
    if p is None:
        return None
    return _ok() if p == g else _fail("wrong_answer", f"{p} != {g}")


def _math_submit(gold: str, completion: str, workers: int | None = None):
    pool = _math_pool(workers)
    return _executor.submit(pool.verify, gold, completion)


def _math_result(fut) -> Score:
    ok, why = fut.result()
    if ok:
        return _ok()
    if why == "timeout":
        return _fail("timeout", "math-verify did not finish")
    if why.startswith("error"):
        return _fail("error", why)
    return _fail("no_answer" if why == "no_answer" else "wrong_answer", why)


def score_math(problem: Mapping[str, Any], completion: str) -> Score:
    gold = problem.get("answer")
    if gold is None or str(gold).strip() == "":
        raise ValueError(f"problem {problem.get('problem_id')!r}: math problem without an answer")
    fast = _math_fast(str(gold), completion)
    if fast is not None:
        return fast
    return _math_result(_math_submit(str(gold), completion))


# ------------------------------------------------------------------------------------------ code
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(completion: str) -> str:
    """The last ```python (or ```py) fenced block; else the last fenced block of any language; else
    the raw completion."""
    blocks = _FENCE.findall(completion)
    py = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    if py:
        return py[-1]
    if blocks:
        return blocks[-1][1]
    return completion


def code_job(problem: Mapping[str, Any], completion: str):
    """The sandbox :class:`~fade_core.sandbox.Job` of a code problem and completion."""
    from fade_core.sandbox import Job, judge_from_metadata

    kind = problem.get("kind")
    tests = _tests(problem)
    fn_name = problem.get("fn_name") or None
    judge, tol = judge_from_metadata(_metadata(problem))
    prompt = str(problem.get("prompt") or "")
    if any(t.get("testtype") == "humaneval" for t in tests):
        block = extract_code(completion) if "```" in completion else None
        if block is not None and fn_name and re.search(rf"^\s*def\s+{re.escape(fn_name)}\s*\(", block, re.M):
            program = prompt + "\n" + block
        else:
            program = prompt + completion
        return Job(program, tests, "call", fn_name=fn_name, prompt=prompt, judge=judge, float_tol=tol)
    code = extract_code(completion)
    sb_kind = "stdio" if kind == "code_stdio" else "call"
    if sb_kind == "call" and not fn_name:
        raise ValueError(f"problem {problem.get('problem_id')!r}: code_call problem without fn_name")
    return Job(code, tests, sb_kind, fn_name=fn_name, judge=judge, float_tol=tol)


def _from_verdict(v) -> Score:
    detail = f"{v.tests_passed}/{v.tests_total} tests; {v.detail}"
    return _ok(detail) if v.passed else _fail(v.status, detail)


def score_code(problem: Mapping[str, Any], completion: str, *, unsafe: bool = False) -> Score:
    from fade_core.sandbox import default_sandbox

    job = code_job(problem, completion)
    return _from_verdict(default_sandbox(unsafe=unsafe).run_batch([job])[0])


# -------------------------------------------------------------------------------------- dispatch
def _kind(problem: Mapping[str, Any]) -> str:
    kind = problem.get("kind")
    if kind not in KINDS:
        raise ValueError(f"problem {problem.get('problem_id')!r}: kind={kind!r} is not one of {KINDS}")
    return kind


def score(problem: Mapping[str, Any], completion: str) -> Score:
    """Score one completion against its problem (see the module docstring). Thread-safe."""
    kind = _kind(problem)
    if kind == "expression":
        return score_expression(problem, completion)
    if kind == "math":
        return score_math(problem, completion)
    return score_code(problem, completion, unsafe=os.environ.get("FADE_SANDBOX_UNSAFE") == "1")


def score_batch(
    problems: Sequence[Mapping[str, Any]],
    completions: Sequence[str],
    workers: int | None = None,
    *,
    progress: bool = False,
) -> list[Score]:
    """Score ``completions[i]`` against ``problems[i]`` for every i; results in input order.
    ``workers``: sandbox slots and math processes (default: one per CPU)."""
    if len(problems) != len(completions):
        raise ValueError(f"{len(problems)} problems but {len(completions)} completions")
    out: list[Score | None] = [None] * len(problems)
    math_futs: dict[int, Any] = {}
    code_idx, jobs = [], []
    for i, (p, c) in enumerate(zip(problems, completions, strict=True)):
        kind = _kind(p)
        if kind == "expression":
            out[i] = score_expression(p, c)
        elif kind == "math":
            gold = p.get("answer")
            if gold is None or str(gold).strip() == "":
                raise ValueError(f"problems[{i}] ({p.get('problem_id')!r}): math problem without an answer")
            fast = _math_fast(str(gold), c)
            if fast is not None:
                out[i] = fast
            else:
                math_futs[i] = _math_submit(str(gold), c, workers)
        else:
            code_idx.append(i)
            jobs.append(code_job(p, c))
    if jobs:
        from fade_core.sandbox import default_sandbox

        verdicts = default_sandbox(workers, unsafe=os.environ.get("FADE_SANDBOX_UNSAFE") == "1").run_batch(
            jobs, progress=progress
        )
        for i, v in zip(code_idx, verdicts, strict=True):
            out[i] = _from_verdict(v)
    for i, fut in math_futs.items():
        out[i] = _math_result(fut)
    return [s for s in out if s is not None]
