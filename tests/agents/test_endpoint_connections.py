"""The endpoint bounds what other local processes can hold open: connections and time.

A real endpoint on 127.0.0.1 and real sockets. What the server still holds is read from the kernel
(/proc/net/tcp: the endpoint's established connections), not from the server's own bookkeeping.
"""

from __future__ import annotations

import copy
import json
import select
import socket
from contextlib import contextmanager
from urllib.parse import urlparse

import openai
import pytest

from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from tests.agents.test_openai_agent import AnswerEngine

QUESTION = [{"role": "user", "content": "Where was Karivo born?"}]
WAIT_S = 20  # how long a socket waits to be closed: a bound on a hung test, not a timing claim


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    tokenizer = copy.deepcopy(tiny_model[1])
    tokenizer.chat_template = QWEN25_TEMPLATE
    return tokenizer


@contextmanager
def endpoint(tokenizer, **bounds):
    with Endpoint(AnswerEngine(tokenizer), tokenizer, EndpointConfig(max_tokens=8, max_total_tokens=400,
                                                                      **bounds)) as ep:
        yield ep


@contextmanager
def sockets(ep, n):
    url = urlparse(ep.base_url)
    opened = []
    try:
        for _ in range(n):
            opened.append(socket.create_connection((url.hostname, url.port), timeout=WAIT_S))
        yield opened
    finally:
        for s in opened:
            s.close()


def ask(ep) -> str:
    client = openai.OpenAI(base_url=ep.base_url, api_key=ep.open_session(), max_retries=0, timeout=60)
    try:
        return client.chat.completions.create(model="policy", messages=QUESTION).choices[0].message.content
    finally:
        client.close()


def closed_by_server(s: socket.socket) -> bool:
    """Whether the server closed `s` (EOF or reset) within WAIT_S; False if it is still open then."""
    s.settimeout(WAIT_S)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def server_connections(ep) -> int:
    """Established TCP connections whose local end is the endpoint's port, as the kernel lists them."""
    port = urlparse(ep.base_url).port
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return sum(1 for r in rows if int(r[1].split(":")[1], 16) == port and r[3] == "01")


def server_has_read(ep, s: socket.socket) -> bool:
    """Whether the server side of `s` has read everything sent on it (its receive queue is empty): the
    server's protocol has then been handed the bytes (uvicorn reads and parses in one callback)."""
    port, peer = urlparse(ep.base_url).port, s.getsockname()[1]
    with open("/proc/net/tcp") as f:
        for r in (line.split() for line in f.readlines()[1:]):
            if int(r[1].split(":")[1], 16) == port and int(r[2].split(":")[1], 16) == peer:
                return int(r[4].split(":")[1], 16) == 0
    return False


def test_idle_sockets_beyond_the_cap_are_closed_and_a_keyed_request_still_succeeds(tokenizer):
    with endpoint(tokenizer, max_connections=8, head_timeout_s=300) as ep, sockets(ep, 200) as idle:
        # accepted in order, so every idle socket was accepted before this call's connection
        assert ask(ep) == "Telumas"
        assert server_connections(ep) <= 8  # was 200: one descriptor each in the trainer
        assert all(closed_by_server(s) for s in idle[:190])  # the oldest idle ones made room
        assert ask(ep) == "Telumas"


def test_a_connection_that_sends_no_request_head_is_closed(tokenizer):
    with endpoint(tokenizer, head_timeout_s=0.5) as ep, sockets(ep, 2) as (silent, partial):
        partial.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert closed_by_server(silent) and closed_by_server(partial)
        assert ask(ep) == "Telumas"


def test_trickling_a_request_head_does_not_extend_its_deadline(tokenizer):
    with endpoint(tokenizer, head_timeout_s=0.5) as ep, sockets(ep, 1) as (s,):
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n")
        for _ in range(WAIT_S * 10):  # one header line every 0.1 s, until the server hangs up
            try:
                s.sendall(b"X-Pad: 1\r\n")
            except OSError:  # reset: closed
                break
            if select.select([s], [], [], 0.1)[0]:
                assert closed_by_server(s)
                break
        else:
            pytest.fail(f"a trickled request head kept its connection open for {WAIT_S}s")


def test_a_body_not_sent_in_time_is_a_408(tokenizer):
    with endpoint(tokenizer, body_timeout_s=0.5) as ep, sockets(ep, 1) as (s,):
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                f"{ep.open_session()}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        s.sendall(head.encode() + b'{"model": ')  # then nothing more
        s.settimeout(WAIT_S)
        assert s.recv(4096).startswith(b"HTTP/1.1 408 ")
        assert ask(ep) == "Telumas"


@pytest.mark.parametrize("bound", ["max_connections", "head_timeout_s", "max_body_bytes", "body_timeout_s"])
def test_a_bound_that_is_not_a_positive_number_is_refused(bound):
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match=bound):
            EndpointConfig(**{bound: bad})


def test_at_the_cap_a_connection_with_a_request_in_progress_is_kept_and_the_newcomer_closed(tokenizer):
    with endpoint(tokenizer, max_connections=2, head_timeout_s=300, body_timeout_s=300) as ep, \
            sockets(ep, 2) as busy:
        payload = json.dumps({"model": "policy", "messages": QUESTION}).encode()
        for s in busy:  # a request head, its body held back: a request in progress
            s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                       f"{ep.open_session()}\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(payload)}\r\n\r\n").encode())
        for _ in range(WAIT_S * 100):
            if all(server_has_read(ep, s) for s in busy):
                break
            select.select([], [], [], 0.01)
        else:
            pytest.fail("the server did not read the request heads")
        with sockets(ep, 1) as (newcomer,):
            assert closed_by_server(newcomer)
        for s in busy:  # the requests in progress go on to their answers
            s.sendall(payload)
            s.settimeout(WAIT_S)
            assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
