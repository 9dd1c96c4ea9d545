"""`make test`'s xdist scheduling (tests/isolation.py): the Ray modules go to one worker as one unit,
and the longest units are handed out first, so the suite's wall time is not a long unit run alone
at the end. Driven through xdist's real scheduler class with two recording nodes."""

from __future__ import annotations

from types import SimpleNamespace

from tests.isolation import pytest_xdist_make_scheduler

COLLECTION = ["tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_a.py::t3",  # most tests, cheap
              "tests/integration/test_ray_trainer.py::r1", "tests/test_b.py::b1", "tests/integration/test_ddp_ray.py::d1",
              "tests/integration/test_ddp_ray.py::d2", "tests/integration/test_deployment.py::p1", "tests/reliability/test_kill_resume.py::k1"]


class _Config:
    option = SimpleNamespace(loadscopereorder=True)  # xdist's default

    def getvalue(self, name: str):
        return {"dist": "loadfile", "tx": ["2*popen"]}[name]


HANDED: list[tuple[int, list[str]]] = []  # (node, a unit's nodeids), in the order handed out


class _Node:
    def __init__(self, number: int) -> None:
        self.number = number
        self.shutting_down = False
        self.gateway = SimpleNamespace(id=f"gw{number}")

    def send_runtest_some(self, indexes: list[int]) -> None:
        HANDED.append((self.number, [COLLECTION[i] for i in indexes]))

    def shutdown(self) -> None:
        self.shutting_down = True


class _Log:  # xdist's Producer interface: called, and hands out named sub-producers
    def __call__(self, *args) -> None:
        pass

    def __getattr__(self, name: str) -> _Log:
        return self


_log = _Log()


def test_ray_modules_are_one_unit_and_long_units_go_first():
    HANDED.clear()
    sched = pytest_xdist_make_scheduler(_Config(), _log)
    nodes = [_Node(0), _Node(1)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()  # the initial hand-out: each node gets work, a node with little gets a second unit
    while sched.workqueue:  # then as nodes finish (xdist hands out on each completed test)
        sched._assign_work_unit(nodes[len(HANDED) % 2])
    # the Ray group (hinted 300 s) whole to one node, the next longest to the other node
    (n0, ray), (n1, deployment) = HANDED[:2]
    assert sorted(ray) == ["tests/integration/test_ddp_ray.py::d1", "tests/integration/test_ddp_ray.py::d2", "tests/integration/test_ray_trainer.py::r1"]
    assert deployment == ["tests/integration/test_deployment.py::p1"] and n0 != n1
    files = [unit[0].split("::")[0] for _, unit in HANDED]
    # every hinted unit before the unhinted ones, and those in collection order
    assert files[2:] == ["tests/reliability/test_kill_resume.py", "tests/test_a.py", "tests/test_b.py"]
    assert sorted(t for _, unit in HANDED for t in unit) == sorted(COLLECTION)  # each test once


def test_suite_time_benchmark_reads_every_session_and_module():
    """benchmarks/suite_time.py on the output `make test` prints (two pytest sessions: the main
    suite under xdist, then the vLLM environment's), with PYTEST_ADDOPTS asking for durations."""
    from benchmarks import suite_time as bench

    output = """\
============================= slowest durations ==============================
110.74s call     tests/integration/test_deployment.py::test_two_deployment_runs_at_once
40.18s setup    tests/integration/test_ray_trainer.py::test_two_workers_roll_out_every_prompt_once
2.50s teardown tests/integration/test_ray_trainer.py::test_two_workers_roll_out_every_prompt_once
0.06s call     tests/integration/test_ddp.py::test_x[grpo]
1 failed, 908 passed, 40 warnings in 481.73s (0:08:01)
12.00s setup    tests_vllm/test_vllm_engine.py::test_token_ids
========= 1 failed, 6 passed in 95.20s (0:01:35) =========
"""
    parsed = bench.parse(output)
    assert parsed["sessions"] == [{"seconds": 481.73, "failed": 1, "passed": 908}, {"seconds": 95.2, "failed": 1, "passed": 6}]
    assert parsed["modules"] == {"tests/integration/test_deployment.py": 110.74, "tests/integration/test_ray_trainer.py": 42.68,
                                 "tests_vllm/test_vllm_engine.py": 12.0, "tests/integration/test_ddp.py": 0.06}
    assert list(parsed["modules"])[0] == "tests/integration/test_deployment.py"  # longest first


def test_every_cost_hint_names_a_unit_that_exists():
    """A renamed or moved module would silently lose its place at the front of the queue."""
    from tests.isolation import COST_HINTS, GROUPS, REPO

    modules = {p.name for p in (REPO / "tests").rglob("test_*.py")}
    assert all(unit in GROUPS or unit in modules for unit in COST_HINTS), set(COST_HINTS) - set(GROUPS) - modules
    assert all(name in modules for files in GROUPS.values() for name in files)
