"""Seeded agent sessions (agents/endpoint.py `open_session(seed=...)`, rollout.py): each call samples from
its own seed, so the same session seed gives the same tokens again, whichever calls it was batched with;
the engine's per-prompt seeds (SamplingParams.seed as a list) make a row's draws its own."""

from __future__ import annotations

import copy
import threading

import openai
import pytest

from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.rollout.engine import SamplingParams, TransformersEngine

pytestmark = pytest.mark.usefixtures("one_thread")

QUESTION = [{"role": "user", "content": "Where was Karivo born?"}]


@pytest.fixture(scope="module")
def policy(tiny_model):
    model, tokenizer = tiny_model
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = QWEN25_TEMPLATE
    return model, tokenizer


def test_a_prompts_own_seed_gives_its_tokens_whatever_batch_it_is_in(policy):
    model, tok = policy
    engine = TransformersEngine(model, tok)
    a, b = tok.encode("Where was Karivo born?"), tok.encode("In which country")
    params = SamplingParams(max_new_tokens=10, temperature=1.0)
    together = engine.generate([a, b], SamplingParams(**{**vars(params), "seed": [11, 22]}))
    alone_b = engine.generate([b], SamplingParams(**{**vars(params), "seed": [22]}))
    swapped = engine.generate([b, a], SamplingParams(**{**vars(params), "seed": [22, 11]}))
    assert together[1].token_ids == alone_b[0].token_ids == swapped[0].token_ids
    assert together[0].token_ids == swapped[1].token_ids
    other = engine.generate([a, b], SamplingParams(**{**vars(params), "seed": [12, 23]}))
    assert [o.token_ids for o in other] != [o.token_ids for o in together]  # the seeds matter
    with pytest.raises(ValueError, match="2 seeds for 1 prompts"):
        engine.generate([a], SamplingParams(**{**vars(params), "seed": [1, 2]}))


def _sessions(ep, seeds, turns=2):
    """Runs one agent per seed at once (each calls `turns` times, one call after another); their records."""
    keys = [ep.open_session(seed=s) for s in seeds]

    def agent(key):
        c = openai.OpenAI(base_url=ep.base_url, api_key=key, max_retries=0, timeout=60)
        for _ in range(turns):
            c.chat.completions.create(model="policy", messages=QUESTION, max_tokens=8)

    threads = [threading.Thread(target=agent, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [[r.completion_ids for r in ep.close_session(k)] for k in keys]


def test_seeded_sessions_repeat_call_for_call_whatever_runs_beside_them(policy):
    model, tok = policy
    with Endpoint(TransformersEngine(model, tok), tok, EndpointConfig(temperature=1.0, max_tokens=8,
                                                                       max_total_tokens=400)) as ep:
        first = _sessions(ep, [5, 6, 7])
        again = _sessions(ep, [7, 5])  # other company, other batches, another order
        alone = _sessions(ep, [6])
    assert again == [first[2], first[0]] and alone == [first[1]]
    assert first[0][0] != first[0][1] or first[0] != first[1]  # a session's calls and sessions differ


def ask_twice(client, sample):
    """An agent for the rollout test below: two calls, one after the other; returns the last answer."""
    messages = [{"role": "user", "content": sample["question"]}]
    for _ in range(2):
        reply = client.chat.completions.create(model="policy", messages=messages, max_tokens=6)
        messages += [{"role": "assistant", "content": reply.choices[0].message.content or ""},
                     {"role": "user", "content": "Again."}]
    return reply.choices[0].message.content or ""


def test_an_agent_rollout_with_a_seed_repeats_and_another_seed_differs(policy):
    from agent_r1.config import load_config
    from agent_r1.envs.factory import make_env_factory
    from agent_r1.rewards.scoring import RewardConfig
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.loop import run_rollout
    from agent_r1.sampling import RolloutConfig

    model, tok = policy
    cfg = load_config(None, {"env.kind": "openai_agent", "env.agent": "tests.agents.test_endpoint_seed:ask_twice",
                             "env.agent_concurrency": 4})
    make_env = make_env_factory(cfg, None)
    samples = [{"id": "q0", "question": "Where was Karivo born?", "answers": ["x"]},
               {"id": "q1", "question": "Where was Bamena born?", "answers": ["y"]}]
    rollout = RolloutConfig(n_samples=2, max_tokens_per_turn=6, max_total_tokens=400)
    engine, codec = TransformersEngine(model, tok), ChatCodec(tok)
    try:
        runs = [[t.token_ids for t in run_rollout(engine, codec, make_env, samples, rollout, RewardConfig(), seed=s)]
                for s in (3, 3, 4)]
    finally:
        make_env.close()
    assert runs[0] == runs[1] and runs[0] != runs[2]
