"""The import layering, checked: `.venv/bin/python scripts/check_imports.py` (part of `make lint`).

Production (timeline/, coordinator/, locks/) must never import chaos/, tests/ or bench/, which sit on top of
it; each package imports only its own layer and those below (timeline < locks < coordinator < chaos); and the
modules of timeline/, coordinator/, locks/ and chaos/ must import one another without a cycle, and so must their
sub-packages (whose faces import their modules eagerly, which is safe only without a package circle).
Every import counts, also one inside a function or under TYPE_CHECKING: an import moved into a function
still couples the two modules, it only hides the cycle from Python. Exit 1 with one line per offence.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ("timeline", "coordinator", "locks", "tandem")
CHECKED = (*PRODUCTION, "chaos")  # the packages whose import graph must have no cycle
ABOVE_PRODUCTION = ("chaos", "tests", "bench")
# The layers, bottom first: a package imports only its own layer and those below it (the format and the read side,
# the lock providers on storage, the write side, the library's public face, the fault injection that attacks them all).
LAYERS = ("timeline", "locks", "coordinator", "tandem", "chaos")


def module_name(path: Path) -> str:
    """`timeline/mdt/table.py` -> `timeline.mdt.table`; a package's `__init__.py` -> the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[int, str, list[str]]]:
    """Each import anywhere in the module: its line, the name it states, and the names it may bind to one of
    our modules (`from p import x` may mean the submodule `p.x` or the package `p`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, [alias.name]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from p import x` binds the submodule p.x if there is one, else a name of p's face (resolve() finds
            # the longest prefix that is a module): p's face is not counted when only its submodules are imported
            yield node.lineno, base, [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]


def resolve(name: str, modules: set[str]) -> str | None:
    """The longest prefix of `name` that is one of our modules, or None for a third-party name."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def build_graph() -> tuple[dict[str, set[str]], list[str]]:
    """The module import graph of CHECKED, and each upward import made by production."""
    files = {module_name(p): p for package in CHECKED for p in sorted((ROOT / package).rglob("*.py"))}
    modules = set(files)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    offences: list[str] = []
    for module, path in sorted(files.items()):
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, stated, names in imported_names(tree, module, path.name == "__init__.py"):
            if module.split(".")[0] in PRODUCTION and stated.split(".")[0] in ABOVE_PRODUCTION:
                where = path.relative_to(ROOT)
                offences.append(f"{where}:{line}: production module {module} imports {stated}, which sits above it")
            for name in names:
                target = resolve(name, modules)
                if target is not None and target != module:
                    graph[module].add(target)
            offences += _upward_in_layers(path, line, module, stated)
    return graph, offences


def _upward_in_layers(path: Path, line: int, module: str, stated: str) -> list[str]:
    """An import of a higher layer than the importer's own (LAYERS); chaos/tests/bench from production is
    reported by the production rule already."""
    mine, theirs = module.split(".")[0], stated.split(".")[0]
    if theirs not in LAYERS or theirs in ABOVE_PRODUCTION or LAYERS.index(theirs) <= LAYERS.index(mine):
        return []
    return [f"{path.relative_to(ROOT)}:{line}: {module} ({mine}) imports {stated} from the higher layer {theirs}"]


def shortest_cycle(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """The shortest path start -> ... -> start (breadth-first), or None."""
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node]):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles, shortest first, each sharing no import with one listed before it: one wrong import
    puts many modules on cycles through it, and is reported once (fix it, and the next one shows)."""
    candidates = sorted(
        (c for c in (shortest_cycle(graph, m) for m in sorted(graph)) if c is not None), key=lambda c: (len(c), c)
    )
    reported: list[list[str]] = []
    seen: set[tuple[str, str]] = set()
    for cycle in candidates:
        edges = set(zip(cycle, cycle[1:], strict=False))
        if not edges & seen:
            reported.append(cycle)
            seen |= edges
    return reported


def package_graph(graph: dict[str, set[str]], modules: set[str]) -> dict[str, set[str]]:
    """The imports between packages (a module counts for the package that holds it, a face for its package).
    A package's face may import its modules eagerly only if no package circle runs through it."""

    def package(module: str) -> str:
        return module if f"{module}.__init__" in modules else module.rpartition(".")[0] or module

    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = package(module)
        packages.setdefault(mine, set())
        for target in targets:
            theirs = package(target)
            packages.setdefault(theirs, set())
            if theirs != mine and not mine.startswith(f"{theirs}.") and not theirs.startswith(f"{mine}."):
                packages[mine].add(theirs)
    return packages


def main() -> int:
    """Print every offence and every cycle; 1 if there is any."""
    graph, offences = build_graph()
    modules = {f"{module_name(p)}.__init__" for package in CHECKED for p in (ROOT / package).rglob("__init__.py")}
    problems = offences + [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    problems += [f"package cycle: {' -> '.join(c)}" for c in cycles(package_graph(graph, modules))]
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_imports: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_imports: {len(graph)} modules, no upward import, no cycle ({' < '.join(LAYERS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
