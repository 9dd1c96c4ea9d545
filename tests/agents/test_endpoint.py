"""The OpenAI-compatible endpoint, called by the `openai` package as an agent would call it.

The client side of every test uses `openai` only (the project starts the server and reads the
records); the policy is a tiny real model whose tokenizer renders with Qwen2.5's chat template, so
tool calls, tool messages and the glue between turns go through a real template.
"""

from __future__ import annotations

import copy
import json
import threading
import time

import httpx
import openai
import pytest
import torch

from agent_r1.agents.assemble import build_trajectories
from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationOutput, TransformersEngine
from agent_r1.training.compute import token_logprobs

pytestmark = pytest.mark.usefixtures("one_thread")

TEMPERATURE = 0.7  # the run's; not 1, so a log-prob taken at the wrong temperature shows
TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the encyclopedia.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]
CALL_TEXT = '<tool_call>\n{"name": "search", "arguments": {"query": "Karivo"}}\n</tool_call>'
QUESTION = [{"role": "system", "content": "Answer the question."},
            {"role": "user", "content": "Where was Karivo born?"}]


@pytest.fixture(scope="module")
def policy(tiny_model):
    model, tokenizer = tiny_model
    tokenizer = copy.deepcopy(tokenizer)  # the session's fixture keeps its own template
    tokenizer.chat_template = QWEN25_TEMPLATE
    return model, tokenizer


class ScriptedEngine:
    """Writes the given texts in turn (as a model that has learnt to call tools would), ending each with
    the end-of-turn token; keeps every prompt it was given."""

    def __init__(self, tokenizer, texts):
        self.codec, self.texts, self.prompts = ChatCodec(tokenizer), list(texts), []

    def generate(self, prompts, params):
        self.prompts += prompts
        outs = []
        for _ in prompts:
            ids = self.codec.encode(self.texts.pop(0)) + [self.codec.eos_token_id]
            outs.append(GenerationOutput(ids, [-0.5] * len(ids), "stop", "<|im_end|>"))
        return outs


class GatedEngine:
    """Holds its first call until released (so later calls queue up), then echoes each prompt's last
    three ids: which completion went to which call shows in the records."""

    def __init__(self, eos):
        self.eos, self.gate, self.calls = eos, threading.Event(), []

    def generate(self, prompts, params):
        self.calls.append(len(prompts))
        assert self.gate.wait(30)
        return [GenerationOutput(p[-3:] + [self.eos], [-1.0] * 4, "stop") for p in prompts]


@pytest.fixture(scope="module")
def real(policy):
    model, tokenizer = policy
    with Endpoint(TransformersEngine(model, tokenizer), tokenizer,
                  EndpointConfig(temperature=TEMPERATURE, max_tokens=12, max_total_tokens=400)) as ep:
        yield ep


def client(ep, session):
    return openai.OpenAI(base_url=ep.base_url, api_key=session, max_retries=0, timeout=60)


def test_a_plain_answer_is_recorded_token_for_token_at_the_runs_temperature(real, policy):
    model, tokenizer = policy
    session = real.open_session()
    # the request's temperature is ignored: the trainer recomputes log-probs at the run's
    resp = client(real, session).chat.completions.create(model="policy", messages=QUESTION, temperature=1.5)
    (rec,) = real.recorder.take(session)
    choice = resp.choices[0]
    assert choice.finish_reason in ("stop", "length") and choice.message.tool_calls is None
    assert resp.usage.prompt_tokens == len(rec.prompt_ids) and resp.usage.completion_tokens == len(rec.completion_ids)
    assert 1 <= len(rec.completion_ids) <= 12 and rec.messages == 2 and rec.temperature == TEMPERATURE
    assert rec.info["ignored"] == ["temperature"]
    # the recorded prompt is the chat template's render of the messages, the completion what was answered
    rendered = tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(rec.prompt_ids) == rendered
    body = rec.completion_ids[:-1] if rec.completion_ids[-1] in real.stop_ids else rec.completion_ids
    assert choice.message.content == tokenizer.decode(body)
    # the trainer's log-probs of the recorded sequence equal the sampled ones
    ids = torch.tensor([rec.prompt_ids + rec.completion_ids])
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, torch.ones_like(ids), temperature=TEMPERATURE)
    trainer = logp[0, len(rec.prompt_ids):]
    assert torch.allclose(trainer, torch.tensor(rec.completion_logprobs), atol=1e-4)
    with torch.no_grad():  # and differ at another temperature: the check can fail
        other, _ = token_logprobs(model, ids, torch.ones_like(ids), temperature=1.0)
    assert not torch.allclose(other[0, len(rec.prompt_ids):], trainer, atol=1e-3)


