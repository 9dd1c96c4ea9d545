"""Tools from MCP servers (agent_r1/tools/mcp_tools.py): a server written here with the official SDK,
reached over stdio (its script run with sys.executable) and streamable HTTP (served here on 127.0.0.1);
listing, results, errors, timeouts, a crash, close, and a model's call through the env and the rollout."""

from __future__ import annotations

import os
import runpy
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from agent_r1.config import load_config  # noqa: E402
from agent_r1.envs.factory import make_env_factory  # noqa: E402
from agent_r1.envs.tool_env import check_sample_env  # noqa: E402
from agent_r1.retrieval.errors import ServiceUnavailableError  # noqa: E402
from agent_r1.tools.mcp_tools import McpServerConfig, connect_mcp_tools  # noqa: E402
from agent_r1.tools.procs import descendants  # noqa: E402
from agent_r1.tools.runner import ToolCall, ToolRunner  # noqa: E402

SERVER = textwrap.dedent('''
    import os, time
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    app = MCPServer("kb")
    CITIES = {"ada": "London", "grace": "New York"}

    @app.tool()
    def lookup(name: str) -> str:
        """Find the city a person lived in."""
        return CITIES.get(name.lower(), "unknown")

    @app.tool()
    def refuse(name: str) -> str:
        """Always refuses (an isError result with a message)."""
        raise ToolError(f"no record may be shown for {name}")

    @app.tool()
    def broken(x: int) -> str:
        """Raises a plain exception."""
        return str(1 // (x - x))

    @app.tool()
    def slow(seconds: float) -> str:
        """Sleeps, then answers."""
        time.sleep(seconds)
        return "awake"

    @app.tool()
    def die() -> str:
        """Ends the server's process."""
        os._exit(3)

    if __name__ == "__main__":
        app.run()
''')


@pytest.fixture(scope="module")
def server_script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "kb_server.py"
    path.write_text(SERVER)
    return path


@pytest.fixture
def own_script(tmp_path) -> Path:
    """A copy of the server for one test, so its processes are told apart from the shared server's."""
    path = tmp_path / "kb_server.py"
    path.write_text(SERVER)
    return path


def stdio(script: Path, **kw) -> McpServerConfig:
    return McpServerConfig(name="kb", transport="stdio", command=sys.executable, args=[str(script)], **kw)


def server_pids(script: Path) -> list[int]:
    """This process's descendants running the server script."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            if str(script).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def stdio_tools(server_script):
    # 8 s a call: on a loaded 2-core machine the server's first error (its logging renders the
    # exception) once took over 4 s, and a slow answer must not read as a timeout
    tools, conns = connect_mcp_tools([stdio(server_script, timeout_s=8.0)], run_timeout_s=10.0)
    yield {t.name: t for t in tools}
    for c in conns:
        c.close()


@pytest.fixture(scope="module")
def http_url(server_script):
    """The same server over streamable HTTP, served by uvicorn on a thread here; stopped by its handle."""
    import uvicorn

    app = runpy.run_path(str(server_script))["app"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app.streamable_http_app(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the test's HTTP MCP server did not start"
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)


def test_listing_gives_the_schema_the_model_sees(stdio_tools):
    assert sorted(stdio_tools) == ["broken", "die", "lookup", "refuse", "slow"]
    lookup = stdio_tools["lookup"]
    assert lookup.description == "Find the city a person lived in."
    assert lookup.parameters["type"] == "object" and lookup.parameters["required"] == ["name"]
    assert lookup.parameters["properties"]["name"]["type"] == "string"
    assert lookup.isolate is False  # the connection's loop thread would not survive a fork


def test_stdio_call_results_and_errors(stdio_tools):
    assert stdio_tools["lookup"].call({"name": "Ada"}).text == "London"
    refused = stdio_tools["refuse"].call({"name": "Ada"})  # isError with the tool's own message
    assert not refused.success and "no record may be shown for Ada" in refused.text
    assert refused.metadata["error"] == "tool"
    broken = stdio_tools["broken"].call({"x": 2})  # an exception the server turns into isError
    assert not broken.success and broken.text.startswith("Error: tool 'broken' failed")


def test_a_slow_call_times_out_and_the_connection_lives_on(stdio_tools):
    start = time.monotonic()
    out = stdio_tools["slow"].call({"seconds": 30})
    assert time.monotonic() - start < 25
    assert not out.success and "timed out after 8s" in out.text and out.metadata["error"] == "timeout"
    assert stdio_tools["lookup"].call({"name": "Grace"}).text == "New York"


def test_calls_of_a_turn_run_concurrently(stdio_tools):
    start = time.monotonic()
    outs = stdio_tools["slow"].batch_call([{"seconds": 1.5}] * 4)
    assert [o.text for o in outs] == ["awake"] * 4
    assert time.monotonic() - start < 5.0  # not 4 x 1.5 s one after another


def test_the_runner_turns_mcp_failures_into_observations(stdio_tools):
    runner = ToolRunner(list(stdio_tools.values()), timeout_s=5.0)
    outs = runner.run([ToolCall("lookup", {"name": "ada"}), ToolCall("lookup", {"nom": "ada"}),
                       ToolCall("refuse", {"name": "x"})])
    assert outs[0].text == "London"
    assert "invalid arguments for 'lookup'" in outs[1].text  # the server's inputSchema, checked here
    assert not outs[2].success and runner.stats["refuse"]["failures"] == 1
    assert runner.worker_pids() == []  # no forked worker for MCP tools


def test_beside_a_forked_tool_in_one_runner(stdio_tools):
    """A @tool function runs in a worker forked while the connection's loop thread runs; both answer."""
    from agent_r1.tools.function_tool import tool

    @tool(register=False)
    def shout(text: str) -> str:
        """Upper-cases text."""
        return text.upper()

    runner = ToolRunner([stdio_tools["lookup"], shout], timeout_s=5.0)
    try:
        outs = runner.run([ToolCall("shout", {"text": "hi"}), ToolCall("lookup", {"name": "ada"})])
        assert [o.text for o in outs] == ["HI", "London"] and len(runner.worker_pids()) == 1
        assert stdio_tools["lookup"].call({"name": "grace"}).text == "New York"
    finally:
        runner.close()


