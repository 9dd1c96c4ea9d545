"""benchmarks/ is code like the library: a package, run from the repository root, whose scripts import
each other and agent_r1 (and, of tests/, only the shared infrastructure in tests/support/), never through
`sys.path` edits; functions short enough to
read (at most MAX_LINES lines); every benchmark run by a test at micro size (the smoke modules, which
`make bench` runs, or the test named in COVERED_ELSEWHERE), so that a change cannot break one silently; the shell
benchmarks parse and call only scripts, flags and tests that exist."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
MAX_LINES = 60
# the modules that run benchmarks: the micro runs (`make bench`) and the readers (`make test`)
SMOKE = ("tests/bench/test_benchmarks_smoke.py", "tests/bench/test_benchmarks_ray_smoke.py",
         "tests/bench/test_bench_readers.py", "tests/bench/test_benchmarks_outside_agent_smoke.py")
# benchmark module -> the test that runs it (its main or its whole computation) at small size
COVERED_ELSEWHERE = {
    "plots": "tests/bench/test_plots.py",
    "retrieval_scale": "tests/retrieval/test_retrieval_scale.py",
    "tables": "tests/project/test_figures.py",
}
# run only where their optional dependency is installed: perf_trl.py's `trl` (the bench extra; the
# smoke test runs it through perf_trl when it is there) and vLLM's CPU build (.venv-vllm)
OPTIONAL = {"perf_trl_tool": "trl", "vllm_cpu": "vllm (.venv-vllm)",
            "perf_vllm": "vllm and trl (.venv-vllm plus trl)"}


def modules() -> dict[str, ast.Module]:
    """name -> tree of every module, a subpackage's as `package.module` (benchmarks/agents/)."""
    return {".".join(p.relative_to(BENCH).with_suffix("").parts): ast.parse(p.read_text(), str(p))
            for p in sorted(BENCH.rglob("*.py")) if p.stem != "__init__" and ".work" not in p.parts}


def benchmark_imports(tree: ast.AST) -> set[str]:
    """The benchmarks modules a file imports (`from benchmarks import x`, `from benchmarks.x import`,
    `from benchmarks.pkg import x` -> `pkg.x`); names that are no module are harmless extras."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "benchmarks":
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks."):
            rest = node.module.split(".", 1)[1]
            out |= {rest} | {f"{rest}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".", 1)[1] for a in node.names if a.name.startswith("benchmarks.")}
    return out


def test_no_sys_path_edits_and_only_tests_support_from_tests():
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("insert", "append") and \
                    ast.unparse(node.value) == "sys.path":
                pytest.fail(f"benchmarks/{name}.py:{node.lineno} edits sys.path: import through the package")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n == "tests" or n.startswith("tests.") and not n.startswith("tests.support")
                               for n in names), \
                    f"benchmarks/{name}.py:{node.lineno} imports from tests/ outside tests/support/"
    for script in BENCH.glob("*.sh"):  # embedded Python too
        text = script.read_text()
        assert "sys.path.insert" not in text and not re.search(r"from tests\b|import tests\b", text), script


def test_functions_are_short():
    long = [f"benchmarks/{name}.py:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for name, tree in modules().items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_LINES]
    assert not long, f"functions over {MAX_LINES} lines (split them): {long}"


def test_every_benchmark_is_run_by_a_test():
    trees = modules()
    run = set()
    for path in SMOKE:
        run |= benchmark_imports(ast.parse((REPO / path).read_text()))
    for name, test in COVERED_ELSEWHERE.items():
        assert name in benchmark_imports(ast.parse((REPO / test).read_text())), (name, test)
        run.add(name)
    # what a run benchmark imports runs too (common, perf_common, objective_rows, ...)
    frontier = set(run)
    while frontier:
        frontier = {m for name in frontier if name in trees for m in benchmark_imports(trees[name])} - run
        run |= frontier
    missing = sorted(set(trees) - run - set(OPTIONAL))
    assert not missing, f"benchmarks no test runs: {missing} (add each to tests/bench/test_benchmarks_smoke.py)"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.sh")))
def test_shell_benchmarks_parse_and_call_what_exists(script, capsys):
    path = BENCH / script
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, script
    calls = re.findall(r"-m benchmarks\.(\w+)([^\n|]*)", path.read_text())
    tests = re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", path.read_text())
    assert calls or tests, script
    for name, rest in calls:
        module = importlib.import_module(f"benchmarks.{name}")  # the script exists and imports
        with pytest.raises(SystemExit) as done:
            module.main(["--help"])
        usage = capsys.readouterr().out
        assert done.value.code == 0 and "usage" in usage, (script, name)
        for flag in re.findall(r"(?<!\w)(--[a-z][\w-]*)", rest):
            assert flag in usage, f"{script} calls benchmarks/{name}.py with {flag}, which it does not take"
    for file, test in tests:  # the suite's tests a script runs on a GPU exist
        assert (REPO / file).exists() and (not test or f"def {test}(" in (REPO / file).read_text()), (script, file, test)


def test_a_benchmark_runs_as_a_module_from_the_repository():
    """README and the Makefile run `python -m benchmarks.x` from the repository root: benchmarks/ is not
    in the wheel, the working directory puts it on the import path."""
    import sys

    out = subprocess.run([sys.executable, "-m", "benchmarks.memory", "--help"], cwd=REPO, capture_output=True,
                         text=True)
    assert out.returncode == 0 and "update/rows64_micro4_fp32" in out.stdout, out.stderr[-2000:]
