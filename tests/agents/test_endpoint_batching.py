"""How the endpoint batches the calls of many running agent sessions, and what a session's client costs.

An engine call costs about the same for 20 prompts as for 128, so a rollout's calls should reach the
engine together: 128 sessions whose calls went out in ~14 batches of ~18 spent 97% of their rollout in
the engine (agent/engine_s), and 3 s making one TLS context per session's client."""

from __future__ import annotations

import ssl
import threading
import time

import openai

from agent_r1.agents.assemble import agent_metrics
from agent_r1.agents.batcher import Batcher
from agent_r1.agents.session_runner import Running, run_sessions
from agent_r1.rollout.engine import GenerationOutput, SamplingParams
from tests.agents.test_openai_agent import _rollout, ask, codec  # noqa: F401  (codec: the fixture)

DONE_S = 30  # a bound on a hung test, not a timing claim


class CountingEngine:
    """Echoes each prompt's last id; records each call's batch size. A double: the batching, not the
    model, is under test (tests/agents/test_endpoint.py batches a real model's calls)."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, params):
        self.calls.append(len(prompts))
        return [GenerationOutput([p[-1], 0], [-1.0, -1.0], "stop") for p in prompts]


def test_a_batch_waits_for_every_running_session_however_they_straggle():
    engine = CountingEngine()
    # a long quiet window: the batch closes because every running session has called, not by the clock
    batcher = Batcher(engine, SamplingParams(), wait_s=DONE_S, max_batch=256)
    batcher.running = lambda: 5
    try:
        futures = []
        for k in range(5):  # out of step, as sessions come back from their tools
            futures.append(batcher.submit([k + 1], 4, ()))
            time.sleep(0.05)
        outs = [f.result(timeout=2 * DONE_S) for f in futures]
    finally:
        batcher.close()
    assert engine.calls == [5] == batcher.batch_sizes
    assert [o.token_ids[0] for o in outs] == [1, 2, 3, 4, 5]  # each call its own completion
    assert len(batcher.engine_seconds) == 1


def test_a_session_busy_elsewhere_does_not_hold_the_others_past_the_wait():
    engine = CountingEngine()
    batcher = Batcher(engine, SamplingParams(), wait_s=0.2, max_batch=256)
    batcher.running = lambda: 3  # the third is in a slow tool: it does not call
    try:
        futures = [batcher.submit([k + 1], 4, ()) for k in range(2)]
        [f.result(timeout=DONE_S) for f in futures]
    finally:
        batcher.close()
    assert engine.calls == [2]


def test_running_counts_the_sessions_in_their_slots():
    seen, lock = [], threading.Lock()
    running = Running()

    def agent(client, sample):
        with lock:
            seen.append(running())
        time.sleep(0.2)  # all three hold their slots at once (concurrency 2 lets two in)
        return 1.0

    jobs = [({"id": f"q{k}"}, f"key{k}") for k in range(3)]
    results = run_sessions(agent, "http://127.0.0.1:9/v1", jobs, concurrency=2, timeout_s=DONE_S, running=running)
    assert [r.error for r in results] == ["", "", ""]
    assert max(seen) <= 2 and running() == 0  # never more than the slots; none left counted


def test_the_sessions_clients_share_one_tls_context(monkeypatch):
    made, clients = [], []
    real = ssl.create_default_context

    def counted(*a, **k):
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(ssl, "create_default_context", counted)

    def agent(client, sample):
        clients.append(client)
        return 1.0

    async def agent_async(client, sample):
        clients.append(client)
        return 1.0

    jobs = [({"id": f"q{k}"}, f"key{k}") for k in range(6)]
    for fn, cls in ((agent, openai.OpenAI), (agent_async, openai.AsyncOpenAI)):
        made.clear()
        clients.clear()
        run_sessions(fn, "http://127.0.0.1:9/v1", jobs, concurrency=6, timeout_s=DONE_S)
        assert len(made) == 1, f"{cls.__name__}: {len(made)} TLS contexts for 6 sessions"
        # each session still gets its own unmodified client, its key the API key
        assert sorted(c.api_key for c in clients) == [f"key{k}" for k in range(6)]
        assert all(type(c) is cls and c.max_retries == 0 for c in clients)


def test_a_rollout_says_where_its_seconds_went(codec):  # noqa: F811
    _, trajs = _rollout(codec, ask)
    m = agent_metrics(trajs)
    assert 1 <= m["agent/engine_calls"] <= m["agent/calls"] == 6
    assert 0 < m["agent/engine_s"] <= trajs[0].metrics["rollout_seconds"]
    assert m["agent/calls_per_engine_call"] == m["agent/calls"] / m["agent/engine_calls"]
