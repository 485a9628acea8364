"""Verifiers: one entry point that turns (problem, completion) into a reward.

``score(problem, completion) -> Score`` dispatches on ``problem["kind"]`` (the problem table's
columns, see fade_core/data/schema.py):

- ``expression`` (countdown): :func:`fade_core.countdown_task.check` in-process (an AST whitelist, nothing
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
  Benchmarks whose official harness runs every program after a block of standard imports (TACO's
  metrics/testing_util.py, LiveCodeBench's lcb_runner/evaluation/testing_util.py) get the same block
  here (:data:`PRELUDES`, :func:`prelude_for`), so a correct program that uses ``Counter`` or
  ``lru_cache`` without importing it is judged as the official harness judges it. HumanEval gets
  none. A row's ``metadata.prelude`` (a benchmark name, or null for none, written by ``fade prepare``
  from ``data.code_prelude``) overrides the benchmark's default.
  The output judge comes from the row's metadata (:func:`fade_core.sandbox.compare.judge_from_metadata`):
  a special-judge row with a ``checker`` program is decided by that program, run in a sandbox of its
  own (:func:`run_checker`); one that nothing can decide scores 0 with status ``undecidable``
  without running (``fade prepare`` leaves such rows out unless asked); one included with the
  lenient rule passes with status ``passed_lenient``.

Reward is 1.0 when the answer is verified correct, else 0.0 (``Score.passed``); ``status`` says why.
Math answers may be given in ``\\boxed{}``, ``\\fbox{}`` or ``\\framebox{}``.
:func:`score_batch` runs many at once: countdown in-process, math in the process pool, code in the
sandbox's worker pool.
"""

from __future__ import annotations

import atexit
import builtins
import functools
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
from fade_core.sandbox import compare

KINDS = ("code_stdio", "code_call", "math", "expression")
MATH_TIMEOUT_S = 10.0


@dataclass
class Score:
    """reward in [0, 1]; passed; status (passed, passed_lenient, wrong_answer, no_answer, timeout,
    runtime_error, compile_error, memory_limit, output_limit, sandbox_error, undecidable, error);
    detail (free text). ``passed_lenient``: passed under the lenient special-judge rule, which also
    passes some invalid answers (see fade_core.sandbox.compare)."""

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


def _field(problem: Mapping[str, Any], key: str) -> Any:
    """``problem[key]``, with a missing value (None, or NaN as pandas gives for a null string) as None."""
    v = problem.get(key)
    return None if isinstance(v, float) and v != v else v


def _metadata(problem: Mapping[str, Any]) -> dict[str, Any]:
    md = _field(problem, "metadata")
    if md is None or md == "":
        return {}
    if isinstance(md, Mapping):
        return dict(md)
    try:
        out = json.loads(md)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"problem {problem.get('problem_id')!r}: metadata is not a JSON object: {e}"
        ) from None
    if not isinstance(out, dict):
        raise ValueError(f"problem {problem.get('problem_id')!r}: metadata is not a JSON object")
    return out


def _tests(problem: Mapping[str, Any]) -> list[dict[str, Any]]:
    tests = _field(problem, "tests")
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
            raise ValueError(
                f"problem {problem.get('problem_id')!r}: no numbers/target in metadata or prompt"
            )
        numbers, target = [int(x) for x in m.group(1).split()], int(m.group(2))
    ok, reason = countdown.check(completion, numbers, int(target))
    return _ok() if ok else _fail("wrong_answer" if reason != "empty" else "no_answer", reason)


# ------------------------------------------------------------------------------------------ math
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
    """Stop the math workers, the checker sandbox and the default sandbox (all restart on next use)."""
    global _pool, _executor, _checker_sandbox
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _executor.shutdown(cancel_futures=True)
            _pool = _executor = None
    with _checker_lock:
        box, _checker_sandbox = _checker_sandbox, None
    if box is not None:
        box.close()
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


def as_boxed(completion: str) -> str:
    """``\\fbox{..}`` and ``\\framebox{..}`` written as ``\\boxed{..}`` (the form math-verify reads)."""
    return _BOX_COMMANDS.sub(r"\\boxed", completion)


def _math_submit(gold: str, completion: str, workers: int | None = None):
    pool = _math_pool(workers)
    return _executor.submit(pool.verify, gold, as_boxed(completion))


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
    gold = _field(problem, "answer")
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


