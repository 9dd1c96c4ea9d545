"""Dependencies point one way, as docs/architecture.md draws them: from the CLI (agent_r1/cli/) down
through run assembly, training and evaluation to rollout, envs, algorithms, retrieval and rewards,
and down to the trajectory and schema types (`LAYERS` below, bottom to top): no module imports a
layer above its own, lazy imports inside functions included, so each layer can be tested and reused
without the ones above it. `NEVER` lists the arrows that must not exist even where the layers
would allow them (the page's second table)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.project.import_edges import import_edges

ROOT = Path(__file__).resolve().parents[2] / "agent_r1"

# bottom to top; a module may import its own layer and those below it
LAYERS: list[set[str]] = [
    # precision: what the device computes natively (torch only); registry: the one Registry class of every
    # name-chosen component (estimators, losses, KL, formats, environments); sampling: the rollout section,
    # below both the config tree and the loop; closing: the one way owners end what their parts hold open
    {"trajectory", "schema", "precision", "registry", "sampling", "closing"},
    {"algos", "rewards", "data", "retrieval", "tools", "models", "tracking"},
    # data.loaders reads question rows, whose own `env` settings it checks with the envs' schema
    # agents: the OpenAI-compatible endpoint over an engine and the trajectories built from its records
    {"envs", "rollout", "data.loaders", "tasks", "agents"},
    {"config"},
    {"evaluation"},  # scores a policy; the trainer's held-out eval uses it, never the reverse
    {"training"},
    {"runs"},
    {"cli"},
]

# (from, to, why): docs/architecture.md's forbidden arrows, by layer unit
NEVER = [
    ("trajectory", "training", "types know no trainer"), ("schema", "training", "types know no trainer"),
    ("algos", "rollout", "math knows no engine"),
    ("rollout", "training", "the loop knows no optimiser"),
    ("envs", "rollout", "an env knows no engine"), ("tools", "rollout", "an env knows no engine"),
    ("tasks", "rollout", "an env knows no engine"),
    ("retrieval", "envs", "an engine knows no agent"), ("retrieval", "tools", "an engine knows no agent"),
    ("evaluation", "training", "evaluation scores a policy; it knows no trainer"),
    ("rollout", "runs", "the loop knows no run assembly"),
    ("evaluation", "runs", "evaluation is handed a policy, not a run"),
    ("data", "envs", "a loader knows no env"), ("data.loaders", "envs", "a loader knows no env"),
    ("config", "rollout", "the config tree imports no engine"),
    ("agents", "training", "the endpoint records what was sampled; it knows no optimiser"),
] + [(u, "cli", "commands are the face: the library never calls one")
     for layer in [
         {"trajectory", "schema", "precision", "registry", "sampling", "closing"},
         {"algos", "rewards", "data", "retrieval", "tools", "models", "tracking"},
         {"envs", "rollout", "data.loaders", "tasks", "agents"}, {"config"}, {"evaluation"}, {"training"}, {"runs"}]
     for u in layer]


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
    raise AssertionError(f"{name} is on no layer: add it to LAYERS in tests/project/test_layers.py")


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


def test_the_design_page_lists_every_forbidden_arrow():
    page = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    for _, _, why in NEVER:
        assert why in page, f"docs/architecture.md does not give the reason {why!r}"
    for layer in LAYERS:
        for name in layer:
            shown = name.replace(".", "/") if "." in name else name
            assert shown in page, f"docs/architecture.md does not place {name!r} on a layer"


def test_the_config_checks_engine_names_without_importing_an_engine(tmp_path):
    # the engine registry sits below the config tree and knows its built-in names before their module loads
    code = ("import sys; from agent_r1.config import load_config; load_config(overrides={'rollout.engine': 'vllm'}); "
            "assert 'agent_r1.rollout.engines' not in sys.modules, 'checking rollout.engine imported the engines'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)  # a fresh process, any folder


def test_no_command_module_left_in_a_library_package():
    stray = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("commands.py"))
    assert not stray, f"CLI commands belong in agent_r1/cli/: {stray}"


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
