"""POST /v1/responses, called with the `openai` package as the OpenAI Agents SDK calls it: instructions,
input items, Responses-style function tools (strict, as the SDK sends them), the reply's output items fed
back as the next input. The call is the chat path's: the same prompt ids, the same record, one trajectory."""

from __future__ import annotations

import json

import openai
import pytest

from agent_r1.agents.assemble import build_trajectories
from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from tests.agents.test_endpoint import (  # noqa: F401  (policy: the module's fixture)
    CALL_TEXT, QUESTION, TEMPERATURE, TOOLS, ScriptedEngine, client, policy)

pytestmark = pytest.mark.usefixtures("one_thread")

SDK_TOOLS = [{"type": "function", "name": "search", "description": "Search the encyclopedia.", "strict": True,
              "parameters": {**TOOLS[0]["function"]["parameters"], "additionalProperties": False}}]
CHAT_TOOLS = [{"type": "function", "function": {k: v for k, v in SDK_TOOLS[0].items() if k not in ("type", "strict")}}]
INSTRUCTIONS, ASK = QUESTION[0]["content"], QUESTION[1]["content"]
RESULT = "Karivo was born in Telumas."
TEXT_AND_CALL = "Let me look.\n" + CALL_TEXT


class BudgetEngine(ScriptedEngine):
    """ScriptedEngine that stops at each prompt's token budget, as an engine does."""

    def generate(self, prompts, params):
        outs = super().generate(prompts, params)
        for out, budget in zip(outs, params.max_new_tokens):
            if len(out.token_ids) > budget:
                out.token_ids, out.logprobs, out.finish_reason = out.token_ids[:budget], out.logprobs[:budget], "length"
        return outs


def _serve(tokenizer, texts):
    engine = BudgetEngine(tokenizer, texts)
    return engine, Endpoint(engine, tokenizer, EndpointConfig(temperature=TEMPERATURE, max_tokens=80))


def _sdk_turns(c):
    """Two turns as the Agents SDK runs them: the reply's output items go back as input, dumped as the
    SDK dumps them (`model_dump(exclude_unset=True)`), followed by the tool's output."""
    first = c.responses.create(model="policy", instructions=INSTRUCTIONS, input=[{"role": "user", "content": ASK}],
                               tools=SDK_TOOLS, include=[])
    calls = [o for o in first.output if o.type == "function_call"]
    items = [{"role": "user", "content": ASK}] + [o.model_dump(exclude_unset=True) for o in first.output]
    items += [{"type": "function_call_output", "call_id": k.call_id, "output": RESULT} for k in calls]
    second = c.responses.create(model="policy", instructions=INSTRUCTIONS, input=items, tools=SDK_TOOLS, include=[])
    return first, second


def _chat_turns(c):
    """The same two turns through chat completions."""
    first = c.chat.completions.create(model="policy", messages=QUESTION, tools=CHAT_TOOLS)
    msg = first.choices[0].message
    history = QUESTION + [msg.model_dump(exclude_none=True)]
    history += [{"role": "tool", "tool_call_id": k.id, "content": RESULT} for k in msg.tool_calls]
    return first, c.chat.completions.create(model="policy", messages=history, tools=CHAT_TOOLS)


def test_an_agents_sdk_round_trip_is_the_chat_paths_call_and_one_trajectory(policy):
    _, tokenizer = policy
    engine, ep = _serve(tokenizer, [TEXT_AND_CALL, "Telumas.", TEXT_AND_CALL, "Telumas."])
    with ep:
        s_resp, s_chat = ep.open_session(), ep.open_session()
        first, second = _sdk_turns(client(ep, s_resp))
        _chat_turns(client(ep, s_chat))
        resp_records, chat_records = ep.recorder.take(s_resp), ep.recorder.take(s_chat)
    assert first.object == "response" and first.status == "completed"
    assert [o.type for o in first.output] == ["message", "function_call"]
    assert first.output[0].content[0].type == "output_text" and first.output[0].content[0].text == "Let me look."
    call = first.output[1]
    assert call.name == "search" and json.loads(call.arguments) == {"query": "Karivo"} and call.call_id
    assert second.output_text == "Telumas." and [o.type for o in second.output] == ["message"]
    assert first.usage.input_tokens == len(resp_records[0].prompt_ids)
    assert first.usage.output_tokens == len(resp_records[0].completion_ids)
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    # the Responses call is rendered and recorded exactly as the chat call of the same conversation
    for r, c in zip(resp_records, chat_records, strict=True):
        assert (r.prompt_ids, r.completion_ids, r.completion_logprobs, r.finish_reason) == \
            (c.prompt_ids, c.completion_ids, c.completion_logprobs, c.finish_reason)
    steps, stats = build_trajectories(resp_records, "q0", decode=tokenizer.decode)
    assert stats.drift == 0 and len(steps) == 1 and len(steps[0].turns) == 2
    assert RESULT in steps[0].turns[0].observation_text  # the tool's output is the masked observation


def test_a_string_input_calls_only_and_a_cut_reply(policy):
    _, tokenizer = policy
    engine, ep = _serve(tokenizer, [CALL_TEXT, "Telumas is a town far to the north of the river"])
    with ep:
        c = client(ep, ep.open_session())
        calls_only = c.responses.create(model="policy", input=ASK, tools=SDK_TOOLS)
        cut = c.responses.create(model="policy", input=ASK, max_output_tokens=3, temperature=0.2)
    assert engine.codec.decode(engine.prompts[0]).count("<|im_start|>user\n" + ASK) == 1
    assert [o.type for o in calls_only.output] == ["function_call"] and calls_only.output_text == ""
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert cut.usage.output_tokens == 3 and cut.temperature == TEMPERATURE  # the run's temperature, not 0.2


@pytest.mark.parametrize("field, value, param", [
    ("stream", "yes", "stream"),
    ("stream_options", {"include_usage": True}, "stream_options"),
    ("previous_response_id", "resp_abc", "previous_response_id"),
    ("include", ["reasoning.encrypted_content"], "include"),
    ("tool_choice", "required", "tool_choice"),
    ("tools", [{"type": "web_search"}], "tools[0]"),
    ("input", [{"type": "reasoning", "summary": []}], "input[0].type"),
    ("input", [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}], "input[0].content[0]"),
    ("text", {"format": {"type": "json_object"}}, "text"),
    ("no_such_field", 1, "no_such_field"),
])
def test_what_the_endpoint_cannot_honour_is_a_400_naming_the_field(policy, field, value, param):
    _, tokenizer = policy
    _, ep = _serve(tokenizer, [])
    with ep:
        session = ep.open_session()
        body = {"model": "policy", "input": ASK, field: value}
        with pytest.raises(openai.BadRequestError) as err:
            client(ep, session).post("/responses", cast_to=object, body=body)
        assert not ep.recorder.take(session)  # nothing sampled, nothing recorded
    assert err.value.body["param"] == param, err.value.body
