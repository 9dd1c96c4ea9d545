"""A local HTTP search service for the benchmark's endpoint agent (qa_search_agent.py): the run's own
search tool over the run's index, so the agent's tool results are the built-in env's, token for token.

    GET  /tools  -> {"tools": [the env's tool schemas]}
    POST /call   {"name", "arguments"} -> {"text": the tool's result, cut as the rollout cuts it}

The tool runs through the env's ToolRunner (the same validation, errors and search text), then the text
is cut to `rollout.max_observation_tokens` tokens of the policy's tokenizer, as the rollout cuts one
result (rollout/chat.py observation_ids: Qwen2.5's template wraps tool messages itself, so the content
has the whole budget). Standard library HTTP on loopback, one call at a time (a search takes
milliseconds; the built-in env batches a turn's searches into one call, which is part of what the
endpoint's overhead measures).
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent_r1.tools.runner import ToolCall

URL_ENV = "QA_SEARCH_URL"
TURNS_ENV = "QA_AGENT_MAX_TURNS"


class _Server(ThreadingHTTPServer):
    # every agent session of an iteration (up to env.agent_concurrency, 256 in the endpoint row) connects at
    # once; with socketserver's listen queue of 5, 40 of 256 sessions timed out here and 2 of 128 in a run
    # failed on connection resets (tests/agents/test_search_service.py)
    request_queue_size = 1024


class SearchService:
    """`with SearchService(env, codec, max_tokens, max_turns):` serves `env`'s tools and sets the agent's
    environment variables (put back on exit)."""

    def __init__(self, env: Any, codec: Any, max_tokens: int, max_turns: int):
        self.env, self.codec, self.max_tokens, self.max_turns = env, codec, max_tokens, max_turns
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._saved: dict[str, str | None] = {}

    def call(self, name: str, arguments: Any) -> str:
        with self._lock:
            (result,) = self.env.runner.run([ToolCall(str(name), arguments if isinstance(arguments, dict) else {})])
        ids = self.codec.encode_data(result.text)
        return result.text if len(ids) <= self.max_tokens else self.codec.decode(ids[:self.max_tokens])

    def __enter__(self) -> "SearchService":
        service = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802  (http.server's names)
                self._reply({"tools": service.env.tool_schemas})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                self._reply({"text": service.call(body.get("name", ""), body.get("arguments", {}))})

            def log_message(self, *args: Any) -> None:  # quiet: thousands of calls per iteration
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="search-service", daemon=True).start()
        host, port = self._server.server_address[:2]
        for key, value in ((URL_ENV, f"http://{host}:{port}"), (TURNS_ENV, str(self.max_turns))):
            self._saved[key] = os.environ.get(key)
            os.environ[key] = value
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
