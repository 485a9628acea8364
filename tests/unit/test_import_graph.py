"""fade_core's shape: no import circles (deferred imports inside functions count too), no module over the
size a reader can hold, no Prefect or DVC, and the run folder read and written through fade_core.runs only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fade_core"
MAX_LINES = 600
# Over the limit: the sandbox's in-sandbox worker (~1,200 lines). Not a technical necessity: its source
# reaches the sandbox as a list of modules exec'd in order (fade_core.sandbox.isolation.PAYLOAD_MODULES),
# so it can be split by adding modules to that list without weakening the sandbox. It is simply not
# split yet (left to the sandbox's owner); drop this exemption when it is.
SIZE_EXEMPT = {"fade_core/sandbox/_zygote.py"}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the fade_core modules it imports anywhere in its body (an edge to the most specific
    module named: ``from fade_core.rollout.base import X`` is an edge to fade_core.rollout.base, and
    ``from fade_core import models`` to fade_core.models)."""
    files = {module_name(p, package.parent): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_checker_finds_a_deferred_circle_through_a_subpackage(tmp_path: Path) -> None:
    pkg = tmp_path / "fade_core"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from fade_core.sub.b import f\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from fade_core import a\n")
    (pkg / "c.py").write_text("from . import a\nfrom .sub import b\n")
    graph = import_graph(pkg)
    assert graph["fade_core.c"] == {"fade_core.a", "fade_core.sub.b"}
    assert find_cycle(graph) == ["fade_core.a", "fade_core.sub.b", "fade_core.a"]
    (pkg / "sub" / "b.py").write_text("def f():\n    pass\n")
    assert find_cycle(import_graph(pkg)) is None


def test_fade_core_has_no_import_circle() -> None:
    graph = import_graph()
    assert "fade_core.advantages" in graph and "fade_core.runs" in graph["fade_core.evaluate"]
    assert find_cycle(graph) is None, f"import circle: {' -> '.join(find_cycle(graph) or [])}"


def test_fade_core_imports_no_orchestration() -> None:
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad = [n for n in names if n.split(".")[0] in ("prefect", "prefect_dask", "dvc", "flows", "tasks")]
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")))
def test_no_module_is_too_long_to_read(path: str) -> None:
    if path in SIZE_EXEMPT:
        pytest.skip(f"{path} is sized by the sandbox's owner")
    lines = len((ROOT / path).read_text().splitlines())
    assert lines <= MAX_LINES, f"{path} has {lines} lines (> {MAX_LINES}): split it by concern"