@dataclass(frozen=True)
class Prelude:
    """The block of standard imports that a benchmark's official harness runs before every program.

    ``statements``: ``import m`` / ``from m import a, b`` / ``from m import *`` lines, in the
    harness's order (the order matters: a later import rebinds an earlier name); ``lazy``: (name,
    module) pairs bound to a stand-in that imports the module on its first attribute access (numpy:
    importing it for real would cost a stdio test about 0.1 s); ``stdio_aliases``: bind
    ``stdin``/``stdout`` to ``sys.stdin``/``sys.stdout`` for stdio programs; ``recursion_limit``:
    call ``sys.setrecursionlimit`` after the imports. ``source`` names where the harness does it.

    :meth:`apply` binds only the names a program refers to, each to exactly the object the whole
    block would bind it to (:meth:`bindings`): in a forked sandbox process the block's ~1,500 star-
    imported names would cost ~1.5 ms per test in copy-on-write page faults, while programs refer to a
    handful. A program that can look names up dynamically (``eval``, ``exec``, ``globals``, ``vars``,
    ``locals``, ``__import__`` anywhere in its text) gets the whole block."""

    source: str
    statements: tuple[str, ...]
    lazy: tuple[tuple[str, str], ...] = ()
    stdio_aliases: bool = False
    recursion_limit: int | None = None

    @functools.cached_property
    def bindings(self) -> dict[str, str]:
        """Each name the block binds -> the one import line that binds it to its final object (run
        here once, on the standard library only)."""
        ns: dict[str, Any] = {}
        out: dict[str, str] = {}
        for stmt in self.statements:
            before = dict(ns)
            exec(stmt, ns)  # noqa: S102 - our own import lines
            module = stmt.split()[1]
            for name, value in ns.items():
                if name != "__builtins__" and (name not in before or before[name] is not value):
                    out[name] = (
                        f"import {name}" if stmt.startswith("import ") else f"from {module} import {name}"
                    )
        # a name whose final object is the builtin of that name needs no binding: lookups end there
        return {n: line for n, line in out.items() if ns[n] is not getattr(builtins, n, _MISSING)}

    def _tail(self, *, stdio: bool, names: set[str] | None) -> list[str]:
        lines: list[str] = []
        lazy = [(n, m) for n, m in self.lazy if names is None or n in names]
        if lazy:
            lines += [
                "class _FadeLazyModule:",
                "    def __init__(self, name, module):",
                "        self._name, self._module = name, module",
                "    def __getattr__(self, attr):",
                "        import importlib",
                "        module = importlib.import_module(self._module)",
                "        globals()[self._name] = module",
                "        return getattr(module, attr)",
            ]
            lines += [f"{name} = _FadeLazyModule({name!r}, {module!r})" for name, module in lazy]
            lines.append("del _FadeLazyModule")
        if stdio and self.stdio_aliases:
            aliases = [a for a in ("stdin", "stdout") if names is None or a in names]
            if aliases:
                lines += [
                    "import sys as _fade_sys",
                    *(f"{a} = _fade_sys.{a}" for a in aliases),
                    "del _fade_sys",
                ]
        if self.recursion_limit:
            lines += [
                "import sys as _fade_sys",
                f"_fade_sys.setrecursionlimit({self.recursion_limit})",
                "del _fade_sys",
            ]
        return lines

    def text(self, *, stdio: bool) -> str:
        """The whole block as Python source (ends with a newline)."""
        return "\n".join([*self.statements, *self._tail(stdio=stdio, names=None)]) + "\n"

    def text_for(self, names: set[str], *, stdio: bool) -> str:
        """The part of the block that binds ``names`` (grouped by module; ends with a newline, or is
        empty)."""
        by_module: dict[str, list[str]] = {}
        plain: list[str] = []
        for name in sorted(names & self.bindings.keys()):
            line = self.bindings[name]
            if line.startswith("import "):
                plain.append(line)
            else:
                module = line.split()[1]
                by_module.setdefault(module, []).append(name)
        lines = plain + [f"from {m} import {', '.join(ns)}" for m, ns in sorted(by_module.items())]
        lines += self._tail(stdio=stdio, names=names)
        return "\n".join(lines) + "\n" if lines else ""

    def apply(self, code: str, *, stdio: bool) -> str:
        """``code`` run after the part of this block it needs (see the class docstring); its ``from
        __future__`` imports (which must come first in a module) are moved in front."""
        futures = _FUTURE_IMPORT.findall(code)
        if futures:
            code = _FUTURE_IMPORT.sub("", code)
        head = "".join(f if f.endswith("\n") else f + "\n" for f in futures)
        names = referenced_names(code)
        block = self.text(stdio=stdio) if names is None else self.text_for(names, stdio=stdio)
        return head + block + code


