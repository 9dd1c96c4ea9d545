"""The repository is self-contained: nothing it ships reads a path outside its own root.

The public QA samples once lived in a `shared/` folder beside the repository, so a stranger's
clone into an empty folder failed every data-reading test. They are tracked in `samples/` now;
these tests keep it that way:

- `test_no_tracked_file_reaches_outside_the_repo` scans every tracked text file for references
  that climb out of the root (`../shared`, `REPO.parent`, `Path(__file__).parents[n]` or a
  shell `dirname`/`..` or Markdown link that goes above the root) and names each file:line.
- `test_data_reading_tests_pass_in_a_clone_with_nothing_beside_it` clones HEAD into an empty
  temporary folder and runs a real subset of the data-reading tests there, importing the
  clone's own package (not the editable install that points at this working tree).

Both read the repository through git (`git ls-files`, `git clone`), so they need a git checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

# Patterns that name the outside folder directly, wherever they appear.
OUTSIDE = [
    (re.compile(r"\.\./shared\b"), "../shared"),
    (re.compile(r"\.parent\s*/\s*['\"]shared['\"]"), '.parent / "shared"'),
    (re.compile(r"(?<![\w./-])shared/(?:data|design)\b"), "shared/data or shared/design (the outside folder)"),
    (re.compile(r"/work/shared\b"), "an absolute path to the outside shared folder"),
    # the repo root's own parent: every root constant in this project is one of these names
    (re.compile(r"\b(?:REPO|ROOT|REPO_ROOT)\.parent\b"), "the repo root's parent"),
]
# `Path(__file__)...parents[n]` / `.parent.parent...`: how far up the file climbs.
FILE_PARENTS = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
FILE_PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent\b)+)")
# shell: `$(dirname "$0")/../..` or `${BASH_SOURCE[0]}`: how many `..` follow the script's folder
SHELL_CLIMB = re.compile(r"dirname\s+\"?\$(?:0|\{BASH_SOURCE\[0\]\})\"?\s*\)\"?((?:/\.\.)+)")
# Markdown links and images: `](../../x)`
MD_CLIMB = re.compile(r"\]\(((?:\.\./)+)")

# Recorded results that name where a past run read its data. They are history, not reads: the
# file the label names is byte-identical to samples/hotpotqa/hotpotqa_dev_distractor_400.jsonl,
# and benchmarks/retrieval.py now writes "(samples/)" on its next run.
ALLOWED = {("benchmarks/results/retrieval.json", "hotpotqa_dev_distractor_400 (shared/data)")}

# The samples are third-party data, not references; this file spells the patterns out.
SKIP_PREFIXES = ("samples/",)
SKIP_FILES = {"tests/project/test_self_contained.py"}


def _tracked_text_files() -> list[tuple[str, str]]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    out = []
    for rel in names.decode().split("\0"):
        if not rel or rel.startswith(SKIP_PREFIXES) or rel in SKIP_FILES:
            continue
        path = REPO / rel
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary (images, archives): no paths to read
            continue
        try:
            out.append((rel, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue  # not text either
    return out


def _escapes(rel: str, line: str) -> list[str]:
    """What on this line of `rel` points outside the repository root."""
    depth = rel.count("/")  # folders between the root and the file: the most it may climb
    found = [what for pattern, what in OUTSIDE if pattern.search(line)]
    for m in FILE_PARENTS.finditer(line):
        if int(m.group(1)) > depth:  # parents[0] is the file's folder, parents[depth] the root
            found.append(f"Path(__file__).parents[{m.group(1)}] climbs above the root")
    for m in FILE_PARENT_CHAIN.finditer(line):
        # the first .parent is the file's own folder, so depth + 1 of them reach the root
        if m.group(1).count(".parent") > depth + 1:
            found.append("Path(__file__).parent... climbs above the root")
    for m in SHELL_CLIMB.finditer(line):
        if m.group(1).count("..") > depth:
            found.append(f"dirname{m.group(1)} climbs above the root")
    if rel.endswith(".md"):
        for m in MD_CLIMB.finditer(line):
            if m.group(1).count("..") > depth:
                found.append(f"link ]({m.group(1)} climbs above the root")
    return found


def test_the_escape_checks_catch_what_they_are_for():
    """The scanner itself: each kind of climb is caught, and staying inside the root is not."""
    assert _escapes("tests/x.py", 'SHARED = REPO.parent / "shared" / "data"')
    assert _escapes("README.md", "  --questions ../shared/data/x.jsonl")
    assert _escapes("agent_r1/x.py", "(see shared/design/LEARNING.md)")
    assert _escapes("tests/x.py", "ROOT = Path(__file__).resolve().parents[2]")
    assert _escapes("tests/x.py", "ROOT = Path(__file__).parent.parent.parent")
    assert _escapes("infra/x.sh", 'cd "$(dirname "$0")/../../.."')
    assert _escapes("docs/x.md", "see [the design](../../design/A.md)")
    for rel, line in [("tests/x.py", "REPO = Path(__file__).resolve().parents[1]"),
                      ("tests/x.py", "ROOT = Path(__file__).parent.parent"),
                      ("infra/ray/x.sh", 'cd "$(dirname "$0")/../.."'),
                      ("docs/x.md", "see [the README](../README.md)"),
                      ("tests/x.py", 'SAMPLES = REPO / "samples"'),
                      ("README.md", "on a shared filesystem, or shared by rollout workers")]:
        assert not _escapes(rel, line), (rel, line)


def test_no_tracked_file_reaches_outside_the_repo():
    files = _tracked_text_files()
    assert len(files) > 50  # the scan saw the repository, not an empty listing
    bad = []
    for rel, text in files:
        for no, line in enumerate(text.splitlines(), 1):
            if any(rel == f and snippet in line for f, snippet in ALLOWED):
                continue
            bad += [f"{rel}:{no}: {what}: {line.strip()[:120]}" for what in _escapes(rel, line)]
    assert not bad, "references outside the repository root:\n" + "\n".join(bad)


def test_data_reading_tests_pass_in_a_clone_with_nothing_beside_it(tmp_path: Path):
    """A stranger's clone: HEAD cloned into an empty folder, then real data-reading tests run in
    it with this interpreter. The clone has no `.venv` and this interpreter's editable install
    points at this working tree, so PYTHONPATH and the working folder put the clone first, and
    the run prints which `agent_r1` and which `tests` it imported: both must be the clone's."""
    parent = tmp_path / "empty"
    parent.mkdir()
    clone = parent / "repo"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, capture_output=True, timeout=60)
    assert [p.name for p in parent.iterdir()] == ["repo"]  # nothing beside the clone
    assert (clone / "samples" / "hotpotqa" / "hotpotqa_dev_distractor_400.jsonl").is_file()  # committed

    # One process: import agent_r1, run pytest on the loader tests and the HotpotQA-400 corpus
    # test, then report the files pytest's own imports came from (same process, same modules).
    script = (
        "import sys, pytest, agent_r1\n"
        "print('AGENT_R1', agent_r1.__file__)\n"
        # `-o addopts=`: the project's own `-q` on top of ours would hide the summary line
        "rc = pytest.main(['-p', 'no:cacheprovider', '-x', '-q', '-o', 'addopts=', 'tests/data/test_loaders.py',\n"
        "                  'tests/data/test_corpus.py::test_hotpotqa_400_union'])\n"
        "print('AGENT_R1_AFTER', sys.modules['agent_r1'].__file__)\n"
        "print('CONFTEST', sys.modules['tests.conftest'].__file__)\n"
        "print('SAMPLES', sys.modules['tests.conftest'].SAMPLES)\n"
        "sys.exit(int(rc))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(clone)
    proc = subprocess.run([sys.executable, "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    seen = dict(line.split(" ", 1) for line in proc.stdout.splitlines()
                if line.split(" ", 1)[0] in {"AGENT_R1", "AGENT_R1_AFTER", "CONFTEST", "SAMPLES"})
    root = clone.resolve()
    assert Path(seen["AGENT_R1"]).resolve() == root / "agent_r1" / "__init__.py", out[-2000:]
    assert Path(seen["AGENT_R1_AFTER"]).resolve() == root / "agent_r1" / "__init__.py", out[-2000:]
    assert Path(seen["CONFTEST"]).resolve() == root / "tests" / "conftest.py", out[-2000:]
    assert Path(seen["SAMPLES"]).resolve() == root / "samples", out[-2000:]
    # every selected test ran and passed: nothing skipped, deselected or expected to fail
    summary = re.search(r"^(\d+) passed in [\d.]+s", proc.stdout, re.M)
    assert summary and int(summary.group(1)) >= 20, out[-2000:]
