"""The code dependencies of dvc.yaml and study/dvc.yaml, derived from what each stage imports.

A stage's command is ``fade <sub> ...``, which runs the flow in ``flows/<sub>.py``; the stage depends on
every module of fade_core/, tasks/ and flows/ that this entry module imports, directly or through other
modules of those packages, at module level or inside a function (a deferred import runs too). A module in
a sub-package of fade_core is listed as the sub-package's folder (``fade_core/verifiers``): its data files
(prompt templates, the sandbox's payload, which is read as source and not imported) live there as well.
Third-party packages are not listed (pin them in the environment, not in the DAG).

Everything else in the files (data deps, params, outs, metrics, commands) is written by hand; this module
only rewrites the ``deps`` entries under fade_core/, tasks/ and flows/ (of every file in :data:`DVC_FILES`)::

    python -m flows.dvc_yaml --check   # exit 1 and name each stage whose listed code differs from its imports
    python -m flows.dvc_yaml --write   # rewrite them (dvc.yaml, study/dvc.yaml, presets/dvc.yaml)

The walk is static and conservative: an import anywhere in an imported module counts, even one only a
command the stage does not run would execute (``fade study claims`` imports flows/study.py, which also
holds the whole study flow), so a stage may rerun after a change that could not affect it, never the
opposite. Imports by string (importlib) are not seen; fade's stage modules have none.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fade_core", "tasks", "flows")
# the DVC files this module keeps current: path -> the prefix of a code path in it (study/ runs one level down)
DVC_FILES = {"dvc.yaml": "", "study/dvc.yaml": "../", "presets/dvc.yaml": ""}  # presets/: its stages run at the root (wdir ..)
_CMD = re.compile(r"(?:\bflows\.cli|\bfade|/run-stage\.sh\"?)\s+(\w[\w-]*)")


def module_files(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of ``packages`` under ``root``."""
    files: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join(parts)] = path
    return files


def imported_modules(module: str, path: Path, files: Mapping[str, Path]) -> set[str]:
    """The modules of ``files`` that ``module`` (source at ``path``) imports anywhere in its body, each the
    most specific one named (``from fade_core import models`` -> fade_core.models), with the packages
    that such an import runs first (fade_core, fade_core.rollout for fade_core.rollout.base)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
        for target in targets:
            while target and target not in files:
                target = target.rpartition(".")[0]
            while target:  # the module and the packages above it, all of which the import executes
                if target in files:
                    found.add(target)
                target = target.rpartition(".")[0]
    found.discard(module)
    return found


def import_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of ``files`` it imports (:func:`imported_modules`), every file parsed once."""
    return {module: imported_modules(module, path, files) for module, path in files.items()}


def import_closure(entry: str, files: Mapping[str, Path], graph: Mapping[str, set[str]] | None = None) -> set[str]:
    """``entry`` and every module of ``files`` it reaches by imports (the packages above it included);
    ``graph``: :func:`import_graph` of ``files``, when already built."""
    if entry not in files:
        raise KeyError(f"no module {entry} under {', '.join(PACKAGES)}")
    seen: set[str] = set()
    pending = [entry] + [p for p in _parents(entry) if p in files]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        imports = graph[module] if graph is not None else imported_modules(module, files[module], files)
        pending.extend(imports - seen)
    return seen


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def dep_paths(modules: Iterable[str], files: Mapping[str, Path], root: Path = ROOT) -> list[str]:
    """The DVC dep of each module, sorted and de-duplicated: a module in a sub-package of fade_core (or of
    any package, two levels down) is that sub-package's folder, any other module its file."""
    deps: set[str] = set()
    for module in modules:
        rel = files[module].relative_to(root)
        deps.add(str(Path(*rel.parts[:2])) if len(rel.parts) > 2 else str(rel))
    return sorted(deps)


