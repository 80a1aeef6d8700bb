"""No two of the package's modules import each other, even for types only.

A cycle between modules (``a`` imports ``b`` and ``b`` imports ``a``, perhaps
under ``TYPE_CHECKING`` or inside a function) mostly hides one object split
over several files, each writing the others' private fields (issue 27 §1).
Every import statement counts, wherever it stands: at module level, under
``if TYPE_CHECKING:`` and inside functions. The import of a parent package
that importing a submodule implies does not count (or every module would
make a cycle with its package's ``__init__``); imports by name at run time
(``importlib``, the model registry's providers) are not seen.
"""

from __future__ import annotations

import ast
import pathlib

import procession

PACKAGE = pathlib.Path(procession.__file__).parent

# Cycles that remain, each with its reason; remove an entry when it is fixed
# (the test fails on a cycle that is listed but gone, so the list stays true).
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def _modules(package: pathlib.Path) -> dict[str, tuple[pathlib.Path, bool]]:
    """Each module's dotted name: its file, and whether it is a package."""
    found: dict[str, tuple[pathlib.Path, bool]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _import_graph(package: pathlib.Path) -> dict[str, dict[str, int]]:
    """module -> {imported module of the package: the line of one import}."""
    modules = _modules(package)
    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in modules.items():
        edges = graph.setdefault(name, {})
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    parent = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    parent = node.module or ""
                for alias in node.names:
                    submodule = f"{parent}.{alias.name}"
                    targets.append(submodule if submodule in modules else parent)
            else:
                continue
            for target in targets:
                if target in modules and target != name:
                    edges.setdefault(target, node.lineno)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def _said(graph: dict[str, dict[str, int]], cycle: frozenset[str]) -> str:
    edges = [
        f"    {a} -> {b} (line {line})"
        for a in sorted(cycle)
        for b, line in sorted(graph[a].items())
        if b in cycle
    ]
    return "\n".join([", ".join(sorted(cycle)), *edges])


def test_the_walk_sees_the_package() -> None:
    graph = _import_graph(PACKAGE)
    assert len(graph) > 100
    # A relative import, one under TYPE_CHECKING, one two levels up and a
    # package's re-export.
    assert "procession.actors._flow" in graph["procession.actors._split"]
    assert "procession.actors._markers" in graph["procession.actors._interface"]
    assert "procession._errors" in graph["procession.actors._flow"]
    assert "procession.actors._open" in graph["procession.actors"]


def test_the_walk_finds_a_type_only_cycle(tmp_path: pathlib.Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from ._a import A\n")
    (package / "_a.py").write_text("from ._b import B\n\nclass A(B): ...\n")
    (package / "_b.py").write_text(
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from ._a import A\n\n"
        "class B: ...\n"
    )
    (package / "_c.py").write_text("def f():\n    from . import _a\n")
    assert _cycles(_import_graph(package)) == [frozenset({"pkg._a", "pkg._b"})]


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = _import_graph(PACKAGE)
    cycles = set(_cycles(graph))
    new = [_said(graph, cycle) for cycle in cycles - KNOWN_CYCLES.keys()]
    assert not new, "import cycles among procession's modules:\n" + "\n".join(new)
    gone = [", ".join(sorted(cycle)) for cycle in KNOWN_CYCLES.keys() - cycles]
    assert not gone, f"listed in KNOWN_CYCLES but gone (remove them): {gone}"
