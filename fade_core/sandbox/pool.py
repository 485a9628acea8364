"""The trusted side of the sandbox: the pool of worker slots, the per-program test loops, verdicts,
and which backend it runs on.

A :class:`Sandbox` owns ``workers`` slots (:class:`~fade_core.sandbox.workers.Slot`: a candidate
worker and, on first need, a checker worker in a second, separate sandbox for HumanEval check
programs). Programs are run one at a time per slot; :meth:`Sandbox.run_batch` keeps every slot busy
from a thread pool (the parent threads only move bytes through pipes and compare outputs).

Per program:

- ``stdio``: one fresh process per test, stdin from the test, stdout compared here with
  :func:`~fade_core.sandbox.compare.compare_stdout`. Stops at the first failing test.
- ``call``: one process defines the program; each test's arguments go in as plain data and the
  returned plain value is compared here with :func:`~fade_core.sandbox.compare.compare_value`.
- ``humaneval`` (tests with testtype "humaneval"): the candidate process serves calls as above; the
  ``check`` program runs in the checker sandbox against a proxy whose every call is relayed through
  this process to the candidate. The checker never runs candidate code and the candidate never sees
  the check program, so the assert decisions are made on plain data by code the candidate cannot
  touch. What this does not guarantee: a check that inspects the function object or relies on
  argument mutation, printing or files sees only the proxy; weak asserts stay weak; candidates that
  return non-plain objects (generators, custom classes) fail.

Whatever the program does (exit 0 early, print "PASSED", return an object with ``__eq__`` always
True, patch builtins, kill its worker), the pass decision is made here from plain JSON, and an
unanswered test is a failure. A reply that is late, malformed, or reports a sandbox error
(:class:`~fade_core.sandbox.workers.WorkerLost`) resets the slot, so no later verdict of the slot can
be shifted or forged.

The backend: :func:`resolve` never falls back silently. It runs
:func:`fade_core.sandbox.selftest.self_test` on a backend before using it (:func:`tested`: once per
process and setting), logs which backend it took and why the stronger ones were refused, and refuses
(:class:`~fade_core.sandbox.isolation.SandboxUnavailable`) when no backend isolates the file system,
the network and per-sample state, unless ``unsafe`` is set.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from fade_core.sandbox import compare, plaindata
from fade_core.sandbox.isolation import (
    BACKENDS,
    PREFERENCE,
    Guarantees,
    Isolation,
    SandboxUnavailable,
    cgroup_layout,
)
from fade_core.sandbox.selftest import self_test
from fade_core.sandbox.workers import (
    Job,
    Limits,
    Slot,
    Slots,
    Verdict,
    Worker,
    WorkerLost,
    classify,
    reply_cap,
    reply_number,
)

log = logging.getLogger(__name__)

KINDS = ("stdio", "call")
DEBUG_CHARS = 2000


def _trim(text: str) -> str:
    return text if len(text) <= DEBUG_CHARS else text[:DEBUG_CHARS] + f"... [{len(text) - DEBUG_CHARS} more chars]"


def _text(x: Any) -> str:
    return x if isinstance(x, str) else ""


def default_workers() -> int:
    """Slots of a pool sized to the machine: one per CPU plus two, so that while one slot waits on a
    pipe hop another keeps the CPUs busy."""
    return (os.cpu_count() or 1) + 2


def _check_tests(tests: list, kind: str) -> None:
    for i, t in enumerate(tests):
        if not isinstance(t, Mapping) or "input" not in t:
            raise ValueError(f"tests[{i}] must be a mapping with an 'input' key, got {t!r:.200}")
        if kind == "stdio" and t.get("testtype") != "humaneval" and not isinstance(t.get("output"), str):
            raise ValueError(f"tests[{i}].output must be the expected stdout text, got {type(t.get('output')).__name__}")


class Sandbox:
    """A pool of sandbox worker slots. Use as a context manager or call :meth:`close`.

    ``workers``: parallel slots (default: :func:`default_workers`). ``backend``: "auto" (the
    strongest backend that passes its self-test), "bwrap", "unshare" or "none" (default: env
    ``FADE_SANDBOX_BACKEND``, else auto). ``unsafe``: allow a backend without file-system, network
    and per-sample state isolation (warned). ``cgroup_parent``: where per-sample cgroups go (default:
    env ``FADE_SANDBOX_CGROUP``, else found automatically; see :mod:`.cgroups`).
    :attr:`guarantees` says what is in force.
    """

    def __init__(self, workers: int | None = None, *, backend: str | None = None, unsafe: bool = False,
                 limits: Limits | None = None, cgroup_parent: str | None = None):  # fmt: skip
        cgroup_parent = cgroup_parent or os.environ.get("FADE_SANDBOX_CGROUP") or None
        backend = backend or os.environ.get("FADE_SANDBOX_BACKEND") or "auto"
        self.isolation = resolve(backend, unsafe=unsafe, cgroup_parent=cgroup_parent)
        self.workers = max(1, workers or default_workers())
        self.limits = limits or Limits()
        self._slot_set = Slots(self.isolation, self.workers)
        self._all = self._slot_set.all
        self._slots: queue.Queue[Slot] = queue.Queue()
        for s in self._all:
            self._slots.put(s)
        self._closed = False
        self._lock = threading.Lock()

    @property
    def guarantees(self):
        """The :class:`~fade_core.sandbox.isolation.Guarantees` of this pool's backend."""
        return self.isolation.guarantees

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._slot_set.close()

    # ---------------------------------------------------------------------------------------- API
    def run(
        self,
        code: str,
        tests: Sequence[Mapping[str, Any]],
        *,
        kind: str,
        fn_name: str | None = None,
        prompt: str | None = None,
        judge: str = "lines",
        float_tol: float = compare.DEFAULT_FLOAT_TOL,
        limits: Limits | None = None,
    ) -> Verdict:
        """Run ``code`` against ``tests`` (each {"input", "output", "testtype"}).

        ``kind``: "stdio" (input is stdin text, output the expected stdout) or "call" (input is the
        list of positional arguments, output the expected value; ``fn_name`` names a function or a
        method of ``class Solution``). Tests with testtype "humaneval" carry a HumanEval check
        program as input: ``code`` is then prompt + completion, ``fn_name`` the entry point, and
        ``prompt`` the HumanEval prompt (its helpers are visible to the check program).
        """
        if self._closed:
            raise RuntimeError("sandbox is closed")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        lim = limits or self.limits
        tests = list(tests)
        if not tests:
            return Verdict(False, "sandbox_error", 0, 0, detail="the problem has no tests")
        _check_tests(tests, kind)
        humaneval = any(t.get("testtype") == "humaneval" for t in tests)
        if humaneval and not fn_name:
            raise ValueError("humaneval tests need fn_name (the entry point)")
        if kind == "call" and not fn_name:
            raise ValueError("call-style tests need fn_name")
        slot = self._slots.get()
        try:
            try:
                if humaneval:
                    return self._run_humaneval(slot, code, tests, fn_name, prompt or "", lim)
                if kind == "stdio":
                    return self._run_stdio(slot, code, tests, judge, float_tol, lim)
                return self._run_call(slot, code, tests, fn_name, float_tol, lim)
            except (WorkerLost, KeyError, TypeError, AttributeError) as e:
                # any anomaly: the slot's workers are replaced, so nothing of it reaches a later sample
                why = str(e) if isinstance(e, WorkerLost) else f"malformed reply: {type(e).__name__}: {e}"
                logs = slot.logs()
                slot.reset()
                return Verdict(False, "sandbox_error", 0, len(tests), detail=f"sandbox worker lost: {why}; {logs}"[:DEBUG_CHARS])
            except BaseException:
                slot.reset()
                raise
        finally:
            self._slots.put(slot)

    def run_batch(self, jobs: Iterable[Job | Mapping[str, Any]], *, progress: bool = False) -> list[Verdict]:
        """Run many programs, every slot busy; results in input order. Jobs are :class:`Job` or
        mappings with the same fields."""
        items = [j if isinstance(j, Job) else Job(**j) for j in jobs]

        def one(j: Job) -> Verdict:
            return self.run(
                j.code, j.tests, kind=j.kind, fn_name=j.fn_name, prompt=j.prompt,
                judge=j.judge, float_tol=j.float_tol, limits=j.limits,
            )  # fmt: skip

        out: list[Verdict | None] = [None] * len(items)
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = {pool.submit(one, j): i for i, j in enumerate(items)}
            if progress and items:
                from rich.progress import Progress

                with Progress(transient=True) as bar:
                    task = bar.add_task("sandbox", total=len(items))
                    for fut in _as_completed(futures):
                        out[futures[fut]] = fut.result()
                        bar.advance(task)
            else:
                for fut in _as_completed(futures):
                    out[futures[fut]] = fut.result()
        return [v for v in out if v is not None]

    # ------------------------------------------------------------------------------------ per kind
    @staticmethod
    def _budget(lim: Limits) -> float:
        """How long the parent waits for a reply: the program's wall limit and time to clean up."""
        return lim.wall_s + 10.0

    def _run_stdio(self, slot: Slot, code: str, tests: list, judge: str, tol: float, lim: Limits) -> Verdict:
        wall = cpu = 0.0
        last: dict[str, Any] = {}
        cap = reply_cap(lim)
        for i, t in enumerate(tests):
            stdin = t["input"] if isinstance(t["input"], str) else json.dumps(t["input"])
            w = slot.candidate()
            res = w.request({"op": "stdio", "code": code, "stdin": stdin, "limits": lim.to_wire()}, self._budget(lim), cap)
            wall += reply_number(res["wall"])
            cpu += reply_number(res["cpu"])
            last = res
            status = classify(res, lim)
            if status is None:
                ok, why = compare.compare_stdout(_text(res["stdout"]), t["output"], judge, tol)
                if ok:
                    continue
                status, detail = "wrong_answer", f"test {i}: {why}"
            else:
                detail = f"test {i}: {status}" + _compile_detail(res)
            return Verdict(False, status, i, len(tests), wall, cpu, _trim(_text(res["stdout"])), _trim(_text(res["stderr"])), detail)
        return Verdict(True, "passed", len(tests), len(tests), wall, cpu, _trim(_text(last.get("stdout"))),
                       _trim(_text(last.get("stderr"))), "ok")  # fmt: skip

    def _serve(self, w: Worker, code: str, fn_name: str, lim: Limits, module_name: str) -> Verdict | None:
        res = w.request(
            {"op": "serve", "code": code, "fn_name": fn_name, "limits": lim.to_wire(), "module_name": module_name},
            self._budget(lim), reply_cap(lim),
        )  # fmt: skip
        if res.get("ready") is True:
            return None
        ex = res.get("exec") or {}
        frame = res.get("frame") or {}
        status = "compile_error" if "compile_error" in frame else classify(ex, lim) or "runtime_error"
        msg = frame.get("error") or frame.get("compile_error") or next(
            (f.get("compile_error") for f in ex.get("frames", []) if "compile_error" in f), ""
        )
        return Verdict(False, status, 0, 0, reply_number(ex.get("wall")), reply_number(ex.get("cpu")), _trim(_text(ex.get("stdout"))),
                       _trim(_text(ex.get("stderr"))), f"program did not load: {status}: {msg}"[:DEBUG_CHARS])  # fmt: skip

    def _run_call(self, slot: Slot, code: str, tests: list, fn_name: str, tol: float, lim: Limits) -> Verdict:
        w = slot.candidate()
        cap = reply_cap(lim)
        failed = self._serve(w, code, fn_name, lim, "__fade_solution__")
        if failed is not None:
            return replace(failed, tests_total=len(tests))
        wall = 0.0
        verdict: Verdict | None = None
        for i, t in enumerate(tests):
            args = t["input"]
            if not isinstance(args, list):
                args = [args]
            reply = w.request({"op": "call", "args": plaindata.encode(args)}, self._budget(lim), cap)
            wall += reply_number(reply.get("wall"))
            if reply.get("ok") is not True:
                ex = reply.get("exec") or {}
                status = classify(ex, lim) if reply.get("dead") else None
                status = status or "runtime_error"
                verdict = Verdict(False, status, i, len(tests), detail=f"test {i}: {status}: {str(reply.get('error', ''))[:500]}")
                break
            try:
                value = plaindata.decode(reply.get("value"))
            except (ValueError, TypeError, KeyError, RecursionError) as e:
                verdict = Verdict(False, "wrong_answer", i, len(tests), detail=f"test {i}: undecodable value: {str(e)[:200]}")
                break
            ok, why = compare.compare_value(value, t.get("output"), tol)
            if not ok:
                verdict = Verdict(False, "wrong_answer", i, len(tests), detail=f"test {i}: {why}")
                break
        end = w.request({"op": "end"}, self._budget(lim), cap).get("exec") or {}
        if verdict is None:
            # every answer was right; the program must still end within its limits (threads joined)
            late = classify(end, lim) if end else None
            if late in ("timeout", "memory_limit", "output_limit"):
                verdict = Verdict(False, late, len(tests), len(tests), detail=f"after the last test: {late}")
            else:
                verdict = Verdict(True, "passed", len(tests), len(tests), detail="ok")
        verdict.wall_s = round(wall, 6)
        verdict.cpu_s = reply_number(end.get("cpu"))
        verdict.stdout, verdict.stderr = _trim(_text(end.get("stdout"))), _trim(_text(end.get("stderr")))
        return verdict

    def _run_humaneval(self, slot: Slot, code: str, tests: list, fn_name: str, prompt: str, lim: Limits) -> Verdict:
        cand, chk = slot.candidate(), slot.checker()
        cap = reply_cap(lim)
        t0 = time.monotonic()
        passed, cpu = 0, 0.0
        end: dict[str, Any] = {}
        for i, t in enumerate(tests):
            # fresh pipes per check: checker -> candidate (arguments), candidate -> checker (results)
            a_r, a_w = os.pipe()
            r_r, r_w = os.pipe()
            try:
                cand.send_fds([a_r, r_w])
                cand.send({"op": "serve", "direct": True, "code": code, "fn_name": fn_name,
                           "limits": lim.to_wire(), "module_name": "__fade_candidate__"})  # fmt: skip
                chk.send_fds([r_r, a_w])
                chk.send({"op": "check", "prompt": prompt, "test": t["input"], "fn_name": fn_name, "limits": lim.to_wire()})
            finally:
                for fd in (a_r, a_w, r_r, r_w):
                    os.close(fd)
            ready = cand.recv(time.monotonic() + self._budget(lim), cap)
            msg = chk.recv(time.monotonic() + self._budget(lim), cap)
            if ready.get("ready") is True:
                end = cand.request({"op": "end"}, self._budget(lim), cap).get("exec") or {}
            else:
                end = ready.get("exec") or {}
            cpu += reply_number(end.get("cpu"))
            result = msg.get("result") or {}
            cand_status = classify(end, lim)
            if ready.get("ready") is True and result.get("passed") is True and cand_status not in ("timeout", "memory_limit", "output_limit"):
                passed += 1
                continue
            ex = msg.get("exec") or {}
            if ready.get("ready") is not True:
                frame = ready.get("frame") or {}
                status = "compile_error" if "compile_error" in frame else cand_status or "runtime_error"
                detail = f"program did not load: {frame.get('error') or frame.get('compile_error') or status}"
            elif result.get("harness_error"):
                status, detail = "sandbox_error", f"check harness: {result['harness_error']}"
            else:
                status = cand_status if cand_status in ("timeout", "memory_limit", "output_limit") else None
                status = status or ("timeout" if classify(ex, lim) == "timeout" else "wrong_answer")
                detail = f"test {i}: " + str(result.get("error") or classify(ex, lim) or status)
            return Verdict(False, status, passed, len(tests), round(time.monotonic() - t0, 6), cpu,
                           _trim(_text(end.get("stdout"))), _trim(_text(end.get("stderr"))), str(detail)[:DEBUG_CHARS])  # fmt: skip
        return Verdict(True, "passed", passed, len(tests), round(time.monotonic() - t0, 6), cpu,
                       _trim(_text(end.get("stdout"))), _trim(_text(end.get("stderr"))), "ok")  # fmt: skip


