"""The import preludes of official code harnesses.

Benchmarks whose official harness runs every program after a block of standard imports (TACO's
metrics/testing_util.py, LiveCodeBench's lcb_runner/evaluation/testing_util.py) get the same block
here (:data:`PRELUDES`, :func:`prelude_for`), so a correct program that uses ``Counter`` or
``lru_cache`` without importing it is judged as the official harness judges it. HumanEval gets none.
A row's ``metadata.prelude`` (a benchmark name, or null for none, written by ``fade prepare`` from
``data.code_prelude``) overrides the benchmark's default.
"""

from __future__ import annotations

import builtins
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fade_core.verifiers import fields


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
    md = fields.metadata(problem) if metadata is None else metadata
    if "prelude" in md:
        name = md["prelude"]
        if name is None:
            return None
        if name not in PRELUDES:
            raise ValueError(
                f"problem {problem.get('problem_id')!r}: metadata.prelude={name!r} is not one of {sorted(PRELUDES)}"
            )
        return PRELUDES[name]
    return PRELUDES.get(str(fields.get(problem, "benchmark") or ""))
