"""Per-process isolation for the test session, serial or under pytest-xdist (`make test` runs
`-n 2`): hooks that tests/conftest.py re-exports, so they run in every worker before collection.

- PREFECT_HOME: a folder of this process's own. `flows/train_agent.py` otherwise points Prefect at
  the project's `.prefect/` on import (where `make run` keeps its state), and the task results a
  test caches would land beside a user's run and be shared by both workers.
- torch threads: each of N workers gets cores // N intra-op threads. Two workers with two threads
  each on two cores spin against each other: the small-tensor tests then ran 3-5x slower.
- xdist groups (used by `--dist loadgroup`): the tests of a module that has a module-scoped
  fixture (a server, a Ray session, a built world) run on one worker, so it is set up once, not
  once per worker; the Ray modules share one worker, so that no two local Ray clusters (each
  asking for 3 CPUs) and no two workers' Ray sessions in the project's `.ray/` run at once.
The groups are for cost and load, not isolation: every fixture makes its own tmp folder (per
worker under xdist), takes ports the OS hands out, and stops only what it started.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# where a user's own runs live: a test writes into its tmp folder, never here (a micro warm start
# once landed in the repository's runs/warm_starts from a test that left train.runs_dir at "runs")
USER_FOLDERS = ("runs", "data", "mlruns", "artifacts")
_OWN: list[str] = []  # folders this process made, removed at the end
_MADE = "AGENT_R1_TESTS_PREFECT_HOME"  # the PREFECT_HOME a test session made (not the caller's)


# Test files that share one xdist group (one worker, one after the other), and why.
GROUPS = {"ray": ("test_ray_trainer.py", "test_async.py", "test_ddp.py", "test_ray_cluster.py")}
SHARED_SCOPES = ("module", "package")  # a fixture of these scopes is made once per worker


def worker_count() -> int:
    """How many xdist workers share the machine (1 when the session is serial)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) if os.environ.get("PYTEST_XDIST_WORKER") else 1


def pytest_configure(config) -> None:  # noqa: ARG001  (the hook's signature)
    # one the caller set wins, as for MLflow's store; one an xdist controller made (workers
    # inherit its environment) is replaced, so that no two workers share one
    current = os.environ.get("PREFECT_HOME")
    if current is None or current == os.environ.get(_MADE):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        home = tempfile.mkdtemp(prefix=f"agent-r1-tests-prefect-{worker}-")
        _OWN.append(home)
        os.environ["PREFECT_HOME"] = os.environ[_MADE] = home
    workers = worker_count()
    if workers > 1:
        import torch

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        torch.set_num_threads(max(1, cores // workers))


def pytest_unconfigure(config) -> None:  # noqa: ARG001
    while _OWN:
        home = _OWN.pop()
        if os.environ.get("PREFECT_HOME") == home:
            del os.environ["PREFECT_HOME"], os.environ[_MADE]
        shutil.rmtree(home, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (it appends "@group" to node ids)
def pytest_collection_modifyitems(config, items) -> None:  # noqa: ARG001
    for item in items:
        group = next((name for name, files in GROUPS.items() if item.path.name in files), None)
        info = getattr(item, "_fixtureinfo", None)
        if group is None and info is not None and any(
                d.scope in SHARED_SCOPES for defs in info.name2fixturedefs.values() for d in defs):
            group = item.path.stem if item.path.parent.name == "tests" else f"{item.path.parent.name}.{item.path.stem}"
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _user_entries() -> set[str]:
    """Two levels of the user's folders (runs/<experiment>/<run>, runs/warm_starts/<hash>)."""
    out: set[str] = set()
    for name in USER_FOLDERS:
        top = REPO / name
        if top.is_dir():
            for child in top.iterdir():
                out.add(str(child.relative_to(REPO)))
                if child.is_dir():
                    out.update(str(p.relative_to(REPO)) for p in child.iterdir())
    return out


_BEFORE: set[str] = set()


def pytest_sessionstart(session) -> None:  # noqa: ARG001
    _BEFORE.update(_user_entries())


def pytest_sessionfinish(session, exitstatus) -> None:  # noqa: ARG001
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller checks once, after every worker is done
    new = sorted(_user_entries() - _BEFORE)
    if new:
        print(f"\nthe test session wrote into the repository's own folders: {new[:10]}; "
              "a test must keep its runs, data and stores in its tmp_path")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
