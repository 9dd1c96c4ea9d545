"""Malformed and oversized request bodies are refused (400 / 413) before anything is tokenised.

A real endpoint on 127.0.0.1; the bodies are sent as raw bytes (httpx), since the `openai` client
would not write most of them. The codec's `prompt_ids` is replaced by a spy: a refused body must never
reach the tokenizer.
"""

from __future__ import annotations

import copy
import json

import httpx
import pytest

from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from tests.agents.test_openai_agent import AnswerEngine

QUESTION = [{"role": "user", "content": "Where was Karivo born?"}]


@pytest.fixture(scope="module")
def endpoint(tiny_model):
    tokenizer = copy.deepcopy(tiny_model[1])
    tokenizer.chat_template = QWEN25_TEMPLATE
    with Endpoint(AnswerEngine(tokenizer), tokenizer, EndpointConfig(max_tokens=8, max_total_tokens=400)) as ep:
        yield ep


@pytest.fixture
def spy(endpoint, monkeypatch):
    """The prompts the endpoint tokenised during the test."""
    seen = []
    real = endpoint.codec.prompt_ids

    def prompt_ids(messages, **kw):
        seen.append(messages)
        return real(messages, **kw)

    monkeypatch.setattr(endpoint.codec, "prompt_ids", prompt_ids)
    return seen


def post(ep, content: bytes, session: str, path: str = "/chat/completions") -> httpx.Response:
    return httpx.post(f"{ep.base_url}{path}", content=content, timeout=60,
                      headers={"Authorization": f"Bearer {session}", "Content-Type": "application/json"})


def body(**fields) -> bytes:
    return json.dumps({"model": "policy", "messages": QUESTION, **fields}).encode()


def test_a_well_formed_body_is_answered(endpoint, spy):
    # the baseline the refusals below are told apart from
    resp = post(endpoint, body(), endpoint.open_session())
    assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"] == "Telumas"
    assert len(spy) == 1


@pytest.mark.parametrize("where", ["content", "key"])
def test_a_lone_surrogate_is_a_400(endpoint, spy, where):
    # json.loads turns "\ud800" into a str no UTF-8 encoder (the tokenizer's included) can write
    message = '{"role": "user", "content": "a\\ud800b"}' if where == "content" else \
        '{"role": "user", "content": "ab", "\\udc00": 1}'
    raw = ('{"model": "policy", "messages": [%s]}' % message).encode()
    resp = post(endpoint, raw, endpoint.open_session())
    assert resp.status_code == 400 and "surrogate" in resp.json()["error"]["message"]
    assert spy == []


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_json_is_a_400(endpoint, spy, depth):
    nested = "[" * depth + "]" * depth
    raw = ('{"model": "policy", "messages": %s, "metadata": {"x": %s}}' % (json.dumps(QUESTION), nested)).encode()
    resp = post(endpoint, raw, endpoint.open_session())
    assert resp.status_code == 400 and "nested" in resp.json()["error"]["message"]
    assert spy == []


@pytest.mark.parametrize("field", ["n", "top_logprobs", "parallel_tool_calls", "temperature"])
def test_a_bool_where_a_number_is_expected_is_a_400(endpoint, spy, field):
    # True == 1 and False == 0 in Python: a check by equality would take n=true as n=1
    value = {"n": True, "top_logprobs": False, "parallel_tool_calls": 1, "temperature": True}[field]
    resp = post(endpoint, body(**{field: value}), endpoint.open_session())
    assert resp.status_code == 400 and resp.json()["error"]["param"] == field
    assert spy == []


def test_nan_is_not_json(endpoint, spy):
    resp = post(endpoint, b'{"model": "policy", "messages": [], "temperature": NaN}', endpoint.open_session())
    assert resp.status_code == 400 and "not valid JSON" in resp.json()["error"]["message"]
    assert spy == []


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_a_16_mb_message_is_a_413_before_tokenising(endpoint, spy, path):
    big = "Karivo " * (16 * 2**20 // 7)
    raw = (body(messages=[{"role": "user", "content": big}]) if path == "/chat/completions"
           else json.dumps({"model": "policy", "input": big}).encode())
    resp = post(endpoint, raw, endpoint.open_session(), path)
    assert resp.status_code == 413
    assert "max_body_bytes" in resp.json()["error"]["message"]
    assert spy == []


def test_an_oversized_chunked_body_is_a_413(endpoint, spy):
    # no Content-Length to refuse up front: the limit holds while the body is read
    def chunks():
        yield b'{"model": "policy", "messages": [{"role": "user", "content": "'
        for _ in range(20):
            yield b"x" * 2**20
        yield b'"}]}'

    resp = httpx.post(f"{endpoint.base_url}/chat/completions", content=chunks(), timeout=60,
                      headers={"Authorization": f"Bearer {endpoint.open_session()}"})
    assert resp.status_code == 413 and spy == []


def test_a_refused_body_records_nothing_and_the_session_keeps_serving(endpoint, spy):
    session = endpoint.open_session()
    assert post(endpoint, body(n=True), session).status_code == 400
    assert endpoint.recorder.take(session) == []
    assert post(endpoint, body(), session).status_code == 200


@pytest.mark.parametrize("field, value", [("top_logprobs", False), ("background", 0)])
def test_a_number_for_a_bool_or_a_bool_for_a_number_on_responses_is_a_400(endpoint, spy, field, value):
    raw = json.dumps({"model": "policy", "input": "Where was Karivo born?", field: value}).encode()
    resp = post(endpoint, raw, endpoint.open_session(), "/responses")
    assert resp.status_code == 400 and resp.json()["error"]["param"] == field
    assert spy == []
