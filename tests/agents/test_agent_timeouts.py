"""An agent past `env.agent_timeout_s` is a failed session, whatever it is blocked on, and it cannot keep
the trainer's process alive: a sync agent stuck in a call, or an async agent that blocks its thread
(a sync HTTP call, `time.sleep`) instead of awaiting."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tests.agents.test_openai_agent import ask, ask_async, codec  # noqa: F401  (codec: the fixture)
from tests.agents.test_openai_agent import SAMPLES, _rollout

REPO = Path(__file__).resolve().parents[2]
HANG_BOUND_S = 60  # how long the child may take to exit: a bound on a hung test, not a timing claim

SCRIPT = """
import asyncio, threading, time
from agent_r1.agents.session_runner import run_sessions

def stuck(client, sample):
    threading.Event().wait()  # a call that never returns

async def stuck_async(client, sample):
    threading.Event().wait()  # blocks the thread, not awaited

agent = {agent}
results = run_sessions(agent, "http://127.0.0.1:9/v1", [({{"id": "q"}}, "key")], concurrency=1, timeout_s=0.5)
print("RESULT", results[0].error)
"""


@pytest.mark.parametrize("agent", ["stuck", "stuck_async"])
def test_a_stuck_agent_times_out_and_the_process_still_exits(tmp_path, agent):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT.format(agent=agent)))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        out, err = proc.communicate(timeout=HANG_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()  # by its own pid
        out, err = proc.communicate()
        pytest.fail(f"the process did not exit after its agent timed out; it printed {out!r}")
    assert proc.returncode == 0, err
    assert "RESULT timed out after env.agent_timeout_s=0.5s" in out


def test_an_async_agent_that_blocks_past_its_timeout_is_a_failure(codec):  # noqa: F811
    release = threading.Event()

    async def agent(client, sample):
        answer = await ask_async(client, sample)
        if sample["id"] == "q1":
            release.wait(HANG_BOUND_S)  # a blocking call inside a coroutine: the loop cannot cancel it
        return answer

    try:
        _, trajs = _rollout(codec, agent, timeout_s=0.5)
    finally:
        release.set()
    assert [t.sample_id for t in trajs] == ["q0"] * 3 + ["q1"] * 3
    assert [t.stop_reason for t in trajs] == ["agent"] * 3 + ["agent_error"] * 3
    assert [t.outcome_reward for t in trajs] == [1.0] * 3 + [0.0] * 3


def test_a_sync_agent_stuck_past_its_timeout_is_a_failure_and_the_rest_are_scored(codec):  # noqa: F811
    release = threading.Event()

    def agent(client, sample):
        answer = ask(client, sample)
        if sample["id"] == "q1":
            release.wait(HANG_BOUND_S)
        return answer

    try:
        _, trajs = _rollout(codec, agent, timeout_s=0.5)
    finally:
        release.set()
    assert [t.stop_reason for t in trajs] == ["agent"] * 3 + ["agent_error"] * 3
    assert SAMPLES[0]["answers"] == ["Telumas"] and [t.outcome_reward for t in trajs][:3] == [1.0] * 3
