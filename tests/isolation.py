"""Per-process isolation for the test session, serial or under pytest-xdist (`make test` runs
`-n $(TEST_WORKERS)`): hooks that tests/conftest.py re-exports, so they run in every worker before
collection.

- PREFECT_HOME: a folder of this process's own. Prefect otherwise keeps its state and the task
  results a test caches in the user's ~/.prefect, beside a user's runs and shared by the workers
  (`make run` and `python -m flows.train_agent` point it at the project's `.prefect/`).
- torch threads: each of N workers gets cores // N intra-op threads (at least one). Two workers with
  two threads each on two cores spin against each other: the small-tensor tests then ran 3-5x slower.
- scheduling (`--dist loadfile`): a module's tests run on one worker, so a module-scoped fixture
  (a server, a Ray session, a built world) is set up once, not once per worker; the Ray modules
  are one unit, so that no two local Ray clusters (each asking for 3 CPUs) and no two workers'
  Ray sessions in the project's `.ray/` run at once; the flow and deployment modules are one unit,
  so that one Prefect server serves both. (xdist's own `--dist loadgroup` does nothing
  on pytest 9.2: it renames items through `item._nodeid`, which pytest no longer reads.) Units
  known to be long go out first (COST_HINTS).
  The units are for cost and load, not isolation: every fixture makes its own tmp folder (per
  worker under xdist), takes ports the OS hands out, and stops only what it started.
- the repository's own folders: a session that creates runs/, data/, mlruns/ or artifacts/ in
  the repository fails, naming the test after which each appeared (a test writes into its tmp_path).
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
# (a folder that was already there may be a user's concurrent `make run`: only new ones are checked)
USER_FOLDERS = ("runs", "data", "mlruns", "artifacts")
_OWN: list[str] = []  # folders this process made, removed at the end
_MADE = "AGENT_R1_TESTS_PREFECT_HOME"  # the PREFECT_HOME a test session made (not the caller's)


# Test files that run as one unit (one worker, one after the other), and why: see the docstring.
GROUPS = {"ray": ("test_ray_trainer.py", "test_async.py", "test_ddp_ray.py", "test_ray_cluster.py",
                  "test_benchmarks_ray_smoke.py", "test_dynamic_sampling_ray.py"),
          # one Prefect server for both (tests/integration/conftest.py)
          "prefect": ("test_flow.py", "test_deployment.py")}
# Rough seconds per unit under `make test` (benchmarks/suite_time.py's per-module figures), heaviest
# first: units are handed out in this order, so that no long unit starts last and leaves one worker
# running it alone. Only the order depends on these numbers, never what runs; a unit not listed goes
# after them.
COST_HINTS = {"ray": 256, "prefect": 70, "test_dvc.py": 43, "test_qwen_pipeline.py": 34, "test_ddp_uneven.py": 27,
              "test_mcp.py": 27, "test_mcp_faults.py": 26, "test_ddp.py": 20, "test_concurrent_starts.py": 20,
              "test_kill_resume.py": 18, "test_trainer.py": 16, "test_security.py": 15, "test_tracking_buffer.py": 15,
              "test_retriever_faults.py": 15, "test_determinism.py": 15, "test_qwen_like.py": 12, "test_runs.py": 11,
              "test_ray_local_auth.py": 11}


# A module that stops the shared local Ray (it connects to a cluster of its own) runs after the other
# Ray modules, so that none of them has to start it again (about 5 s of CPU on 2 cores).
RUN_LAST = ("test_ray_cluster.py",)


def order_items(items: list) -> None:
    """Moves RUN_LAST modules' tests after all others (pytest_collection_modifyitems' part); xdist
    hands out a unit's tests in this order."""
    items.sort(key=lambda item: Path(str(item.fspath)).name in RUN_LAST)  # stable: the rest keep their order


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


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown to a pytest without it
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the GROUPS files as one unit each (xdist's hook; other modes untouched)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return next((g for g, files in GROUPS.items() if Path(module).name in files), module)

        def _assign_work_unit(self, node) -> None:
            # longest hinted unit first (the base class pops the queue's front)
            heaviest = max(self.workqueue, key=lambda scope: COST_HINTS.get(Path(scope).name, 0))
            self.workqueue.move_to_end(heaviest, last=False)
            super()._assign_work_unit(node)

    return ModuleScheduling(config, log)


_BEFORE: set[str] = set()
_FOUND: dict[str, str] = {}  # folder -> the test after which this process first saw it


def pytest_sessionstart(session) -> None:  # noqa: ARG001
    _BEFORE.update(name for name in USER_FOLDERS if (REPO / name).exists())


def _new_folders() -> list[str]:
    return [name for name in USER_FOLDERS if (REPO / name).exists() and name not in _BEFORE]


def pytest_runtest_teardown(item) -> None:
    """Names the test after which a repository folder appeared, as a warning (xdist relays a
    worker's warnings to the summary; under xdist the other worker's test may have made it, so the
    name is where to look first: the session check below is the failure)."""
    for name in _new_folders():
        if name not in _FOUND:
            _FOUND[name] = item.nodeid
            item.warn(pytest.PytestWarning(f"{REPO / name} appeared in the repository after this test"))


def pytest_sessionfinish(session, exitstatus) -> None:  # noqa: ARG001
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller checks once, after every worker is done
    new = _new_folders()
    if new:
        # a failure, not a warning: a test that writes into the repository writes into a user's
        # runs and stores when a developer runs the suite in their working copy
        print(f"\nFAILED: the test session created {new} in the repository ({REPO}): a test must keep its "
              "runs, data and stores in its tmp_path (the warnings summary names the test after which each appeared)")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
