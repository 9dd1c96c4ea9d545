"""Tool workers are contained: a worker dies with the trainer (even one stuck in a
hung call when the trainer is SIGKILLed), what a tool started in a session of its own (`setsid`) is
killed with its worker on a timeout and on close(), and a tool's metadata is clipped like its text."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_r1.tools.base import ToolResult
from agent_r1.tools.runner import ToolCall, ToolRunner

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def _kill(*pids: int) -> None:
    for pid in pids:  # what the test started, by its own pids, whatever the outcome
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_for(path: Path, seconds: float = 30.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


class SetsidThenHang:
    """Starts a `sleep` in a session of its own (out of the worker's process group), then hangs."""

    name = "setsid_hang"
    description = "Starts a detached process and hangs."
    parameters = {"type": "object", "properties": {"dir": {"type": "string"}, "hang": {"type": "boolean"}},
                  "required": ["dir", "hang"]}

    def call(self, arguments):
        child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        Path(arguments["dir"], "grandchild").write_text(str(child.pid))
        if arguments["hang"]:
            time.sleep(60)
        return ToolResult("started")


def test_a_setsid_grandchild_dies_with_its_worker_on_timeout_and_on_close(tmp_path):
    runner = ToolRunner([SetsidThenHang()], timeout_s=1.0)
    pids: list[int] = []
    try:
        for hang, folder in ((True, tmp_path / "timeout"), (False, tmp_path / "close")):
            folder.mkdir()
            (result,) = runner.run([ToolCall("setsid_hang", {"dir": str(folder), "hang": hang})])
            pids.append(_wait_for(folder / "grandchild"))
            assert ("timed out" in result.text) == hang, result.text
            if not hang:
                assert _alive(pids[-1])  # a call that returned leaves it running, until close()
                runner.close()
            assert _gone_within(pids[-1], 5.0), f"the detached process of the {folder.name} case outlived its worker"
    finally:
        runner.close()
        _kill(*pids)


_TRAINER = """
import sys, time
from pathlib import Path
from agent_r1.tools.base import ToolResult
from agent_r1.tools.runner import ToolCall, ToolRunner

class Hang:
    name = "hang"
    description = "Writes its pid, then hangs."
    parameters = {"type": "object", "properties": {}}
    def call(self, arguments):
        import os
        Path(sys.argv[1]).write_text(str(os.getpid()))
        time.sleep(120)
        return ToolResult("late")

ToolRunner([Hang()], timeout_s=300).run([ToolCall("hang", {})])
"""


def test_a_worker_dies_with_a_trainer_killed_during_a_hung_call(tmp_path):
    pid_file = tmp_path / "worker.pid"
    trainer = subprocess.Popen([sys.executable, "-c", _TRAINER, str(pid_file)], cwd=ROOT)
    worker = 0
    try:
        worker = _wait_for(pid_file)
        assert _alive(worker)
        trainer.kill()
        trainer.wait(10)
        assert _gone_within(worker, 5.0), "the tool worker outlived the trainer (parent 1)"
    finally:
        trainer.kill()
        trainer.wait(10)
        if worker:
            _kill(worker)


class Flood:
    name = "flood"
    description = "Returns huge metadata."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        return ToolResult("ok", metadata={"titles": [f"title {i}" for i in range(200_000)], "blob": "x" * 5_000_000,
                                          "nested": {"deep": ["y" * 1000] * 1000}})


def test_a_tools_metadata_is_clipped_like_its_text():
    runner = ToolRunner([Flood()], timeout_s=30.0, max_result_chars=20_000)
    try:
        (result,) = runner.run([ToolCall("flood", {})])
    finally:
        runner.close()
    assert result.success and result.text == "ok"
    size = len(json.dumps(result.metadata, default=str))
    assert size <= 40_000, f"{size:,} characters of metadata reached the parent"
    assert result.metadata.get("clipped") is True
    assert result.metadata["titles"][:2] == ["title 0", "title 1"]  # what the process reward reads survives
