"""Timeouts that stop the call: a hung tool is killed with its worker process, later calls still run,
a timed-out side effect never happens, and a retriever that keeps timing out stops the run like a
dead one (ServiceUnavailableError) instead of feeding the model timeout observations."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from agent_r1.retrieval.base import SearchConfig, open_retriever
from agent_r1.retrieval.errors import ServiceUnavailableError
from agent_r1.tools.base import ServiceTimeoutError, ToolResult
from agent_r1.tools.calculator import CalculatorTool
from agent_r1.tools.function_tool import tool
from agent_r1.tools.runner import ToolCall, ToolRunner
from agent_r1.tools.search import SearchTool

TIMEOUT_S = 0.4  # generous for a loaded 2-core machine: the calls that must succeed take microseconds

# Releases hung in-process threads at teardown (only the old thread-pool runner leaves them behind);
# a hung worker process is killed by the runner, so this never reaches one.
_RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def _release_hung_threads():
    _RELEASE.clear()
    yield
    _RELEASE.set()


class Hang:
    """A tool that never answers (within the test)."""

    name = "hang"
    description = "Hangs."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        _RELEASE.wait(60)
        return ToolResult("late")


class SideEffect:
    """Writes its pid, waits for `go`, then writes `done`: the side effect a timeout must prevent."""

    name = "side_effect"
    description = "Writes a file after a while."
    parameters = {"type": "object", "properties": {"dir": {"type": "string"}}, "required": ["dir"]}

    def call(self, arguments):
        folder = Path(arguments["dir"])
        (folder / "pid").write_text(str(os.getpid()))
        deadline = time.monotonic() + 30
        while not (folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        (folder / "done").write_text("ran")
        return ToolResult("wrote done")


class Crash:
    name = "crash"
    description = "Takes its process down."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        os._exit(3)


@tool(register=False)
def shout(text: str) -> str:
    """Upper-case some text."""
    return text.upper()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _runner(*tools, **kwargs) -> ToolRunner:
    return ToolRunner(list(tools), timeout_s=TIMEOUT_S, **kwargs)


def test_hung_tool_times_out_and_later_calls_still_succeed():
    runner = _runner(Hang(), CalculatorTool(), shout)
    try:
        for _ in range(6):  # more hung calls than the old pool had threads
            res = runner.run([ToolCall("hang", {})])[0]
            assert not res.success and res.metadata["error"] == "timeout" and "timed out" in res.text
        calc = runner.run([ToolCall("calculator", {"expression": "(2 + 3) * 4"})])[0]
        assert calc.success and calc.text == "20", calc.text
        loud = runner.run([ToolCall("shout", {"text": "still here"})])[0]
        assert loud.success and loud.text == "STILL HERE", loud.text
    finally:
        runner.close()


def test_timed_out_call_is_killed_so_its_side_effect_never_happens(tmp_path: Path):
    runner = _runner(SideEffect())
    try:
        res = runner.run([ToolCall("side_effect", {"dir": str(tmp_path)})])[0]
        assert not res.success and res.metadata["error"] == "timeout"
        pid = int((tmp_path / "pid").read_text())
        assert pid != os.getpid()  # the call ran outside the rollout's process ...
        assert not _alive(pid)  # ... and that process is gone once the caller was told "timed out"
        (tmp_path / "go").write_text("")  # a surviving call would now write `done` at once
        time.sleep(0.3)
        assert not (tmp_path / "done").exists()
    finally:
        runner.close()


def test_pool_recovers_after_many_hung_calls_in_one_batch():
    runner = _runner(Hang(), CalculatorTool(), shout, max_workers=3)
    try:
        calls = [ToolCall("hang", {}) for _ in range(10)] + [ToolCall("calculator", {"expression": "7 * 6"}),
                                                               ToolCall("shout", {"text": "ok"})]
        results = runner.run(calls)
        assert [r.metadata.get("error") for r in results[:10]] == ["timeout"] * 10
        assert results[10].success and results[10].text == "42"
        assert results[11].success and results[11].text == "OK"
        pids = runner.worker_pids()
        assert 1 <= len(pids) <= 3 and all(_alive(p) for p in pids)  # killed workers were replaced, not piled up
        assert runner.run([ToolCall("shout", {"text": "again"})])[0].text == "AGAIN"
    finally:
        runner.close()
    assert not any(_alive(p) for p in pids)  # close() stops the workers it started


def test_isolated_tool_failures_become_observations_and_outages_pass_through():
    class Down:
        name = "down"
        description = "Its service is down."
        parameters = {"type": "object", "properties": {}}

        def call(self, arguments):
            raise ServiceUnavailableError("the weather service at http://127.0.0.1:1 did not answer")

    local = "defined in this test"

    @tool(register=False)
    def closure(text: str) -> str:
        """Needs no pickling: the worker inherits it."""
        return f"{text} {local}"

    runner = _runner(Crash(), closure, Down())
    try:
        crashed = runner.run([ToolCall("crash", {})])[0]
        assert not crashed.success and crashed.metadata["error"] == "crash" and "exit code 3" in crashed.text
        assert runner.run([ToolCall("closure", {"text": "a tool"})])[0].text == "a tool defined in this test"
        with pytest.raises(ServiceUnavailableError, match=r"127\.0\.0\.1:1"):
            runner.run([ToolCall("down", {})])
    finally:
        runner.close()


class GatedRetriever:
    """An in-process retriever that hangs while `hung` is set (as a stuck server would)."""

    def __init__(self):
        self.hung = True

    def search(self, queries, k):
        if self.hung:
            _RELEASE.wait(60)
        return [[] for _ in queries]


def test_in_process_search_timeouts_must_be_consecutive_to_stop_the_run():
    retriever = GatedRetriever()
    runner = _runner(SearchTool(retriever, max_consecutive_timeouts=2))
    call = ToolCall("search", {"query": "q"})
    try:
        assert runner.run([call])[0].metadata["error"] == "timeout"
        retriever.hung = False
        assert runner.run([call])[0].success  # an answer resets the count
        retriever.hung = True
        assert runner.run([call])[0].metadata["error"] == "timeout"
        with pytest.raises(ServiceTimeoutError, match=r"search.*2 times in a row"):
            runner.run([call])
    finally:
        runner.close()


def test_hung_elasticsearch_node_fails_the_run_like_a_dead_one():
    """A server that accepts connections and never answers: every search would hang for the client's
    request timeout (30 s here, past the runner's timeout, then retried). The runner stops the run after 3 timeouts in a row."""
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)  # never accepted: connections complete in the backlog, requests get no answer
    url = f"http://127.0.0.1:{hung.getsockname()[1]}"
    retriever = open_retriever(SearchConfig(backend="elasticsearch", index_dir="", url=url, index_name="hung",
                                            retry_attempts=1, timeout_s=30))
    runner = _runner(SearchTool(retriever, max_consecutive_timeouts=3))
    call = ToolCall("search", {"query": "who built the tower"})
    try:
        for _ in range(2):
            res = runner.run([call])[0]
            assert not res.success and res.metadata["error"] == "timeout"
        with pytest.raises(ServiceUnavailableError) as info:
            runner.run([call])
        message = str(info.value)
        assert "'search' timed out 3 times in a row" in message and f"{TIMEOUT_S:g}s" in message, message
        assert "--resume" in message
    finally:
        runner.close()
        retriever.close()
        hung.close()
