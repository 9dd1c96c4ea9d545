"""Importing the library or a flow module changes nothing of the process: no `sys.path` edit (a
module is found through the install, `python -m` from the project root, or a loader that reads one
file), and no environment variable set by a statement that runs on import (a setting belongs where a
program starts, or in the function that needs it)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.project.import_edges import REPO, module_files

ENV_WRITES = ("setdefault", "update", "pop", "putenv", "unsetenv")


def sources() -> list[Path]:
    return sorted(module_files().values())


def _is_sys_path(node: ast.AST) -> bool:
    return ast.unparse(node) == "sys.path"


def _writes_environment(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in ENV_WRITES:
            if ast.unparse(sub.func.value) in ("os.environ", "os"):
                return True
        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(
            sub, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ" for t in targets):
            return True
    return False


def _runs_on_import(tree: ast.Module) -> list[ast.stmt]:
    """Module-level statements, less the bodies of functions, classes and `if __name__ == "__main__"`."""
    found = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If) and ast.unparse(stmt.test) == "__name__ == '__main__'":
            found += stmt.orelse
            continue
        found.append(stmt)
    return found


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


def test_no_environment_change_on_import():
    found = []
    for path in sources():
        tree = ast.parse(path.read_text(), str(path))
        called = {n.func.id for stmt in _runs_on_import(tree) for n in ast.walk(stmt)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        for stmt in _runs_on_import(tree):
            if _writes_environment(stmt):
                found.append(f"{path.relative_to(REPO)}:{stmt.lineno}")
        for fn in tree.body:  # a function of the module that writes the environment, called on import
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in called and _writes_environment(fn):
                found.append(f"{path.relative_to(REPO)}:{fn.lineno} ({fn.name}, called on import)")
    assert not found, f"environment set on import (set it where the program starts): {found}"


def test_the_checks_see_an_edit():
    tree = ast.parse("import os, sys\nsys.path.insert(0, '.')\ndef f():\n    os.environ['A'] = '1'\nf()\n"
                     "if __name__ == '__main__':\n    os.environ.setdefault('B', '1')\n")
    assert [s.lineno for s in _runs_on_import(tree)] == [1, 2, 5]
    assert _writes_environment(tree.body[2]) and not _writes_environment(tree.body[1])
    assert _writes_environment(tree.body[4].body[0])