def test_the_servers_stderr_can_go_to_a_file(own_script, tmp_path):
    log = tmp_path / "kb.log"
    tools, (conn,) = connect_mcp_tools([stdio(own_script, stderr=str(log))], run_timeout_s=5.0)
    try:
        assert not {t.name: t for t in tools}["broken"].call({"x": 1}).success
    finally:
        conn.close()
    assert "ZeroDivisionError" in log.read_text()  # the server's traceback of its failing tool


def test_a_crashed_server_is_an_observation_then_restarts_and_close_ends_it(own_script):
    server_script = own_script
    tools, (conn,) = connect_mcp_tools([stdio(server_script)], run_timeout_s=5.0)
    by = {t.name: t for t in tools}
    (first,) = server_pids(server_script)
    crashed = by["die"].call({})
    assert not crashed.success and "crashed" in crashed.text and crashed.metadata["error"] == "crash"
    assert by["lookup"].call({"name": "ada"}).text == "London"  # a new server process answers
    (second,) = server_pids(server_script)
    assert second != first
    conn.close()
    assert server_pids(server_script) == []


def test_close_after_a_timed_out_call_leaves_no_process(own_script):
    server_script = own_script
    tools, (conn,) = connect_mcp_tools([stdio(server_script, timeout_s=0.5)], run_timeout_s=5.0)
    assert {t.name: t for t in tools}["slow"].call({"seconds": 30}).metadata["error"] == "timeout"
    assert len(server_pids(server_script)) == 1  # still sleeping in its call
    conn.close()
    assert server_pids(server_script) == []


def test_a_server_that_cannot_start_stops_the_run():
    with pytest.raises(ServiceUnavailableError, match="could not be reached"):
        connect_mcp_tools([McpServerConfig(name="gone", command=sys.executable, args=["-c", "pass"],
                                           connect_timeout_s=10)], run_timeout_s=5.0)


def test_a_server_that_never_answers_is_given_up_and_ended(tmp_path):
    mute = tmp_path / "mute_server.py"
    mute.write_text("import time\ntime.sleep(120)\n")
    start = time.monotonic()
    with pytest.raises(ServiceUnavailableError, match="no answer within 1s"):
        connect_mcp_tools([McpServerConfig(name="mute", command=sys.executable, args=[str(mute)],
                                           connect_timeout_s=1)], run_timeout_s=5.0)
    assert time.monotonic() - start < 20
    assert server_pids(mute) == []


def test_streamable_http(http_url):
    tools, conns = connect_mcp_tools([McpServerConfig(name="web", transport="http", url=http_url, prefix="web_",
                                                      timeout_s=2.0)], run_timeout_s=5.0)
    try:
        by = {t.name: t for t in tools}
        assert "web_lookup" in by and by["web_lookup"].remote_name == "lookup"
        assert by["web_lookup"].call({"name": "Ada"}).text == "London"
        assert "no record may be shown" in by["web_refuse"].call({"name": "Ada"}).text
        assert "timed out" in by["web_slow"].call({"seconds": 8}).text
    finally:
        for c in conns:
            c.close()


