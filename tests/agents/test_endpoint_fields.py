"""Every chat-completions field an agent sends is honoured or refused with a 400 naming it: log-probs
in OpenAI's shape, tool_choice none keeps the tools block (the prompt does not drift), and the fields
the endpoint cannot honour (tool_choice required or named, response_format json, legacy functions,
an unknown model, unknown fields) are refused instead of being dropped without a word."""

from __future__ import annotations

import copy
import logging

import openai
import pytest

from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from tests.agents.test_endpoint import (  # noqa: F401  (policy: the module's fixture)
    CALL_TEXT, QUESTION, TEMPERATURE, TOOLS, ScriptedEngine, client, policy)

pytestmark = pytest.mark.usefixtures("one_thread")


def _serve(tokenizer, texts):
    engine = ScriptedEngine(tokenizer, texts)
    return engine, Endpoint(engine, tokenizer, EndpointConfig(temperature=TEMPERATURE, max_tokens=40))


def test_logprobs_come_back_in_openais_shape_for_the_recorded_tokens(policy):
    _, tokenizer = policy
    engine, ep = _serve(tokenizer, ["Telumas."])
    with ep:
        session = ep.open_session()
        resp = client(ep, session).chat.completions.create(model="policy", messages=QUESTION, logprobs=True,
                                                           top_logprobs=0)
        record = ep.recorder.take(session)[0]
    content = resp.choices[0].logprobs.content
    ids = record.completion_ids[:-1]  # the end-of-turn token is no content
    assert [c.token for c in content] == [tokenizer.decode([i]) for i in ids]
    assert [c.logprob for c in content] == record.completion_logprobs[:-1]
    assert "".join(c.token for c in content) == resp.choices[0].message.content == "Telumas."
    assert all(bytes(c.bytes).decode() == c.token and c.top_logprobs == [] for c in content)
    with ep:
        c = client(ep, ep.open_session())
        with pytest.raises(openai.BadRequestError, match="top_logprobs") as err:
            c.chat.completions.create(model="policy", messages=QUESTION, logprobs=True, top_logprobs=3)
        assert err.value.body["param"] == "top_logprobs"


def test_tool_choice_none_keeps_the_tools_block_and_returns_text(policy):
    _, tokenizer = policy
    engine, ep = _serve(tokenizer, [CALL_TEXT, CALL_TEXT])
    with ep:
        c = client(ep, ep.open_session())
        auto = c.chat.completions.create(model="policy", messages=QUESTION, tools=TOOLS)
        none = c.chat.completions.create(model="policy", messages=QUESTION, tools=TOOLS, tool_choice="none")
    assert engine.prompts[0] == engine.prompts[1]  # the same rendering: no drift between the two calls
    assert auto.choices[0].message.tool_calls and not none.choices[0].message.tool_calls
    assert none.choices[0].message.content == CALL_TEXT and none.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("field, value", [
    ("tool_choice", "required"),
    ("tool_choice", {"type": "function", "function": {"name": "search"}}),
    ("response_format", {"type": "json_object"}),
    ("functions", [{"name": "search", "parameters": {"type": "object", "properties": {}}}]),
    ("function_call", "auto"),
    ("parallel_tool_calls", False),
    ("frobnicate", 1),
])
def test_fields_the_endpoint_cannot_honour_are_refused_by_name(policy, field, value):
    _, tokenizer = policy
    _, ep = _serve(tokenizer, ["x"])
    with ep:
        session = ep.open_session()
        with pytest.raises(openai.BadRequestError, match=field) as err:
            client(ep, session).chat.completions.create(model="policy", messages=QUESTION, tools=TOOLS,
                                                        extra_body={field: value})
        assert err.value.body["param"] == field
        assert ep.recorder.take(session) == []


def test_an_unknown_model_is_refused_and_the_served_one_named(policy):
    _, tokenizer = policy
    _, ep = _serve(tokenizer, ["x", "y"])
    with ep:
        c = client(ep, ep.open_session())
        with pytest.raises(openai.BadRequestError, match="'policy'") as err:
            c.chat.completions.create(model="gpt-4o", messages=QUESTION)
        assert err.value.body["param"] == "model"
        ok = c.chat.completions.create(model="policy", messages=QUESTION, response_format={"type": "text"},
                                       parallel_tool_calls=True, user="u1", metadata={"k": "v"})
    assert ok.model == "policy" and ok.choices[0].message.content == "x"


def test_logprob_bytes_are_each_tokens_own_bytes_even_inside_a_character(policy):
    _, tokenizer = policy
    text = "Telumas ☕ é"  # characters a small byte-level vocabulary splits across tokens
    _, ep = _serve(tokenizer, [text])
    with ep:
        resp = client(ep, ep.open_session()).chat.completions.create(model="policy", messages=QUESTION,
                                                                     logprobs=True)
    content = resp.choices[0].logprobs.content
    assert b"".join(bytes(c.bytes) for c in content) == text.encode("utf-8")
    assert resp.choices[0].message.content == text


def test_a_template_that_drops_tool_calls_is_named_when_a_history_holds_one(policy, caplog):
    from agent_r1.models.chat_template import CHATML_TEMPLATE

    _, tokenizer = policy
    chatml = copy.deepcopy(tokenizer)
    chatml.chat_template = CHATML_TEMPLATE  # renders an assistant turn's text only
    history = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"query": "Karivo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Karivo was born in Telumas."}]
    for tok, warned in ((chatml, True), (tokenizer, False)):
        caplog.clear()
        _, ep = _serve(tok, ["x"])
        with ep, caplog.at_level(logging.WARNING, logger="agent_r1.agents.endpoint"):
            client(ep, ep.open_session()).chat.completions.create(model="policy", messages=history, tools=TOOLS)
        assert ("drops an assistant message's tool_calls" in caplog.text) is warned, caplog.text
