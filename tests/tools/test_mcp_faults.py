"""An MCP stdio server that misbehaves: a reply that is not valid UTF-8, a server that stops answering,
and a hung server that ignores SIGTERM when the trainer is killed or closes it.

The servers here speak JSON-RPC by hand (not the SDK's server), so a test controls the exact bytes
written to the wire and can block the whole server, as a single-threaded server in the wild would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from agent_r1.tools.mcp_tools import RESTART_AFTER_TIMEOUTS, McpServerConfig, connect_mcp_tools  # noqa: E402
from agent_r1.tools.procs import descendants  # noqa: E402

RAW_SERVER = textwrap.dedent('''
    import json, signal, sys, time
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = sys.stdout.buffer
    TOOLS = [{"name": n, "description": n, "inputSchema": {"type": "object", "properties": {}}}
             for n in ("garble", "echo", "hang")]

    def reply(mid, result):
        out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}).encode() + b"\\n")
        out.flush()

    for raw in sys.stdin.buffer:
        msg = json.loads(raw)
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue
        if method == "initialize":
            reply(mid, {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw", "version": "1"}})
        elif method == "tools/list":
            reply(mid, {"tools": TOOLS})
        elif method == "tools/call" and msg["params"]["name"] == "garble":
            # a reply whose text holds one byte that is not UTF-8
            out.write(b'{"jsonrpc":"2.0","id":' + json.dumps(mid).encode()
                      + b',"result":{"content":[{"type":"text","text":"bad \\xff byte"}],"isError":false}}\\n')
            out.flush()
        elif method == "tools/call" and msg["params"]["name"] == "hang":
            time.sleep(3600)  # the whole server stops answering, as a single-threaded one does
        elif method == "tools/call":
            reply(mid, {"content": [{"type": "text", "text": "ok"}], "isError": False})
        else:
            reply(mid, {})
    if "--ignore-eof" in sys.argv:
        time.sleep(3600)  # a hung server: its stdin closing does not end it either
''')


@pytest.fixture
def raw_script(tmp_path) -> Path:
    path = tmp_path / "raw_server.py"
    path.write_text(RAW_SERVER)
    return path


def raw(script: Path, *flags: str, **kw) -> McpServerConfig:
    return McpServerConfig(name="raw", command=sys.executable, args=[str(script), *flags], **kw)


def pids_running(script: Path, under: int) -> list[int]:
    """Live (not zombie) processes under `under` whose command line names the script."""
    return [pid for pid in descendants(under) if _names(pid, script) and _alive(pid)]


def _names(pid: int, script: Path) -> bool:
    try:
        return str(script).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Exists and is not a zombie (a zombie is dead; whoever adopted it may not have reaped it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _poll(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_a_reply_that_is_not_utf8_is_read_with_replacement_and_later_calls_answer(raw_script):
    tools, (conn,) = connect_mcp_tools([raw(raw_script, timeout_s=3.0)], run_timeout_s=5.0)
    try:
        by = {t.name: t for t in tools}
        garbled = by["garble"].call({})
        assert garbled.success and garbled.text == "bad \ufffd byte"
        assert [by["echo"].call({}).text for _ in range(3)] == ["ok"] * 3
    finally:
        conn.close()
    assert pids_running(raw_script, os.getpid()) == []


def test_a_server_that_stops_answering_is_restarted_after_repeated_timeouts(raw_script):
    tools, (conn,) = connect_mcp_tools([raw(raw_script, timeout_s=0.5)], run_timeout_s=5.0)
    try:
        by = {t.name: t for t in tools}
        (first,) = pids_running(raw_script, os.getpid())
        assert by["hang"].call({}).metadata["error"] == "timeout"
        for _ in range(RESTART_AFTER_TIMEOUTS - 1):  # the blocked server answers nothing more
            assert by["echo"].call({}).metadata["error"] == "timeout"
        assert by["echo"].call({}).text == "ok"  # a new server answers
        assert pids_running(raw_script, os.getpid()) != [first]
        assert not _alive(first)
    finally:
        conn.close()
    assert pids_running(raw_script, os.getpid()) == []


def test_one_answer_between_timeouts_keeps_the_server(raw_script):
    tools, (conn,) = connect_mcp_tools([raw(raw_script, timeout_s=3.0)], run_timeout_s=5.0)
    try:
        by = {t.name: t for t in tools}
        (first,) = pids_running(raw_script, os.getpid())
        for _ in range(RESTART_AFTER_TIMEOUTS + 1):
            assert by["echo"].call({}).text == "ok"
        assert pids_running(raw_script, os.getpid()) == [first]
    finally:
        conn.close()


def test_close_ends_a_hung_server_that_ignores_sigterm(raw_script):
    tools, (conn,) = connect_mcp_tools([raw(raw_script, "--ignore-term", "--ignore-eof", timeout_s=0.5)],
                                       run_timeout_s=5.0)
    assert {t.name: t for t in tools}["hang"].call({}).metadata["error"] == "timeout"
    assert len(pids_running(raw_script, os.getpid())) == 1
    conn.close()
    assert pids_running(raw_script, os.getpid()) == []


def test_close_ends_the_server_by_pid_when_the_sessions_loop_is_stuck(raw_script):
    """The session's own shutdown runs on its event loop; with that loop stuck (here: a blocking call
    put on it), close() still ends a server that ignores SIGTERM, by its pid."""
    tools, (conn,) = connect_mcp_tools([raw(raw_script, "--ignore-term", "--ignore-eof")], run_timeout_s=5.0)
    (server,) = pids_running(raw_script, os.getpid())
    try:
        conn._loop.call_soon_threadsafe(time.sleep, 20)  # the loop answers nothing until close() gave up on it
        conn.close()
        assert not _alive(server)
    finally:
        _kill(server)


PARENT = textwrap.dedent('''
    import sys, time
    from agent_r1.tools.mcp_tools import McpServerConfig, connect_mcp_tools
    script = sys.argv[1]
    tools, conns = connect_mcp_tools([McpServerConfig(name="raw", command=sys.executable,
                                                      args=[script, "--ignore-term", "--ignore-eof"])], 5.0)
    print("ready", flush=True)
    time.sleep(3600)
''')


def test_a_hung_server_dies_with_a_trainer_killed_by_sigkill(raw_script, tmp_path):
    parent_py = tmp_path / "parent.py"
    parent_py.write_text(PARENT)
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    parent = subprocess.Popen([sys.executable, str(parent_py), str(raw_script)], stdout=subprocess.PIPE,
                              text=True, env=env)
    server: list[int] = []
    try:
        assert parent.stdout.readline().strip() == "ready"
        server = pids_running(raw_script, parent.pid)
        assert len(server) == 1
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        assert _poll(lambda: not _alive(server[0]), 10.0), "the MCP server outlived its killed parent"
    finally:
        _kill(parent.pid)
        parent.wait(30)
        for pid in server:
            _kill(pid)