_MISSING = object()
_DYNAMIC_LOOKUPS = frozenset({"eval", "exec", "globals", "vars", "locals", "__import__", "__builtins__"})


_FUTURE_IMPORT = re.compile(r"^from[ \t]+__future__[ \t]+import[^\n]*\n?", re.M)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def referenced_names(code: str) -> set[str] | None:
    """Every identifier in a program's text (a superset of the global names it can look up: words in
    strings and comments count too, which only binds a few names more); None when the program can
    look names up dynamically. A scan of the text, ~20x cheaper than compiling it in the parent."""
    names = set(_IDENTIFIER.findall(code))
    return None if names & _DYNAMIC_LOOKUPS else names


def _imports(*modules: str) -> tuple[str, ...]:
    return tuple(f"import {m}" for m in modules)


def _star_imports(*modules: str) -> tuple[str, ...]:
    return tuple(f"from {m} import *" for m in modules)


# Written from the module and name lists that each harness documents in its source.
TACO_PRELUDE = Prelude(
    source="FlagOpen/TACO metrics/testing_util.py: synthesize_std_code (stdio) and synthesize_cb_code (call)",
    statements=(
        *_imports("sys", "time", "itertools", "collections", "math", "fractions", "random", "heapq"),
        "from itertools import accumulate, combinations, permutations, product",
        "from collections import ChainMap, Counter, OrderedDict, defaultdict, deque",
        "from functools import lru_cache",
        "from math import ceil, cos, exp, fabs, floor, gcd, log, log2, sin, sqrt, tan",
        "from typing import List, Tuple",
        *_star_imports("heapq"),
    ),
    lazy=(("np", "numpy"),),
    stdio_aliases=True,
)
_LCB_MODULES = (
    "string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
    "itertools", "functools", "operator", "io", "sys", "json",
)  # fmt: skip
LIVECODEBENCH_PRELUDE = Prelude(
    source="LiveCodeBench lcb_runner/evaluation/testing_util.py: import_string (stdio and call)",
    statements=(*_star_imports(*_LCB_MODULES, "builtins", "typing"), *_imports(*_LCB_MODULES)),
    recursion_limit=50000,
)
PRELUDES: dict[str, Prelude] = {"taco": TACO_PRELUDE, "livecodebench": LIVECODEBENCH_PRELUDE}
"""The benchmarks whose official harness runs every program after a block of imports (HumanEval's
does not), by the benchmark name of the problem table."""


