"""The benchmark's search service (benchmarks/agents/search_service.py) under an iteration's load: every
agent session of an iteration (16 prompts x 8 in the endpoint row, `env.agent_concurrency` 256) asks for
the tools at the same moment. Its listen queue was socketserver's default of 5: in a seed-0 run of the row
2-3 of 128 sessions of some iterations failed on `ConnectionResetError` and were scored 0."""

from __future__ import annotations

import json
import os
import threading
import urllib.request

from agent_r1.config import load_config
from agent_r1.envs.factory import make_env_factory
from agent_r1.rollout.chat import ChatCodec
from benchmarks.agents.search_service import URL_ENV, SearchService
from tests.agents.test_chat_demos import SAMPLE, Docs

SESSIONS = 256


def test_every_session_of_an_iteration_gets_its_tools_at_once(tiny_model):
    cfg = load_config(None, {"env.format": "hermes"})
    env = make_env_factory(cfg, Docs())(SAMPLE)
    results: list[object] = []
    start = threading.Barrier(SESSIONS)

    def session() -> None:
        start.wait()
        try:
            with urllib.request.urlopen(f"{url}/tools", timeout=60) as resp:
                results.append(json.loads(resp.read())["tools"])
        except OSError as e:  # a refused or reset connection: what a session lost
            results.append(e)

    with SearchService(env, ChatCodec(tiny_model[1]), 30, 4):
        url = os.environ[URL_ENV]
        threads = [threading.Thread(target=session) for _ in range(SESSIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    failed = [r for r in results if isinstance(r, Exception)]
    assert not failed, f"{len(failed)} of {SESSIONS} sessions failed, the first: {failed[0]!r}"
    assert results == [env.tool_schemas] * SESSIONS
