"""`stream=true` on /v1/chat/completions: the `openai` package reads the Server-Sent Events back into the
message the unstreamed call returns, and the call is recorded exactly as the unstreamed one is."""

from __future__ import annotations

import json

import httpx
import pytest

from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from tests.agents.test_endpoint import (  # noqa: F401  (policy: the module's fixture)
    CALL_TEXT, QUESTION, TEMPERATURE, TOOLS, ScriptedEngine, client, policy)

pytestmark = pytest.mark.usefixtures("one_thread")

TWO_CALLS = CALL_TEXT + "\n" + CALL_TEXT.replace("Karivo", "Telumas")


def _serve(tokenizer, texts):
    engine = ScriptedEngine(tokenizer, texts)
    return engine, Endpoint(engine, tokenizer, EndpointConfig(temperature=TEMPERATURE, max_tokens=80))


def _plain_and_streamed(tokenizer, text, **kw):
    """The same reply asked for once plainly and once streamed: (plain, chunks, their records)."""
    _, ep = _serve(tokenizer, [text, text])
    with ep:
        session = ep.open_session()
        c = client(ep, session)
        plain = c.chat.completions.create(model="policy", messages=QUESTION, **kw)
        chunks = list(c.chat.completions.create(model="policy", messages=QUESTION, stream=True, **kw))
        records = ep.recorder.take(session)
    return plain, chunks, records


def test_a_streamed_answer_adds_up_to_the_plain_one_and_is_recorded_the_same(policy):
    _, tokenizer = policy
    plain, chunks, (r_plain, r_stream) = _plain_and_streamed(tokenizer, "Telumas.", logprobs=True)
    assert all(c.object == "chat.completion.chunk" and len(c.choices) == 1 for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == plain.choices[0].message.content == "Telumas."
    assert [c.choices[0].finish_reason for c in chunks] == [None] * (len(chunks) - 1) + ["stop"]
    streamed_lp = [t for c in chunks if c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert [t.logprob for t in streamed_lp] == [t.logprob for t in plain.choices[0].logprobs.content]
    assert (r_stream.prompt_ids, r_stream.completion_ids, r_stream.completion_logprobs, r_stream.finish_reason) == \
        (r_plain.prompt_ids, r_plain.completion_ids, r_plain.completion_logprobs, r_plain.finish_reason)


def test_streamed_tool_calls_come_as_indexed_deltas_the_stream_helper_assembles(policy):
    _, tokenizer = policy
    plain, chunks, (r_plain, r_stream) = _plain_and_streamed(tokenizer, TWO_CALLS, tools=TOOLS)
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert sorted({tc.index for tc in calls}) == [0, 1]
    heads = [tc for tc in calls if tc.id]  # each call opens with its id and name, arguments follow
    assert [(h.index, h.function.name) for h in heads] == [(0, "search"), (1, "search")]
    args = ["".join(tc.function.arguments or "" for tc in calls if tc.index == i) for i in (0, 1)]
    plain_calls = plain.choices[0].message.tool_calls
    assert [json.loads(a) for a in args] == [json.loads(t.function.arguments) for t in plain_calls]
    assert [json.loads(a)["query"] for a in args] == ["Karivo", "Telumas"]
    assert chunks[-1].choices[0].finish_reason == "tool_calls" == plain.choices[0].finish_reason
    assert r_stream.completion_ids == r_plain.completion_ids and r_stream.info == r_plain.info
    # the package's own accumulator (chat.completions.stream) reads the same message back
    _, ep = _serve(tokenizer, [TWO_CALLS])
    with ep:
        with client(ep, ep.open_session()).chat.completions.stream(model="policy", messages=QUESTION,
                                                                   tools=TOOLS) as stream:
            final = stream.get_final_completion()
    message = final.choices[0].message
    assert [(t.function.name, json.loads(t.function.arguments)) for t in message.tool_calls] == \
        [(t.function.name, json.loads(t.function.arguments)) for t in plain.choices[0].message.tool_calls]
    assert final.choices[0].finish_reason == "tool_calls" and message.content is None


def test_include_usage_adds_a_last_chunk_without_choices(policy):
    _, tokenizer = policy
    plain, chunks, _ = _plain_and_streamed(tokenizer, "Telumas.", stream_options={"include_usage": True})
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == plain.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])
    _, without, _ = _plain_and_streamed(tokenizer, "Telumas.")
    assert all(c.usage is None and c.choices for c in without)


def test_the_wire_is_server_sent_events_ending_in_done_and_errors_stay_json(policy):
    _, tokenizer = policy
    _, ep = _serve(tokenizer, ["Telumas."])
    with ep:
        headers = {"Authorization": f"Bearer {ep.open_session()}"}
        body = {"model": "policy", "messages": QUESTION, "stream": True}
        resp = httpx.post(f"{ep.base_url}/chat/completions", json=body, headers=headers, timeout=60)
        bad = httpx.post(f"{ep.base_url}/chat/completions", json={**body, "stream_options": {"x": 1}},
                         headers=headers, timeout=60)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    events = [e for e in resp.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    assert [json.loads(e[6:])["object"] for e in events[:-1]] == ["chat.completion.chunk"] * (len(events) - 1)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "stream_options"


def test_a_streamed_reply_of_calls_only_keeps_content_none_with_its_logprobs(policy):
    _, tokenizer = policy
    plain, chunks, _ = _plain_and_streamed(tokenizer, CALL_TEXT, tools=TOOLS, logprobs=True)
    assert plain.choices[0].message.content is None
    assert all(c.choices[0].delta.content is None for c in chunks)  # no empty content delta to add up
    streamed_lp = [t.logprob for c in chunks if c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert streamed_lp == [t.logprob for t in plain.choices[0].logprobs.content] and streamed_lp