def _compile_detail(res: Mapping[str, Any]) -> str:
    for f in res.get("frames") or []:
        if isinstance(f, dict) and "compile_error" in f:
            return ": " + str(f["compile_error"])[:500]
    return ""


def _as_completed(futures: Mapping[Any, int]):
    from concurrent.futures import as_completed

    return as_completed(futures)


# ---------------------------------------------------------------------------------- the backend
_tested: dict[tuple, Guarantees] = {}
_tested_lock = threading.Lock()


def tested(backend: str, cgroup_parent: str | None = None) -> Guarantees:
    """The self-test's findings for ``backend`` (run once per process and setting)."""
    key = (backend, cgroup_parent, os.geteuid(), sys.prefix)
    with _tested_lock:
        if key not in _tested:
            _tested[key] = self_test(backend, cgroup_parent)
        return _tested[key]


def resolve(backend: str = "auto", *, unsafe: bool = False, cgroup_parent: str | None = None) -> Isolation:
    """The isolation to use. ``auto`` takes the first of :data:`~fade_core.sandbox.isolation.PREFERENCE`
    whose self-test shows every :data:`~fade_core.sandbox.isolation.REQUIRED` guarantee, logging the
    choice and why stronger backends were refused. Without one this raises
    :class:`~fade_core.sandbox.isolation.SandboxUnavailable` unless ``unsafe`` (or env ``FADE_SANDBOX_UNSAFE=1``)
    is set, in which case it warns loudly and returns the requested (or the unisolated) backend."""
    unsafe = unsafe or os.environ.get("FADE_SANDBOX_UNSAFE") == "1"
    if backend not in ("auto", *BACKENDS):
        raise ValueError(f"unknown sandbox backend {backend!r}; expected auto or one of {BACKENDS}")
    layout, cg_why = cgroup_layout(cgroup_parent)
    reasons: list[str] = []
    for b in PREFERENCE if backend == "auto" else (backend,):
        if b == "none":
            reasons.append("backend 'none' requested")
            break
        g = tested(b, cgroup_parent)
        missing = g.missing()
        if not missing:
            msg = f"fade sandbox: using {b}" + (f" ({'; '.join(reasons)})" if reasons else "")
            (log.warning if reasons else log.info)(msg + ": " + "; ".join(g.lines()[1:]))
            if layout is None:
                log.warning("fade sandbox: no per-sample cgroup (%s); memory, task and CPU limits are per process", cg_why)
            return Isolation(b, layout, g)
        reasons.append(f"{b} refused: no {', '.join(missing)}" + (f" ({'; '.join(g.failures)})" if g.failures else ""))
        if unsafe and backend != "auto":
            _warn(f"using {b} WITHOUT {', '.join(missing)} isolation because unsafe was requested. " + "; ".join(reasons))
            return Isolation(b, layout, g)
    if not unsafe:
        raise SandboxUnavailable(
            "no sandbox backend isolates the file system, the network and per-sample state here ("
            + "; ".join(reasons)
            + "). Install bubblewrap (apt-get install bubblewrap) or enable user namespaces; to run "
            "untrusted code WITHOUT that isolation anyway set sandbox.unsafe (CLI: --unsafe, env "
            "FADE_SANDBOX_UNSAFE=1)."
        )
    _warn("running untrusted code WITHOUT namespace isolation (no network or filesystem isolation; only "
          "rlimits, cgroups, seccomp and the uid drop apply). Reasons: " + "; ".join(reasons))  # fmt: skip
    return Isolation("none", layout, Guarantees("none", failures=tuple(reasons)))