def test_max_tokens_is_honoured_and_capped_by_the_run(real):
    session = real.open_session()
    c = client(real, session)
    short = c.chat.completions.create(model="policy", messages=QUESTION, max_tokens=2)
    long = c.chat.completions.create(model="policy", messages=QUESTION, max_completion_tokens=500)
    assert short.usage.completion_tokens <= 2 and long.usage.completion_tokens <= 12
    assert [len(r.completion_ids) for r in real.recorder.take(session)] == [short.usage.completion_tokens,
                                                                           long.usage.completion_tokens]
    assert c.models.list().data[0].id == "policy"


def test_concurrent_agents_are_recorded_under_their_own_sessions(real):
    sessions = [real.open_session() for _ in range(3)]
    errors = []

    def agent(s, turns):
        try:
            for _ in range(turns):
                client(real, s).chat.completions.create(model="policy", messages=QUESTION, max_tokens=3)
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(s, k + 1)) for k, s in enumerate(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [len(real.recorder.take(s)) for s in sessions] == [1, 2, 3]


def test_calls_that_arrive_together_are_generated_as_one_batch(policy):
    # 50 waiting calls, more than the server's thread pool (40): waiting on a batch holds no thread
    waiting = 50
    _, tokenizer = policy
    engine = GatedEngine(tokenizer.eos_token_id)
    with Endpoint(engine, tokenizer, EndpointConfig(batch_wait_s=0.0)) as ep:
        sessions = [ep.open_session() for _ in range(1 + waiting)]
        results = {}

        def agent(k):
            results[k] = client(ep, sessions[k]).chat.completions.create(
                model="policy", messages=[{"role": "user", "content": f"Where was person {k} born?"}])

        threads = [threading.Thread(target=agent, args=(k,)) for k in range(1 + waiting)]
        threads[0].start()
        while not engine.calls:  # the first call is generating (held at the gate)
            time.sleep(0.01)
        for t in threads[1:]:
            t.start()
        deadline = time.monotonic() + 30
        while ep.batcher._queue.qsize() < waiting and time.monotonic() < deadline:
            time.sleep(0.01)
        engine.gate.set()
        for t in threads:
            t.join()
        assert engine.calls == [1, waiting] == ep.batcher.batch_sizes
        for k, s in enumerate(sessions):
            (rec,) = ep.recorder.take(s)
            assert rec.completion_ids[:-1] == rec.prompt_ids[-3:]  # its own prompt's completion
            assert results[k].choices[0].message.content == tokenizer.decode(rec.prompt_ids[-3:])


def test_a_tool_call_round_trip_is_one_trajectory_and_edited_history_a_new_step(policy):
    _, tokenizer = policy
    engine = ScriptedEngine(tokenizer, [CALL_TEXT, "Telumas.", "Telumas, I think."])
    with Endpoint(engine, tokenizer, EndpointConfig(temperature=TEMPERATURE)) as ep:
        session = ep.open_session()
        c = client(ep, session)
        messages = list(QUESTION)
        first = c.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (call,) = choice.message.tool_calls
        assert call.id.startswith("call_") and call.function.name == "search"
        assert json.loads(call.function.arguments) == {"query": "Karivo"}
        # the agent appends the assistant message as the SDK gives it, then the tool's result
        messages += [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "Karivo was born in Telumas."}]
        second = c.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        assert second.choices[0].finish_reason == "stop" and second.choices[0].message.content == "Telumas."
        # a harness that edits history (here: the system prompt) leaves the sampled tokens behind
        edited = [{"role": "system", "content": "Be brief."}] + messages[1:]
        c.chat.completions.create(model="policy", messages=edited, tools=TOOLS)
        records = ep.recorder.take(session)

    assert [r.finish_reason for r in records] == ["tool_calls", "stop", "stop"]
    steps, stats = build_trajectories(records[:2], "q0", decode=tokenizer.decode)
    (traj,) = steps
    assert (stats.calls, stats.steps, stats.drift) == (2, 1, 0)
    # one sequence: the second call's prompt + completion, with both completions trained
    assert traj.token_ids == records[1].prompt_ids + records[1].completion_ids
    assert sum(traj.action_mask) == len(records[0].completion_ids) + len(records[1].completion_ids)
    first_turn = traj.turns[0]
    assert first_turn.action_text == CALL_TEXT + "<|im_end|>" and first_turn.tool_calls == 1
    assert "<tool_response>\nKarivo was born in Telumas.\n</tool_response>" in first_turn.observation_text
    assert traj.sampled_logprobs[len(traj.prompt_ids)] == -0.5  # the engine's own log-probs, in place

    steps, stats = build_trajectories(records, "q0")
    assert (stats.calls, stats.steps, stats.drift) == (3, 2, 1)
    assert steps[1].prompt_ids == records[2].prompt_ids and len(steps[1].turns) == 1


