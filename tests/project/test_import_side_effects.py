"""Importing the library or a flow module changes nothing of the process: no `sys.path` edit (a
module is found through the install, `python -m` from the project root, or a loader that reads one
file)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def sources() -> list[Path]:
    return sorted(p for package in ("agent_r1", "flows") for p in (REPO / package).rglob("*.py"))


def _is_sys_path(node: ast.AST) -> bool:
    return ast.unparse(node) == "sys.path"


def test_no_sys_path_edit():
    edits = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            changed = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                       and _is_sys_path(node.func.value)) or (
                isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                    _is_sys_path(t) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])))
            if changed:
                edits.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not edits, f"sys.path edited (import through the package or load the file by its path): {edits}"
