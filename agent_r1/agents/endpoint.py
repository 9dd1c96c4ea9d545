"""An OpenAI-compatible chat endpoint over the policy, recording every call token for token.

An agent written against the OpenAI API (the `openai` SDK, LangGraph, the Agents SDK) is pointed at
`endpoint.base_url` with its session key as the API key; unchanged, it then samples from the policy:

    with Endpoint(engine, tokenizer, EndpointConfig(temperature=1.0)) as ep:
        session = ep.open_session()
        client = openai.OpenAI(base_url=ep.base_url, api_key=session)
        client.chat.completions.create(model="policy", messages=[...], tools=[...])
        calls = ep.recorder.take(session)      # CallRecords: exact prompt/completion ids, log-probs

What is honoured from a request and what the run decides:
- honoured: `messages` (tool messages, assistant `tool_calls`), `tools` (with `tool_choice: "none"`
  they stay in the prompt and a call comes back as text), `max_tokens` / `max_completion_tokens`
  (capped by the run's `max_tokens` and by `max_total_tokens` - prompt length), `stop` strings (left
  out of the content and of the record alike), `logprobs` (the sampled tokens' log-probs, no
  alternatives), `stream` (the finished call sent as Server-Sent Events: streaming.py); `model` must
  be the served name;
- the run's: temperature, top-p, top-k (the request's are ignored: the trainer recomputes log-probs at
  the run's temperature, so only tokens sampled at it are trainable), and the seed: a session opened
  with one (`open_session(seed=...)`) seeds its k-th call with (seed, k), whatever it is batched with;
- refused with a 400 naming the field: `n` > 1, non-text content parts, a prompt longer
  than the run allows, and every field or value listed as refused in fields.py (tool_choice required
  or named, response_format json, legacy functions, ...) or not listed there at all.
`POST /v1/responses` takes the Responses API subset the OpenAI Agents SDK sends (responses_api.py,
responses_fields.py; streamed: responses_stream.py) and runs it as the chat call of the same
conversation: the same record.
The session is the bearer token, so an unmodified client carries it; an unknown one is a 401.

Calls that arrive together are generated as one batch (batcher.py): many agents running at once
decode together, as the built-in rollout's trajectories do.

Any local process can connect, key or no key, so what it can hold is bounded (the `EndpointConfig`
bounds): open connections and the time to send a request head (bounded_http.py), a body's size and
read time, and JSON the later steps could not handle, refused before tokenising (request_body.py).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from agent_r1.agents.batcher import Batcher
from agent_r1.agents.protocol import (ChatRequest, RequestError, error_body, parse_completion, parse_request,
                                     renders_tool_calls)
from agent_r1.agents.records import CallRecord, Recorder, SessionError
from agent_r1.agents.replies import reply_key
from agent_r1.agents.request_body import BodyError, parse_json, read_body
from agent_r1.agents.responses_api import to_chat_body, to_response
from agent_r1.agents.responses_stream import response_events, sse_events
from agent_r1.agents.streaming import chat_chunks, sse_lines
from agent_r1.agents.token_bytes import token_bytes
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationEngine, GenerationOutput, SamplingParams
from agent_r1.rollout.loop import _eos_ids
from agent_r1.sampling import CALL_SEED_STRIDE, RolloutConfig, check_trainable_sampling, mix_seed

log = logging.getLogger(__name__)


@dataclass
class EndpointConfig:
    host: str = "127.0.0.1"  # loopback only: the endpoint has no authentication beyond session keys
    port: int = 0  # 0 = a free port chosen by the system
    model_name: str = "policy"  # what GET /v1/models lists; the one model name a request may give
    temperature: float = 1.0  # the run's rollout.temperature: every call samples at it
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256  # per call: the default and the cap of a request's max_tokens
    max_total_tokens: int = 4096  # prompt + completion of one call
    start_timeout_s: float = 30.0
    batch_wait_s: float = 0.05  # how long a batch waits for the next call to join it (batcher.py)
    max_batch: int = 256  # calls per engine call (the built-in rollout batches a whole iteration's)
    # bounds on what a caller may make the endpoint hold (request_body.py)
    max_body_bytes: int = 8 * 2**20  # a larger body is a 413, refused before it is read or tokenised
    body_timeout_s: float = 60.0  # a body not read within it is a 408
    max_json_depth: int = 64  # deeper JSON is a 400 (tool schemas nest a few levels, never dozens)
    # bounds on what any local process may hold open, key or no key (bounded_http.py)
    max_connections: int = 256  # one more closes the connection idle longest; agents hold ~1 each
    head_timeout_s: float = 10.0  # a connection with no complete request head within it is closed
    keep_alive_s: float = 5.0  # an idle keep-alive connection is closed after it (uvicorn's timer)
    max_head_bytes: int = 16 * 2**10  # a larger request line + headers is a 400 (h11's limit)

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature={self.temperature} must be >= 0")
        if self.max_tokens < 1 or self.max_total_tokens < 2:
            raise ValueError(f"max_tokens={self.max_tokens} / max_total_tokens={self.max_total_tokens} too small")
        bounds = {k: getattr(self, k) for k in ("max_body_bytes", "body_timeout_s", "max_json_depth", "max_connections",
                                                "head_timeout_s", "keep_alive_s", "max_head_bytes")}
        bad = {k: v for k, v in bounds.items() if not (isinstance(v, (int, float)) and v > 0)}  # NaN fails too
        if bad:
            raise ValueError(f"EndpointConfig bounds must be positive numbers: {bad}")

    @classmethod
    def from_rollout(cls, rollout: RolloutConfig, **over: Any) -> "EndpointConfig":
        """The endpoint of a training run: the run's `rollout:` sampling (checked trainable: the full
        distribution at its temperature) and budgets (a call is one turn of `max_tokens_per_turn`)."""
        check_trainable_sampling(rollout)
        return cls(**{"temperature": rollout.temperature, "top_p": rollout.top_p, "top_k": rollout.top_k,
                      "max_tokens": rollout.max_tokens_per_turn, "max_total_tokens": rollout.max_total_tokens,
                      **over})


class Endpoint:
    """The server and its recorder. `start()`/`stop()`, or use it as a context manager."""

    def __init__(self, engine: GenerationEngine, tokenizer: Any, config: EndpointConfig | None = None):
        self.engine, self.config = engine, config or EndpointConfig()
        self.codec = ChatCodec(tokenizer)
        self.recorder = Recorder()
        self.stop_ids = tuple(dict.fromkeys(_eos_ids(engine, self.codec)))
        self.renders_tool_calls = renders_tool_calls(tokenizer)  # said once when a history needs it
        self._said_tool_calls = False
        self.batcher: Batcher | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.app = self._build_app()

    # --- sessions -----------------------------------------------------------------------
    def open_session(self, seed: int | None = None) -> str:
        """A new session key (the agent's API key); calls under it are recorded until it is closed. With
        `seed`, its k-th call samples with its own seed from (seed, k): an agent that makes its calls one
        after another gets the same tokens again (calls it makes at once are numbered as they arrive)."""
        key = f"sess-{uuid.uuid4().hex}"
        self.recorder.open(key, seed=seed)  # the recorder counts the session's calls with its records
        return key

    def close_session(self, key: str) -> list[CallRecord]:
        if self.batcher is not None:
            self.batcher.forget(key)  # its kept prefix (batcher.py)
        return self.recorder.close(key)

    def _call_seed(self, session: str) -> int | None:
        drawn = self.recorder.next_call(session)  # (seed, k), or None: unseeded
        return None if drawn is None else mix_seed(*drawn, CALL_SEED_STRIDE)

    # --- server -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._sock is None:
            raise RuntimeError("the endpoint is not started")
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "Endpoint":
        import uvicorn

        from agent_r1.agents.bounded_http import bounded_protocol  # imports uvicorn

        if self._thread is not None:
            raise RuntimeError("the endpoint is already started")
        # the socket is bound here, so the port is known (and taken) before the server thread runs
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.host, self.config.port))
        self._sock = sock
        cfg = self.config
        params = SamplingParams(temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p,
                                stop_token_ids=self.stop_ids)
        self.batcher = Batcher(self.engine, params, wait_s=cfg.batch_wait_s, max_batch=cfg.max_batch)
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="off", access_log=False, ws="none",
            http=bounded_protocol(cfg.max_connections, cfg.head_timeout_s),  # h11, whatever else is installed
            h11_max_incomplete_event_size=cfg.max_head_bytes,
            timeout_keep_alive=cfg.keep_alive_s,  # type: ignore[arg-type]  (a float: a call_later delay)
            # the protocol keeps connections at max_connections; what this bounds is request tasks,
            # those whose caller hung up while generating included (503 above it)
            limit_concurrency=2 * cfg.max_connections)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="agent-r1-endpoint", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.config.start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the endpoint did not start within {self.config.start_timeout_s}s")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=self.config.start_timeout_s)
        if self._sock is not None:
            self._sock.close()
        if self.batcher is not None:
            self.batcher.close()
        self._server = self._thread = self._sock = self.batcher = None

    def __enter__(self) -> "Endpoint":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- the work of one call -------------------------------------------------------------
    def _batcher(self) -> Batcher:
        if self.batcher is None:
            raise RuntimeError("the endpoint is not started")
        return self.batcher

    def _prepare(self, session: str, body: Any) -> tuple[ChatRequest, list[int], int, int | None]:
        """(request, prompt ids, completion budget, the call's seed); rendering costs milliseconds, so it
        runs in a thread."""
        if not self.recorder.known(session):
            raise SessionError(session)
        req = parse_request(body, self.config.model_name)
        # a reply the session was given, sent back unchanged, is written as sampled (replies.py)
        sampled = self.recorder.sampled(session, req.messages)
        if not self.renders_tool_calls and not self._said_tool_calls and any(
                m.get("tool_calls") for i, m in enumerate(req.messages) if i not in sampled):
            self._said_tool_calls = True
            log.warning("the policy's chat template drops an assistant message's tool_calls: calls sent back "
                        "other than as the endpoint returned them are missing from the re-rendered history, so "
                        "such a round trip starts a new step (agent/drift); use a template that renders them "
                        "(model.chat_template: qwen2.5-brief or qwen2.5 for a local model)")
        prompt = self.codec.prompt_ids(req.messages, tools=req.tools, sampled=sampled)
        cfg = self.config
        room = cfg.max_total_tokens - len(prompt)
        if room < 1:
            raise RequestError(f"the rendered prompt has {len(prompt)} tokens; the run allows "
                               f"{cfg.max_total_tokens} per call (prompt + completion)", "messages")
        return req, prompt, min(req.max_tokens or cfg.max_tokens, cfg.max_tokens, room), self._call_seed(session)

    def _answer(self, session: str, req: ChatRequest, prompt: list[int], out: GenerationOutput) -> dict[str, Any]:
        """Records the call and writes the OpenAI response."""
        cfg = self.config
        ids, logprobs = list(out.token_ids), list(out.logprobs)
        text_ids = ids[:-1] if ids and ids[-1] in self.stop_ids else ids  # the end-of-turn token is no content
        text = self.codec.decode(text_ids)
        if out.finish_reason == "stop" and out.stop in req.stop and out.stop in text:
            # OpenAI leaves the stop string out; so does the record, or the trained completion would hold
            # tokens the agent never saw (and its next prompt, holding the reply, would not extend it)
            keep = self._tokens_within(text_ids, text[: text.find(out.stop)])
            ids = text_ids = text_ids[:keep]
            logprobs = logprobs[:keep]
            text = self.codec.decode(text_ids)
        content, calls = parse_completion(text) if req.tools and req.tool_choice != "none" else (text, [])
        finish = "length" if out.finish_reason == "length" else ("tool_calls" if calls else "stop")
        self.recorder.add(session, CallRecord(
            prompt_ids=list(prompt), completion_ids=ids, completion_logprobs=logprobs,
            finish_reason=finish, messages=len(req.messages), temperature=cfg.temperature,
            info={"tool_calls": [c["function"]["name"] for c in calls], "ignored": req.ignored}),
            reply=reply_key(content, calls))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": cfg.model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": self._logprobs(text_ids, logprobs) if req.logprobs else None}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids),
                      "total_tokens": len(prompt) + len(ids)},
        }

    def _tokens_within(self, ids: list[int], content: str) -> int:
        """How many of `ids` decode to a prefix of `content`: the tokens before a stop string. A token
        the stop string begins inside is left out with the stop string, so what is returned is exactly
        what is recorded (the content then ends at that token's start)."""
        for k in range(len(ids), 0, -1):  # the stop is near the end: few decodes
            if content.startswith(self.codec.decode(ids[:k])):
                return k
        return 0

    def _logprobs(self, ids: list[int], logprobs: list[float]) -> dict[str, Any]:
        """OpenAI's `choices[0].logprobs` for the reply's tokens as sampled (a tool call's text included,
        the end-of-turn token left out): each one's text, log-prob (under the run's sampling
        distribution, as recorded) and own bytes (token_bytes.py; the text is those bytes decoded, a piece of
        a character as U+FFFD); no alternatives."""
        tok = self.codec.tokenizer
        special = set(getattr(tok, "all_special_ids", ())) | set(getattr(tok, "added_tokens_decoder", {}))
        raw = [token_bytes(tok, i, i in special) for i in ids]
        return {"content": [{"token": b.decode("utf-8", errors="replace"), "logprob": float(lp), "bytes": list(b), "top_logprobs": []}
                            for b, lp in zip(raw, logprobs)], "refusal": None}

    def _build_app(self) -> Any:
        from fastapi import FastAPI
        from fastapi.responses import JSONResponse, StreamingResponse
        from starlette.concurrency import run_in_threadpool

        app = FastAPI(title="agent-r1 policy endpoint", docs_url=None, redoc_url=None, openapi_url=None)

        # plain Starlette routes (handed the request as it is): FastAPI's parameter injection would read
        # these functions' string annotations (`from __future__ import annotations`) as query fields
        def session_of(request: Any) -> str | None:
            auth = request.headers.get("authorization", "")
            return auth[7:].strip() if auth.lower().startswith("bearer ") else None

        def unauthorized(session: str | None) -> JSONResponse:
            why = ("no session key: pass it as the API key (Authorization: Bearer <session>)" if not session
                   else f"unknown session key {session[:40]!r}: open one with Endpoint.open_session() "
                        "(closed sessions are not reopened)")
            return JSONResponse(error_body(why, "invalid_request_error", code="invalid_api_key"), status_code=401)

        async def models(request: Any) -> Any:
            if not self.recorder.known(session_of(request) or ""):
                return unauthorized(session_of(request))
            return JSONResponse({"object": "list", "data": [{"id": self.config.model_name, "object": "model",
                                                             "created": 0, "owned_by": "agent-r1"}]})

        async def answer(request: Any, write: Any) -> Any:
            """Authenticates, reads the body and runs one call; `write(session, body)` is the API's own
            part (an async function returning the HTTP response), errors answered in OpenAI's shape."""
            session = session_of(request)
            if not session or not self.recorder.known(session):
                return unauthorized(session)
            cfg = self.config
            try:  # bounded and checked here, before anything is rendered or tokenised
                body = parse_json(await read_body(request, cfg.max_body_bytes, cfg.body_timeout_s),
                                  cfg.max_json_depth)
            except BodyError as exc:
                return JSONResponse(error_body(str(exc), "invalid_request_error"), status_code=exc.status)
            try:
                return await write(session, body)
            except RequestError as exc:
                return JSONResponse(error_body(str(exc), "invalid_request_error", exc.param), status_code=400)
            except SessionError:  # closed while generating
                return unauthorized(session)
            except Exception as exc:  # noqa: BLE001  (the agent gets the reason; the server keeps serving)
                log.exception("chat completion failed")
                return JSONResponse(error_body(f"generation failed: {type(exc).__name__}: {exc}", "server_error"),
                                    status_code=500)

        async def completion(session: str, body: Any) -> tuple[ChatRequest, dict[str, Any]]:
            # rendering runs in a worker thread, so the server keeps answering
            req, prompt, budget, seed = await run_in_threadpool(self._prepare, session, body)
            # awaited, not waited for in a thread: a hundred agents waiting on one batch hold no
            # threads (the server's thread pool would otherwise cap the batch at its size)
            out = await asyncio.wrap_future(self._batcher().submit(prompt, budget, req.stop, seed, session))
            return req, self._answer(session, req, prompt, out)

        async def write_chat(session: str, body: Any) -> Any:
            req, done = await completion(session, body)
            if req.stream:  # generated whole, then sent as the chunks a streamed call reads (streaming.py)
                return StreamingResponse(sse_lines(chat_chunks(done, req.include_usage)),
                                         media_type="text/event-stream")
            return JSONResponse(done)

        async def write_response(session: str, body: Any) -> Any:
            chat_body = to_chat_body(body)  # the same call on the chat path: rendered and recorded as one
            try:
                _, done = await completion(session, chat_body)
            except RequestError as exc:  # what the chat path names `messages` is the Responses `input`
                raise RequestError(str(exc), "input" if (exc.param or "").startswith("messages") else exc.param)
            final = to_response(done, body, self.config.temperature, self.config.top_p)
            if body.get("stream"):  # generated whole, then sent as the Responses events (responses_stream.py)
                return StreamingResponse(sse_events(response_events(final)), media_type="text/event-stream")
            return JSONResponse(final)

        async def chat(request: Any) -> Any:
            return await answer(request, write_chat)

        async def responses(request: Any) -> Any:
            return await answer(request, write_response)

        app.add_route("/v1/models", models, methods=["GET"])
        app.add_route("/v1/chat/completions", chat, methods=["POST"])
        app.add_route("/v1/responses", responses, methods=["POST"])
        return app