def test_config_checks():
    with pytest.raises(ValueError, match="needs 'url'"):
        McpServerConfig(name="x", transport="http")
    with pytest.raises(ValueError, match="transport must be one of"):
        McpServerConfig(name="x", transport="sse", url="http://127.0.0.1:1/")
    cfg = load_config(overrides={"env.mcp_servers": [{"name": "kb", "command": "python", "args": ["s.py"],
                                                      "timeout_s": "2"}]})
    (server,) = cfg.env.mcp_servers
    assert isinstance(server, McpServerConfig) and server.timeout_s == 2.0 and server.transport == "stdio"
    with pytest.raises(ValueError, match=r"env.mcp_servers\[0\].command"):
        load_config(overrides={"env.mcp_servers": [{"name": "kb", "command": ["python"]}]})
    with pytest.raises(ValueError, match="unknown key"):  # a data row never starts a command
        check_sample_env({"mcp_servers": [{"name": "x", "command": "sh"}]}, cfg.env, cfg.reward)


def test_env_tools_names_what_the_servers_offer(own_script):
    server = {"name": "kb", "command": sys.executable, "args": [str(own_script)]}
    cfg = load_config(overrides={"env.tools": ["lookup", "lokup"], "env.mcp_servers": [server]})
    with pytest.raises(ValueError, match=r"names \['lokup'\], which no MCP server .* offers .*'lookup'"):
        make_env_factory(cfg, retriever=None)
    clash = load_config(overrides={"env.tools": ["calculator"], "env.mcp_servers": [
        {**server, "args": ["-c", CALCULATOR_SERVER]}]})
    with pytest.raises(ValueError, match="both a registered tool and offered by MCP server 'kb'; give the server a"):
        make_env_factory(clash, retriever=None)
    assert server_pids(own_script) == []  # refused configs leave no server running


CALCULATOR_SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    app = MCPServer("calc")

    @app.tool()
    def calculator(expression: str) -> str:
        """Evaluates."""
        return "4"

    app.run()
''')


def test_a_models_hermes_call_reaches_the_mcp_tool_in_the_trajectory(own_script, tiny_model):
    server_script = own_script
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.engine import GenerationOutput
    from agent_r1.rollout.loop import run_rollout
    from agent_r1.sampling import RolloutConfig

    _, tok = tiny_model

    class Scripted:
        def __init__(self, actions):
            self.actions, self.turn = actions, 0

        def generate(self, prompts, params):
            ids = tok.encode(self.actions[self.turn], add_special_tokens=False)
            self.turn += 1
            return [GenerationOutput(list(ids), [0.0] * len(ids), "stop") for _ in prompts]

    cfg = load_config(overrides={"env.format": "hermes", "env.tools": ["lookup"],
                                 "env.mcp_servers": [{"name": "kb", "command": sys.executable,
                                                      "args": [str(server_script)]}]})
    make_env = make_env_factory(cfg, retriever=None)
    try:
        sample = {"id": "m1", "question": "Where did Ada live?", "answers": ["London"]}
        assert [s["function"]["name"] for s in make_env(sample).tool_schemas] == ["lookup"]  # only what env.tools names
        call = '<tool_call>{"name": "lookup", "arguments": {"name": "Ada"}}</tool_call>'
        engine = Scripted([call, "<answer>London</answer>"])
        rollout = RolloutConfig(max_turns=3, max_tokens_per_turn=40, max_observation_tokens=30, max_total_tokens=600)
        (traj,) = run_rollout(engine, ChatCodec(tok), make_env, [sample], rollout, cfg.reward)
        assert "Find the city a person lived in." in tok.decode(traj.prompt_ids)  # the listed schema
        assert "London" in traj.turns[0].observation_text and traj.turns[0].valid_tool_calls == 1
        assert traj.answer == "London" and traj.outcome_reward == 1.0
    finally:
        make_env.close()
    assert server_pids(server_script) == []


def test_closing_the_run_ends_its_mcp_servers(own_script):
    from agent_r1.runs.run import Run

    run = Run(load_config(overrides={"env.tools": ["lookup"], "env.mcp_servers": [
        {"name": "kb", "command": sys.executable, "args": [str(own_script)]}]}))
    run.__dict__["env_factory"] = make_env_factory(run.cfg, retriever=None)  # as Run.env_factory builds it, no index
    assert len(server_pids(own_script)) == 1
    run.close()
    assert server_pids(own_script) == []
