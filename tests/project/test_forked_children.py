"""tests/forked.py: the tests' child processes come from a server that has their imports and one
thread (a fork copies only the forking thread: a lock another thread held stays locked in the child)."""

from __future__ import annotations

import os
import sys

from tests import forked


def _report(queue) -> None:
    server = os.getppid()
    queue.put(("torch" in sys.modules, len(os.listdir(f"/proc/{server}/task")), os.getpid()))


def test_children_are_forked_from_a_one_thread_server_that_has_their_imports():
    ctx = forked.context()
    queue = ctx.Queue()
    child = ctx.Process(target=_report, args=(queue,))
    child.start()
    has_torch, server_threads, pid = queue.get(timeout=120)
    child.join(30)
    assert child.exitcode == 0 and pid != os.getpid()
    assert has_torch  # imported by the server, not by this module or the child
    assert server_threads == 1, f"the fork server runs {server_threads} threads: drop the module that starts them"


PROBE = "AGENT_R1_TESTS_FORKED_PROBE"


def _put_probe(queue) -> None:
    queue.put(os.environ.get(PROBE))


def test_with_environment_runs_the_child_under_the_tests_environment_of_the_moment(monkeypatch):
    ctx = forked.context()
    queue = ctx.Queue()

    def child_sees(target) -> str | None:
        child = ctx.Process(target=target, args=(queue,))
        child.start()
        seen = queue.get(timeout=120)
        child.join(30)
        assert child.exitcode == 0
        return seen

    assert child_sees(_put_probe) is None  # the server is up, and started without the setting
    monkeypatch.setenv(PROBE, "set by the test")
    assert child_sees(_put_probe) is None  # a plain child has the server's environment
    assert child_sees(forked.with_environment(_put_probe)) == "set by the test"
