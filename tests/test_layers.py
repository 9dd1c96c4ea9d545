"""Dependencies point one way, from the CLI and flows down through training and evaluation to
rollout, envs, algorithms, retrieval and rewards, and down to the trajectory and schema types
(`LAYERS` below, bottom to top): no module imports a layer above its own, lazy imports inside
functions included, so each layer can be tested and reused without the ones above it. `*/commands.py` modules are the CLI's subcommands, kept
beside their package: they sit on the CLI layer."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "agent_r1"

# bottom to top; a module may import its own layer and those below it
LAYERS: list[set[str]] = [
    # precision: what the device computes natively (torch only); registry: the one Registry class of every
    # name-chosen component (estimators, losses, KL, formats, environments)
    {"trajectory", "schema", "precision", "registry"},
    {"algos", "rewards", "data", "retrieval", "tools", "models", "tracking"},
    # data.loaders reads question rows, whose own `env` settings it checks with the envs' schema
    {"envs", "rollout", "data.loaders", "tasks"},
    {"config"},
    {"evaluation"},  # scores a policy; the trainer's held-out eval uses it, never the reverse
    {"training"},
    {"runs"},
    {"cli", "commands"},
]


def unit(module: str) -> str:
    """The layer unit of a dotted module name under agent_r1."""
    parts = module.split(".")[1:]
    if parts and parts[-1] in ("commands", "__main__") and parts[0] != "tracking":
        return "commands"
    if parts[:2] == ["data", "loaders"]:
        return "data.loaders"
    return parts[0] if parts else "agent_r1"


def rank(name: str) -> int:
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    raise AssertionError(f"{name} is on no layer: add it to LAYERS in tests/test_layers.py")


def imports() -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = "agent_r1." + ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if node.module == "agent_r1":
                    names = [f"agent_r1.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found += [(module, n, node.lineno) for n in names if n.startswith("agent_r1.")]
    return found


def test_every_package_has_a_layer():
    for path in ROOT.iterdir():
        if path.name.startswith("__") or path.suffix not in ("", ".py"):
            continue
        rank(unit(f"agent_r1.{path.stem}"))


def test_no_import_runs_up_the_layers():
    up = [f"{src}:{line} imports {dst} ({unit(src)} -> {unit(dst)})" for src, dst, line in imports()
          if rank(unit(dst)) > rank(unit(src))]
    assert not up, "imports that run back up the layers:\n" + "\n".join(up)


def test_evaluation_never_reaches_into_training():
    # implied by the layers; kept as its own test because the issue named it (a regression names it)
    crossing = [f"{src}:{line} imports {dst}" for src, dst, line in imports()
                if unit(src) == "evaluation" and unit(dst) == "training"]
    assert not crossing, "\n".join(crossing)


def test_the_checker_sees_lazy_imports(tmp_path):
    # the rule must hold for imports inside functions too (most heavy imports here are lazy)
    src = "def f():\n    from agent_r1.runs.assembly import ensure_data\n"
    tree = ast.parse(src)
    nested = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert nested == ["agent_r1.runs.assembly"]
    assert rank(unit("agent_r1.runs.assembly")) > rank(unit("agent_r1.training.trainer"))
