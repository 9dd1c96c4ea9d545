"""The project's import statements, read statically (ast): every `import` and `from ... import` in
agent_r1/ and flows/, at module level or inside a function alike, resolved to the project module it
names. Read by the layering test (tests/project/test_layers.py) and the import-circle test
(tests/project/test_no_import_circles.py).

`from pkg import name` points at the module `pkg.name` when that is a file, else at `pkg`; a name
below a module (`pkg.mod.func`) points at the module. A package's `__init__` is a module of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("agent_r1", "flows")


class Edge(NamedTuple):
    source: str  # the importing module, dotted
    target: str  # the project module it names
    line: int


def module_files() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts).removesuffix(".__init__")] = path
    return found


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def import_edges() -> list[Edge]:
    """Every import of a project module by another, in file and line order."""
    files = module_files()

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    edges = []
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, node, path.name == "__init__.py")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            edges += [Edge(module, t, node.lineno) for t in map(known, targets) if t and t != module]
    return edges
