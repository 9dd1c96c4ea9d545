"""`stream: true` on /v1/responses: the Responses event stream the Agents SDK's `Runner.run_streamed` and
the `openai` package's `responses.stream` helper read, cut from the finished call (recorded the same)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.agents.test_endpoint import client, policy  # noqa: F401  (policy: the module's fixture)
from tests.agents.test_endpoint_responses import ASK, INSTRUCTIONS, SDK_TOOLS, TEXT_AND_CALL, _serve

pytestmark = pytest.mark.usefixtures("one_thread")

KW = {"model": "policy", "instructions": INSTRUCTIONS, "input": [{"role": "user", "content": ASK}],
      "tools": SDK_TOOLS, "include": []}


def test_a_streamed_response_is_the_plain_one_as_events_and_recorded_the_same(policy):
    _, tokenizer = policy
    _, ep = _serve(tokenizer, [TEXT_AND_CALL, TEXT_AND_CALL])
    with ep:
        session = ep.open_session()
        c = client(ep, session)
        plain = c.responses.create(**KW)
        events = list(c.responses.create(stream=True, **KW))
        r_plain, r_stream = ep.recorder.take(session)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert types.count("response.output_item.added") == types.count("response.output_item.done") == 2
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert text == plain.output[0].content[0].text == "Let me look."
    assert json.loads(args) == json.loads(plain.output[1].arguments) == {"query": "Karivo"}
    final = events[-1].response
    assert [(o.type, getattr(o, "name", None)) for o in final.output] == \
        [("message", None), ("function_call", "search")]
    assert final.usage.model_dump() == plain.usage.model_dump() and final.status == "completed"
    assert (r_stream.prompt_ids, r_stream.completion_ids, r_stream.completion_logprobs) == \
        (r_plain.prompt_ids, r_plain.completion_ids, r_plain.completion_logprobs)


def test_the_stream_helper_assembles_the_final_response(policy):
    _, tokenizer = policy
    _, ep = _serve(tokenizer, [TEXT_AND_CALL])
    with ep:
        with client(ep, ep.open_session()).responses.stream(**KW) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
    assert deltas == ["Let me look."] and final.output_text == "Let me look."
    call = final.output[1]
    assert call.type == "function_call" and call.name == "search" and json.loads(call.arguments) == {"query": "Karivo"}


def test_the_wire_is_named_server_sent_events(policy):
    _, tokenizer = policy
    _, ep = _serve(tokenizer, ["Telumas."])
    with ep:
        resp = httpx.post(f"{ep.base_url}/responses", json={"model": "policy", "input": ASK, "stream": True},
                          headers={"Authorization": f"Bearer {ep.open_session()}"}, timeout=60)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    events = [e for e in resp.text.split("\n\n") if e]
    for e in events:
        head, data = e.split("\n", 1)
        assert head[len("event: "):] == json.loads(data[len("data: "):])["type"]
    assert json.loads(events[-1].split("\n", 1)[1][6:])["response"]["output"][0]["content"][0]["text"] == "Telumas."
