"""Tools served by MCP servers (the official `mcp` SDK), over stdio or streamable HTTP.

    env:
      tools: [lookup]               # what the model sees: MCP tools are named here like any other
      mcp_servers:
        - {name: kb, transport: stdio, command: python, args: [kb_server.py]}
        - {name: web, transport: http, url: "http://127.0.0.1:8000/mcp", prefix: web_}

Each server is one `McpConnection`: an event loop on a thread of its own that owns the SDK's
async `Client` (its transport's tasks must be entered and left in one task), so the rollout's sync
runner calls it with `call()` from any thread. Its tools become `McpTool`s under the server's names
(plus the server's `prefix`): the model learns the names it sees, so they should not change with
a config key such as the server's label; a clash is an error at build time that `prefix` settles.

How the runner's guarantees carry over (runner.py):
- timeout: each call is sent with the SDK's read timeout (the server's `timeout_s`, at most the
  run's tool timeout), so a call the runner abandons also ends on its own; the model reads
  "timed out after Ns".
- errors: an `isError` result, a tool that raised on the server (the SDK returns it as `isError`)
  and a protocol error all become failed results whose text the model reads.
- crash: a stdio server that dies fails the call in flight ("crashed"); the next call starts the
  server again. A server that answers none of RESTART_AFTER_TIMEOUTS calls in a row (hung, or a
  reader that can no longer read it) counts as crashed too: the next call restarts it. A server that
  cannot be reached again is a dead service: ServiceUnavailableError stops the run, as a dead
  retriever does.
- isolation: `isolate = False`, since a forked worker would hold a copy of a connection whose loop
  thread did not survive the fork; the tool's code already runs outside the trainer (the server's
  own process or service), which is what a worker process buys the built-in tools.
- close: `close()` leaves the client's context, which ends a stdio server's process (the SDK stops
  its process tree), then SIGTERM -> SIGKILL by the server's pid if it still runs; connections also
  close at interpreter exit, and a stdio server dies with the trainer even on SIGKILL (mcp_stdio.py).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import sys
import threading
import weakref
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, TextIO

from agent_r1.retrieval.errors import ServiceUnavailableError
from agent_r1.tools import mcp_stdio
from agent_r1.tools.base import ToolResult


@dataclass
class McpServerConfig:
    """One MCP server of a run (`env.mcp_servers` in params.yaml)."""

    name: str = ""  # a label for messages and metrics; not part of the tools' names
    transport: str = "stdio"  # stdio (command + args + env) | http (streamable HTTP at url)
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # added to the SDK's safe default environment
    url: str = ""
    prefix: str = ""  # put before each tool's name, for two servers offering the same name
    timeout_s: float = 0.0  # per call; 0 = the run's tool timeout (search.timeout_s); never above it
    connect_timeout_s: float = 30.0  # starting the server and listing its tools
    stderr: str = ""  # stdio: a file the server's stderr is appended to ("" = the trainer's own stderr)

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(f"MCP server {self.name!r}: transport must be one of {sorted(TRANSPORTS)}, "
                             f"got {self.transport!r}")
        from agent_r1.schema import LIMITS  # the config's own ranges, so code and params.yaml agree

        for key, rng in LIMITS["env.mcp_servers"].items():  # NaN compares false with everything: test finiteness
            if not rng.contains(getattr(self, key)):
                raise ValueError(f"MCP server {self.name!r}: {key} must be in {rng} (got {getattr(self, key)!r})")
        needs = TRANSPORTS[self.transport]
        if not getattr(self, needs):
            raise ValueError(f"MCP server {self.name!r}: transport {self.transport!r} needs {needs!r}")


def _http_target(cfg: McpServerConfig, errlog: TextIO, token: str) -> Any:
    return cfg.url  # the SDK's Client reads a URL string as streamable HTTP


#: a server whose calls time out this many times in a row (no answer between) is reconnected (restarted)
RESTART_AFTER_TIMEOUTS = 3

#: transport -> the config key it needs; how the SDK's `Client` is pointed at it
TRANSPORTS = {"stdio": "command", "http": "url"}
_TARGETS = {"stdio": mcp_stdio.stdio_target, "http": _http_target}


class McpConnection:
    """One live session with a server: a daemon thread runs an event loop that holds the SDK `Client`
    open until `close()`; `call()` submits coroutines to it and waits."""

    def __init__(self, cfg: McpServerConfig):
        self.cfg = cfg
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._failed: BaseException | None = None
        self._timeouts = 0  # calls in a row that all timed out
        self.specs: list[Any] = []  # the server's tools (mcp_types.Tool), listed when it connects
        # what stopping needs (loop, thread, stop event, task), without holding self: a connection never
        # closed still ends its server at the interpreter's exit
        self._box: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, McpConnection._shutdown, self._box)
        atexit.register(self._finalizer)

    def connect(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive() and self._failed is None:
                return
            self._shutdown(self._box)
            self._failed, self._timeouts = None, 0
            ready = threading.Event()
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._run, args=(self._loop, ready), daemon=True,
                                            name=f"mcp-{self.cfg.name or self.cfg.transport}")
            # the token finds this session's server process by pid, even one the loop never answered for
            self._box.update(loop=self._loop, thread=self._thread, token=mcp_stdio.new_token())
            self._thread.start()
            if not ready.wait(self.cfg.connect_timeout_s) or self._failed is not None:
                why = self._failed or f"no answer within {self.cfg.connect_timeout_s:g}s"
                self._shutdown(self._box, grace_s=0.0)  # nothing to end gracefully: no session yet
                raise ServiceUnavailableError(
                    f"MCP server {self.cfg.name!r} ({self.cfg.transport}: {self.cfg.command or self.cfg.url}) "
                    f"could not be reached: {type(why).__name__ if isinstance(why, BaseException) else ''} {why}")

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        failed: BaseException = ConnectionError("the connection closed")
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as exc:  # noqa: BLE001  (a transport's error ends the connection, not the caller)
            failed = exc
        finally:
            if self._thread is threading.current_thread():  # not a connection replaced since
                self._failed = self._failed or failed
            ready.set()

    async def _serve(self, ready: threading.Event) -> None:
        self._box["stop"] = stop = asyncio.Event()
        self._box["task"] = asyncio.current_task()
        with contextlib.ExitStack() as files:
            # a server's own logs (tracebacks of its failing tools) can go to a file of their own
            errlog = files.enter_context(open(self.cfg.stderr, "a")) if self.cfg.stderr else sys.stderr
            await self._session(_TARGETS[self.cfg.transport](self.cfg, errlog, self._box["token"]), ready, stop)

    async def _session(self, target: Any, ready: threading.Event, stop: asyncio.Event) -> None:
        from mcp.client import Client

        async with Client(target, cache=None) as client:
            specs, cursor = [], None
            while True:  # every page of the listing
                page = await client.list_tools(cursor=cursor)
                specs.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            self.specs, self._client = specs, client
            ready.set()
            await stop.wait()

    def call(self, name: str, calls: list[dict[str, Any]], timeout_s: float) -> list[ToolResult]:
        """Calls tool `name` (the server's own name) once per arguments object, all at once on the
        loop (a turn's calls from many trajectories wait one timeout, not one each); every failure
        is a failed ToolResult."""
        self.connect()  # a server that crashed since the last call starts again
        assert self._loop is not None

        async def all_of() -> list[ToolResult]:
            return list(await asyncio.gather(*(self._one(name, a, timeout_s) for a in calls)))

        future = asyncio.run_coroutine_threadsafe(all_of(), self._loop)
        try:
            results = future.result(timeout_s + 5.0)  # the SDK's own timeout answers first
        except FutureTimeout:  # the loop itself is stuck: abandon it, and start again next call
            future.cancel()
            self._failed = TimeoutError("the connection's event loop did not answer")
            return [_timeout(name, timeout_s) for _ in calls]
        self._count_timeouts(results)
        return results

    def _count_timeouts(self, results: list[ToolResult]) -> None:
        """A server that answers nothing for several calls in a row is treated as crashed: its reader
        may be dead, or the server hung, and waiting on it would cost every later call its timeout
        while training goes on. One answer (even an error) resets the count."""
        if not all(r.metadata.get("error") == "timeout" for r in results):
            self._timeouts = 0
            return
        self._timeouts += 1
        if self._timeouts >= RESTART_AFTER_TIMEOUTS and self._failed is None:
            self._failed = TimeoutError(f"no answer to {self._timeouts} calls in a row")

    async def _one(self, name: str, arguments: dict[str, Any], timeout_s: float) -> ToolResult:
        try:
            result = await self._client.call_tool(name, arguments, read_timeout_seconds=timeout_s)
        except Exception as exc:  # noqa: BLE001  (anything the transport raises is the model's observation)
            return self._failure(name, exc, timeout_s)
        text = _text_of(result)
        if result.is_error:
            return ToolResult(f"Error: tool {name!r} failed: {text}"[:2000], False, {"error": "tool"})
        return ToolResult(text)

    def _failure(self, name: str, exc: BaseException, timeout_s: float) -> ToolResult:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        code = getattr(exc, "code", None) if isinstance(exc, MCPError) else None
        if code == REQUEST_TIMEOUT:
            return _timeout(name, timeout_s)
        if code == CONNECTION_CLOSED or self._failed is not None or not (self._thread and self._thread.is_alive()):
            # the transport is gone (the server's process died, the HTTP service went away): the next
            # call connects again (connect() restarts a failed connection)
            self._failed = self._failed or exc
            return ToolResult(f"Error: tool {name!r} crashed: the MCP server {self.cfg.name!r} stopped "
                              f"({type(exc).__name__}: {exc})"[:500], False, {"error": "crash"})
        return ToolResult(f"Error: tool {name!r} failed: {type(exc).__name__}: {exc}"[:500], False,
                          {"error": "exception"})

    def close(self) -> None:
        with self._lock:
            self._shutdown(self._box)
            self._client = None

    @staticmethod
    def _shutdown(box: dict[str, Any], grace_s: float = 5.0) -> None:
        """Leaves the client's context on its loop (ending a stdio server), then stops the thread;
        `grace_s` for a live session to end on its own before its task is cancelled."""
        loop, thread, stop = box.pop("loop", None), box.pop("thread", None), box.pop("stop", None)
        task, token = box.pop("task", None), box.pop("token", None)
        if loop is None or thread is None:
            return
        if thread.is_alive() and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        thread.join(grace_s)
        if thread.is_alive() and task is not None and not loop.is_closed():
            # still connecting, or stuck: cancelling the task unwinds the client's context all the same
            loop.call_soon_threadsafe(task.cancel)
            thread.join(10)
        if not thread.is_alive() and not loop.is_closed():
            loop.close()
        if token is not None:  # whatever the session's shutdown could not end (a stuck loop, a server
            # that ignores SIGTERM past the SDK's wait) ends here by its pid
            mcp_stdio.end_server(mcp_stdio.find_server(token))


def _timeout(name: str, timeout_s: float) -> ToolResult:
    return ToolResult(f"Error: tool {name!r} timed out after {timeout_s:g}s", False, {"error": "timeout"})


def _text_of(result: Any) -> str:
    """The model's view of a CallToolResult: its text blocks; other blocks are named, not shown;
    structured content stands in when there is no text."""
    parts = []
    for block in result.content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')} omitted]")
    if not any(parts) and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


class McpTool:
    """One tool of an MCP server, as the runner sees it (base.Tool)."""

    isolate = False  # see the module docstring: the connection cannot cross a fork

    def __init__(self, connection: McpConnection, spec: Any, prefix: str, timeout_s: float):
        self.connection = connection
        self.remote_name = spec.name
        self.name = prefix + spec.name
        self.description = spec.description or spec.title or spec.name
        schema = dict(spec.input_schema or {})
        self.parameters = schema if schema.get("type") == "object" else {"type": "object", "properties": {}}
        self.timeout_s = timeout_s

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        return self.connection.call(self.remote_name, [arguments], self.timeout_s)[0]

    def batch_call(self, arguments: list[dict[str, Any]]) -> list[ToolResult]:
        """The runner hands a turn's calls of this tool together: they run concurrently."""
        return self.connection.call(self.remote_name, arguments, self.timeout_s)

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, server={self.connection.cfg.name!r})"


def per_call_timeout(server_s: float, run_s: float) -> float:
    """A call's own timeout: the server's, but a little under the runner's (which times the whole
    batch), so that one slow call is answered "timed out" by the SDK before the runner gives up on
    the batch and would turn its finished calls into timeouts too."""
    under_run = run_s - min(1.0, 0.1 * run_s)
    return min(server_s, under_run) if server_s > 0 else under_run


def connect_mcp_tools(servers: list[McpServerConfig],
                      run_timeout_s: float) -> tuple[list[McpTool], list[McpConnection]]:
    """Connects to each server and returns its tools (every one it lists) and the connections to close.
    Two tools under one name are an error that names both servers."""
    tools: dict[str, McpTool] = {}
    connections: list[McpConnection] = []
    try:
        for cfg in servers:
            conn = McpConnection(cfg)
            connections.append(conn)
            conn.connect()
            timeout = per_call_timeout(cfg.timeout_s, run_timeout_s)
            for spec in conn.specs:
                made = McpTool(conn, spec, cfg.prefix, timeout)
                if made.name in tools:
                    raise ValueError(f"MCP servers {tools[made.name].connection.cfg.name!r} and {cfg.name!r} both "
                                     f"offer a tool {made.name!r}; give one a prefix (env.mcp_servers[].prefix)")
                tools[made.name] = made
    except BaseException:
        for conn in connections:
            conn.close()
        raise
    return list(tools.values()), connections