def test_unknown_sessions_and_malformed_requests_are_refused_with_a_reason(real):
    with pytest.raises(openai.AuthenticationError, match="unknown session key"):
        client(real, "not-a-session").chat.completions.create(model="policy", messages=QUESTION)
    session = real.open_session()
    c = client(real, session)
    with pytest.raises(openai.BadRequestError, match="n=2") as n:
        c.chat.completions.create(model="policy", messages=QUESTION, n=2)
    assert n.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError, match=r"messages\[1\]\.role") as role:
        c.chat.completions.create(model="policy", messages=[QUESTION[0], {"role": "robot", "content": "hi"}])
    assert role.value.body["param"] == "messages[1].role"
    with pytest.raises(openai.BadRequestError, match="not valid JSON"):
        c.chat.completions.create(model="policy", messages=QUESTION + [{
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{oops"}}]}])
    with pytest.raises(openai.BadRequestError, match="the run allows 400"):
        c.chat.completions.create(model="policy", messages=[{"role": "user", "content": "Karivo " * 400}])
    raw = httpx.post(f"{real.base_url}/chat/completions", content=b"{not json",
                     headers={"Authorization": f"Bearer {session}"})
    assert raw.status_code == 400 and "not valid JSON" in raw.json()["error"]["message"]
    assert real.recorder.take(session) == []  # refused calls record nothing
    real.close_session(session)
    with pytest.raises(openai.AuthenticationError):  # a closed session is not reopened
        c.chat.completions.create(model="policy", messages=QUESTION)


def test_stop_strings_reach_the_engine_and_are_left_out_of_the_content(policy):
    _, tokenizer = policy

    class Stopping(ScriptedEngine):  # stops at the requested string, as the engines do
        def generate(self, prompts, params):
            self.params = params
            text = self.texts.pop(0)
            ids = self.codec.encode(text)
            return [GenerationOutput(ids, [-0.5] * len(ids), "stop", params.stop_strings[0])]

    engine = Stopping(tokenizer, ["Telumas.\nObservation:"])
    with Endpoint(engine, tokenizer, EndpointConfig(temperature=TEMPERATURE, max_tokens=30)) as ep:
        c = client(ep, ep.open_session())
        resp = c.chat.completions.create(model="policy", messages=QUESTION, stop="\nObservation:", max_tokens=7)
    assert resp.choices[0].message.content == "Telumas." and resp.choices[0].finish_reason == "stop"
    assert engine.params.stop_strings == ("\nObservation:",) and engine.params.max_new_tokens == [7]
    assert engine.params.temperature == TEMPERATURE and tokenizer.eos_token_id in engine.params.stop_token_ids


def test_an_engine_error_reaches_the_agent_and_the_endpoint_keeps_serving(policy):
    _, tokenizer = policy

    class Failing(ScriptedEngine):
        def generate(self, prompts, params):
            if not self.texts:
                raise RuntimeError("out of memory, say")
            return super().generate(prompts, params)

    with Endpoint(Failing(tokenizer, []), tokenizer) as ep:
        c = client(ep, ep.open_session())
        with pytest.raises(openai.InternalServerError, match="RuntimeError: out of memory, say"):
            c.chat.completions.create(model="policy", messages=QUESTION)
        ep.engine.texts.append("Telumas.")
        assert c.chat.completions.create(model="policy", messages=QUESTION).choices[0].message.content == "Telumas."


def test_the_endpoint_stops_and_frees_its_port(policy):
    model, tokenizer = policy
    ep = Endpoint(ScriptedEngine(tokenizer, []), tokenizer).start()
    url = ep.base_url
    assert url.startswith("http://127.0.0.1:")
    ep.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", timeout=5)