def _warn(text: str) -> None:
    msg = "fade sandbox: " + text
    warnings.warn(msg, RuntimeWarning, stacklevel=3)
    log.warning(msg)
    print("WARNING: " + msg, file=sys.stderr)


# ------------------------------------------------------------------------------ module-level API
_default: Sandbox | None = None
_default_key: tuple | None = None
_default_lock = threading.Lock()


def use_settings(*, backend: str | None = None, unsafe: bool | None = None, cgroup_parent: str | None = None) -> None:
    """Make the ``sandbox`` section of the configuration the process-wide default, for this process
    and every process it starts (Dask workers, ``fade`` subcommands): sets ``FADE_SANDBOX_BACKEND``,
    ``FADE_SANDBOX_UNSAFE`` and ``FADE_SANDBOX_CGROUP``. None leaves a setting as it is."""
    if backend is not None:
        os.environ["FADE_SANDBOX_BACKEND"] = backend
    if unsafe is not None:
        if unsafe:
            os.environ["FADE_SANDBOX_UNSAFE"] = "1"
        else:
            os.environ.pop("FADE_SANDBOX_UNSAFE", None)
    if cgroup_parent is not None:
        if cgroup_parent:
            os.environ["FADE_SANDBOX_CGROUP"] = cgroup_parent
        else:
            os.environ.pop("FADE_SANDBOX_CGROUP", None)


