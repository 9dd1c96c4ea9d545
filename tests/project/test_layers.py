"""Dependencies point one way, as docs/layers.json states them and docs/architecture.md draws them: from
the CLI (agent_r1/cli/) down through run assembly, training and evaluation to rollout, envs, algorithms,
retrieval and rewards, and down to the trajectory and schema types (`LAYERS`, bottom to top): no module
imports a layer above its own, lazy imports inside functions included, so each layer can be tested and
reused without the ones above it. `NEVER` lists the arrows that must not exist even where the layers
would allow them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.project import layers
from tests.project.import_edges import import_edges
from tests.project.layers import LAYERS, NEVER

ROOT = Path(__file__).resolve().parents[2] / "agent_r1"

def unit(module: str) -> str:
    """The layer unit of a dotted module name under agent_r1."""
    parts = module.split(".")[1:]
    if parts[:2] == ["data", "loaders"]:
        return "data.loaders"
    return parts[0] if parts else "agent_r1"


def rank(name: str) -> int:
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    raise AssertionError(f"{name} is on no layer: add it to a layer in docs/layers.json")


def imports() -> list[tuple[str, str, int]]:
    """(module, the agent_r1 module it imports, line), lazy imports inside functions included."""
    return [(e.source, e.target, e.line) for e in import_edges()
            if e.source.startswith("agent_r1.") and e.target.startswith("agent_r1.")]


def test_every_package_has_a_layer():
    for path in ROOT.iterdir():
        if path.name.startswith("__") or path.suffix not in ("", ".py"):
            continue
        rank(unit(f"agent_r1.{path.stem}"))


def test_no_import_runs_up_the_layers():
    up = [f"{src}:{line} imports {dst} ({unit(src)} -> {unit(dst)})" for src, dst, line in imports()
          if rank(unit(dst)) > rank(unit(src))]
    assert not up, "imports that run back up the layers:\n" + "\n".join(up)


def test_no_forbidden_arrow():
    never = {(a, b): why for a, b, why in NEVER}
    found = [f"{src}:{line} imports {dst} ({unit(src)} -> {unit(dst)}: never, {never[unit(src), unit(dst)]})"
             for src, dst, line in imports() if (unit(src), unit(dst)) in never]
    assert not found, "imports along a forbidden arrow (docs/architecture.md):\n" + "\n".join(found)


def test_the_design_page_draws_what_the_layers_file_says():
    assert layers.main(["--check"]) == 0, "run `python -m tests.project.layers`"


def test_the_page_check_sees_a_changed_layers_file(monkeypatch):
    rendered = layers.render()
    monkeypatch.setattr(layers, "_load", lambda: {**json.loads(layers.SOURCE.read_text()), "never": []})
    assert layers.render() != rendered and layers.main(["--check"]) == 1


def test_the_layers_file_keeps_the_rules_it_had():
    # the file's shorthands (a layer's name, "library") expand to the unit pairs the test checks
    assert {"trajectory", "schema", "precision", "registry", "sampling", "closing"} <= LAYERS[0]
    assert LAYERS[-1] == {"cli"} and {"runs"} in LAYERS and {"data.loaders", "agents"} <= LAYERS[2]
    never = {(a, b) for a, b, _ in NEVER}
    assert {("trajectory", "training"), ("tools", "rollout"), ("retrieval", "tools"), ("data.loaders", "envs"),
            ("agents", "training"), ("runs", "cli"), ("tracking", "cli")} <= never
    assert not any(b == "cli" and a == "cli" for a, b in never)


def test_the_config_checks_engine_names_without_importing_an_engine(tmp_path):
    # the engine registry sits below the config tree and knows its built-in names before their module loads
    code = ("import sys; from agent_r1.config import load_config; load_config(overrides={'rollout.engine': 'vllm'}); "
            "assert 'agent_r1.rollout.engines' not in sys.modules, 'checking rollout.engine imported the engines'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)  # a fresh process, any folder


def test_the_command_line_is_built_without_torch(tmp_path):
    # `agent-r1 --help` and a mistyped command answer in well under a second: torch (2-3 s to import)
    # loads only when a command that needs it runs
    code = ("import sys; from agent_r1.cli import build_parser; build_parser(); "
            "assert 'torch' not in sys.modules, 'building the parser imported torch'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


def test_no_command_module_left_in_a_library_package():
    stray = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("commands.py"))
    assert not stray, f"CLI commands belong in agent_r1/cli/: {stray}"


def test_evaluation_never_reaches_into_training():
    # implied by the layers; its own test so that a regression names this crossing
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