def prelude_for(problem: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> Prelude | None:
    """The prelude a problem's programs run after: ``metadata.prelude`` when the row has that key (a
    key of :data:`PRELUDES`, or null for none), else its benchmark's default. ``metadata``: the row's
    parsed metadata, when the caller has it."""
    md = _metadata(problem) if metadata is None else metadata
    if "prelude" in md:
        name = md["prelude"]
        if name is None:
            return None
        if name not in PRELUDES:
            raise ValueError(
                f"problem {problem.get('problem_id')!r}: metadata.prelude={name!r} is not one of {sorted(PRELUDES)}"
            )
        return PRELUDES[name]
    return PRELUDES.get(str(_field(problem, "benchmark") or ""))


# ---------------------------------------------------------------------------------------- checkers
CHECKER_FUNCTION = "check"
_checker_sandbox = None
_checker_lock = threading.Lock()


def _unsafe() -> bool:
    return os.environ.get("FADE_SANDBOX_UNSAFE") == "1"


def run_checker(checker: str, test_input: str, output: str, expected: str) -> tuple[bool, str]:
    """Decide one test of a special-judge problem with the problem's checker program.

    The checker defines ``check(input: str, output: str, expected: str) -> bool`` (the test's input,
    the candidate's stdout, the reference output); only a returned ``True`` accepts. It runs in call
    mode in a sandbox pool of its own, never in the candidates' pool (the candidate's slot is held
    while its output is judged) and never in this process: the candidate's output is untrusted input
    to the checker. A checker that fails to load, raises or times out rejects."""
    global _checker_sandbox
    from fade_core.sandbox import Sandbox

    with _checker_lock:
        if _checker_sandbox is None:
            _checker_sandbox = Sandbox(unsafe=_unsafe())
        box = _checker_sandbox
    test = {"input": [test_input, output, expected], "output": True, "testtype": "functional"}
    v = box.run(checker, [test], kind="call", fn_name=CHECKER_FUNCTION)
    if v.passed:
        return True, "accepted by the checker"
    if v.status == "wrong_answer":
        return False, "rejected by the checker"
    return False, f"the checker failed ({v.status}): {v.detail}"[:500]


compare.set_checker_runner(run_checker)


# ---------------------------------------------------------------------------------------- programs
def code_job(problem: Mapping[str, Any], completion: str, *, extract: bool = True):
    """The sandbox :class:`~fade_core.sandbox.Job` of a code problem and completion (``extract``:
    take the program out of the completion's fenced block; False: ``completion`` is the program, as
    for reference solutions)."""
    from fade_core.sandbox import Job

    kind = _field(problem, "kind")
    tests = _tests(problem)
    fn_name = _field(problem, "fn_name") or None
    md = _metadata(problem)
    judge, tol = compare.judge_from_metadata(md)
    prompt = str(_field(problem, "prompt") or "")
    if any(t.get("testtype") == "humaneval" for t in tests):
        block = extract_code(completion) if extract and "```" in completion else None
        if block is not None and fn_name and re.search(rf"^\s*def\s+{re.escape(fn_name)}\s*\(", block, re.M):
            program = prompt + "\n" + block
        else:
            program = prompt + completion
        return Job(program, tests, "call", fn_name=fn_name, prompt=prompt, judge=judge, float_tol=tol)
    code = extract_code(completion) if extract else completion
    sb_kind = "stdio" if kind == "code_stdio" else "call"
    if sb_kind == "call" and not fn_name:
        raise ValueError(f"problem {problem.get('problem_id')!r}: code_call problem without fn_name")
    prelude = prelude_for(problem, md)
    if prelude is not None:
        code = prelude.apply(code, stdio=sb_kind == "stdio")
    if judge == "checker":
        if sb_kind == "stdio":
            tests = [
                {**t, "output": compare.checker_envelope(md["checker"], t["input"], t["output"])}
                for t in tests
            ]
        else:  # call-mode tests compare returned values; a checker decides stdout only
            judge = "no_checker"
    return Job(code, tests, sb_kind, fn_name=fn_name, judge=judge, float_tol=tol)


def _undecidable(job) -> Score | None:
    """The score of a job that must not run: a special-judge problem nothing can decide."""
    return _fail("undecidable", compare.NO_CHECKER_REASON) if job.judge == "no_checker" else None


def _from_verdict(v, judge: str = "lines") -> Score:
    detail = f"{v.tests_passed}/{v.tests_total} tests; {v.detail}"
    if judge == "special_lenient":
        detail += f"; {compare.LENIENT_LABEL}"
        return Score(1.0, True, "passed_lenient", detail) if v.passed else _fail(v.status, detail)
    return _ok(detail) if v.passed else _fail(v.status, detail)


def score_code(
    problem: Mapping[str, Any], completion: str, *, unsafe: bool = False, extract: bool = True
) -> Score:
    from fade_core.sandbox import default_sandbox

    job = code_job(problem, completion, extract=extract)
    skipped = _undecidable(job)
    if skipped is not None:
        return skipped
    return _from_verdict(default_sandbox(unsafe=unsafe).run_batch([job])[0], job.judge)


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
    return score_code(problem, completion, unsafe=_unsafe())


def score_batch(
    problems: Sequence[Mapping[str, Any]],
    completions: Sequence[str],
    workers: int | None = None,
    *,
    progress: bool = False,
    extract: bool = True,
) -> list[Score]:
    """Score ``completions[i]`` against ``problems[i]`` for every i; results in input order.
    ``workers``: sandbox slots and math processes (default: one per CPU). ``extract=False``: the
    completions of code problems are programs as they are (reference solutions)."""
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
            gold = _field(p, "answer")
            if gold is None or str(gold).strip() == "":
                raise ValueError(f"problems[{i}] ({p.get('problem_id')!r}): math problem without an answer")
            fast = _math_fast(str(gold), c)
            if fast is not None:
                out[i] = fast
            else:
                math_futs[i] = _math_submit(str(gold), c, workers)
        else:
            job = code_job(p, c, extract=extract)
            skipped = _undecidable(job)
            if skipped is not None:
                out[i] = skipped
            else:
                code_idx.append(i)
                jobs.append(job)
    if jobs:
        from fade_core.sandbox import default_sandbox

        verdicts = default_sandbox(workers, unsafe=_unsafe()).run_batch(jobs, progress=progress)
        for i, job, v in zip(code_idx, jobs, verdicts, strict=True):
            out[i] = _from_verdict(v, job.judge)
    for i, fut in math_futs.items():
        out[i] = _math_result(fut)
    return [s for s in out if s is not None]