def default_sandbox(workers: int | None = None, *, unsafe: bool = False, backend: str | None = None) -> Sandbox:
    """A process-wide sandbox pool, created on first use and closed at interpreter exit. ``backend``
    and ``unsafe`` default to the settings of :func:`use_settings` (the environment)."""
    global _default, _default_key
    backend = backend or os.environ.get("FADE_SANDBOX_BACKEND") or "auto"
    unsafe = unsafe or os.environ.get("FADE_SANDBOX_UNSAFE") == "1"
    key = (workers or default_workers(), unsafe, backend, os.environ.get("FADE_SANDBOX_CGROUP"))
    with _default_lock:
        if _default is None or _default._closed or _default_key != key:
            if _default is not None:
                _default.close()
            _default = Sandbox(workers, unsafe=unsafe, backend=backend)
            _default_key = key
            import atexit

            atexit.register(_default.close)
        return _default


def close_default() -> None:
    """Close the process-wide sandbox of :func:`default_sandbox`, if any (the next call makes a new one)."""
    with _default_lock:
        box = _default
    if box is not None:
        box.close()


def run(
    code: str,
    tests: Sequence[Mapping[str, Any]],
    *,
    kind: str,
    fn_name: str | None = None,
    limits: Limits | None = None,
    prompt: str | None = None,
    judge: str = "lines",
    float_tol: float = compare.DEFAULT_FLOAT_TOL,
    unsafe: bool = False,
) -> Verdict:
    """Run one program in the process-wide sandbox; see :meth:`Sandbox.run`."""
    return default_sandbox(unsafe=unsafe).run(
        code, tests, kind=kind, fn_name=fn_name, prompt=prompt, judge=judge, float_tol=float_tol, limits=limits
    )


def run_batch(jobs: Iterable[Job | Mapping[str, Any]], *, workers: int | None = None, unsafe: bool = False,
              progress: bool = False) -> list[Verdict]:  # fmt: skip
    """Run many programs in parallel over a pool sized to the machine; see :meth:`Sandbox.run_batch`."""
    return default_sandbox(workers, unsafe=unsafe).run_batch(jobs, progress=progress)


__all__ = [
    "Sandbox", "close_default", "default_sandbox", "default_workers", "resolve", "run", "run_batch", "tested",
    "use_settings",
]  # fmt: skip