def entry_module(cmd: str) -> str:
    """The flows module a stage's command runs: ``sh "$DVC_ROOT/infra/dvc/run-stage.sh" train --arm x`` (or
    ``fade train ...``, ``python -m flows.cli train ...``) -> flows.train; ``import-model`` -> flows.import_model."""
    match = _CMD.search(cmd)
    if match is None:
        raise ValueError(f"stage command {cmd!r} runs no `fade <stage>` subcommand")
    return f"flows.{match.group(1).replace('-', '_')}"


def is_code(dep: str, prefix: str) -> bool:
    """Whether a listed dep is a code path this module derives (under fade_core/, tasks/ or flows/)."""
    return dep.startswith(prefix) and dep[len(prefix):].split("/", 1)[0] in PACKAGES


def stage_code_deps(stages: Mapping[str, Any], prefix: str, root: Path = ROOT) -> dict[str, list[str]]:
    """stage name -> the code deps it should list (``prefix`` before each: ``../`` in study/dvc.yaml)."""
    files = module_files(root)
    graph = import_graph(files)
    return {name: [prefix + d for d in dep_paths(import_closure(entry_module(_body(stage)["cmd"]), files, graph),
                                                  files, root)]
            for name, stage in stages.items()}


def drift(stages: Mapping[str, Any], prefix: str, root: Path = ROOT) -> list[str]:
    """One line per stage whose listed code deps differ from its imports (empty when they match)."""
    problems = []
    for name, want in stage_code_deps(stages, prefix, root).items():
        have = [d for d in _body(stages[name]).get("deps", []) if isinstance(d, str) and is_code(d, prefix)]
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        if missing:
            problems.append(f"stage {name}: imports {', '.join(missing)}, not in its deps")
        if extra:
            problems.append(f"stage {name}: lists {', '.join(extra)}, which it does not import")
    return problems


def with_code_deps(stages: Mapping[str, Any], prefix: str, root: Path = ROOT) -> dict[str, Any]:
    """A copy of ``stages`` whose code deps are the derived ones (after the stage's other deps)."""
    derived = stage_code_deps(stages, prefix, root)
    out: dict[str, Any] = {}
    for name, stage in stages.items():
        stage = _copy(stage)
        body = _body(stage)
        others = [d for d in body.get("deps", []) if not (isinstance(d, str) and is_code(d, prefix))]
        body["deps"] = others + derived[name]
        out[name] = stage
    return out


def _body(stage: Mapping[str, Any]) -> Any:
    return stage.get("do", stage)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


class _IndentedDumper(yaml.SafeDumper):
    """Block lists indented under their key, as the hand-written parts of the files are."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def render(text: str, prefix: str, root: Path = ROOT) -> str:
    """The DVC file ``text`` with its code deps derived; its leading comment block is kept, and stages
    are separated by a blank line."""
    header = "".join(_leading_comments(text))
    doc = yaml.safe_load(text)
    doc["stages"] = with_code_deps(doc["stages"], prefix, root)
    body = yaml.dump(doc, Dumper=_IndentedDumper, sort_keys=False, default_flow_style=False, width=110)
    body = re.sub(r"\n(  \w[\w-]*:\n)", r"\n\n\1", body).replace("stages:\n\n", "stages:\n", 1)  # stages apart
    return header + body


def _leading_comments(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line + "\n")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.dvc_yaml", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a stage's code deps drifted")
    mode.add_argument("--write", action="store_true", help="rewrite the code deps in place")
    args = parser.parse_args(argv)
    status = 0
    for rel, prefix in DVC_FILES.items():
        path = ROOT / rel
        text = path.read_text()
        if args.write:
            new = render(text, prefix)
            if new != text:
                path.write_text(new)
                print(f"wrote {rel}")
            continue
        problems = drift(yaml.safe_load(text)["stages"], prefix)
        for problem in problems:
            print(f"{rel}: {problem}", file=sys.stderr)
        if problems or render(text, prefix) != text:
            status = 1
    if status:
        print("run `python -m flows.dvc_yaml --write` to bring them up to date", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
