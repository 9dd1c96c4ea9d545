"""Tool-call round trips through the endpoint with the Qwen2.5 tokenizer and template (a hub-style
folder built offline): a call written as the template writes it continues the trajectory, token for
token, through the real vocabulary's special tokens; so does one written with other JSON spacing than the
template's, as the reply sent back is written as sampled. A call the agent edited is rendered by the
template from its arguments, which the builder counts as drift (a new step)."""

from __future__ import annotations

import json

import openai
import pytest

from agent_r1.agents.assemble import build_trajectories
from agent_r1.agents.endpoint import Endpoint
from tests.agents.test_endpoint import CALL_TEXT, QUESTION, TOOLS, ScriptedEngine
from tests.qwen_helpers import QWEN_SPECIAL_IDS, qwen_dir  # noqa: F401  (session fixture)


@pytest.fixture(scope="module")
def qwen_tokenizer(qwen_dir):  # noqa: F811
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen_dir)


def round_trip(tokenizer, call_text, edit=lambda message: message):
    with Endpoint(ScriptedEngine(tokenizer, [call_text, "Telumas."]), tokenizer) as ep:
        session = ep.open_session()
        c = openai.OpenAI(base_url=ep.base_url, api_key=session, max_retries=0)
        first = c.chat.completions.create(model="policy", messages=QUESTION, tools=TOOLS).choices[0]
        (call,) = first.message.tool_calls
        assert json.loads(call.function.arguments) == {"query": "Karivo"}
        messages = QUESTION + [edit(first.message.model_dump(exclude_none=True)),
                               {"role": "tool", "tool_call_id": call.id, "content": "Karivo was born in Telumas."}]
        c.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        return ep.recorder.take(session)


def test_a_call_written_as_the_template_writes_it_continues_the_trajectory(qwen_tokenizer):
    records = round_trip(qwen_tokenizer, CALL_TEXT)
    assert records[0].completion_ids[0] == QWEN_SPECIAL_IDS["<tool_call>"]  # the real special token
    assert records[0].completion_ids[-1] == QWEN_SPECIAL_IDS["<|im_end|>"]
    steps, stats = build_trajectories(records, "q0")
    assert (stats.steps, stats.drift) == (1, 0) and len(steps[0].turns) == 2


COMPACT = '<tool_call>\n{"name":"search","arguments":{"query":"Karivo"}}\n</tool_call>'


def test_a_call_with_other_json_spacing_sent_back_unchanged_continues_the_trajectory(qwen_tokenizer):
    records = round_trip(qwen_tokenizer, COMPACT)
    steps, stats = build_trajectories(records, "q0")
    assert (stats.steps, stats.drift) == (1, 0) and len(steps[0].turns) == 2


def test_an_edited_call_is_drift_and_a_new_step(qwen_tokenizer):
    def edit(message):
        (call,) = message["tool_calls"]
        return {**message, "tool_calls": [{**call, "function": {**call["function"],
                                                                "arguments": '{"query": "Karivo born"}'}}]}

    records = round_trip(qwen_tokenizer, COMPACT, edit)
    steps, stats = build_trajectories(records, "q0")
    assert (stats.steps, stats.drift) == (2, 1)
    assert [len(s.turns) for s in steps] == [1, 1]
