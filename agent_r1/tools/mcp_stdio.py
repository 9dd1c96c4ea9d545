"""Starting a stdio MCP server so that it cannot outlive the trainer, and ending it by its pid.

- Replies are decoded with replacement: one byte that is not UTF-8 must cost the model one odd
  character, not the SDK's stdout reader (a strict decoder's error leaves the reader draining the pipe
  for good, and every later call of the server times out).
- On Linux the server is started through a few lines of Python that arm PR_SET_PDEATHSIG(SIGKILL) and
  then exec the server's command (same pid): the kernel kills the server the moment the thread that
  started it dies, which a `kill -9` of the trainer does, even when the server is hung and ignores
  SIGTERM and its stdin closing. The SDK's spawn (anyio.open_process) takes no preexec_fn, hence the
  exec wrapper. The signal follows the starting thread: that is the connection's loop thread, which
  lives as long as the session, so a server ends with its session at the latest.
- The server's pid is found by a token in its environment (the SDK does not expose its process), so
  close() can still escalate SIGTERM -> SIGKILL by pid when the session's own shutdown could not.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

#: the environment variable that tells a connection's server process apart from every other
TOKEN_VAR = "AGENT_R1_MCP_SERVER"

# Runs with `python -I -S -c`: stdlib only, no site, no user paths. The parent check covers a trainer
# that died before the death signal was armed.
_WRAPPER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def new_token() -> str:
    return uuid.uuid4().hex


def stdio_target(cfg: Any, errlog: TextIO, token: str) -> Any:
    """The SDK's stdio transport for `cfg` (an McpServerConfig), its process marked with `token`."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command, args = cfg.command, list(cfg.args)
    if sys.platform.startswith("linux"):
        # the wrapper's exec would fail only in the child, where it reads as a connection error: a
        # command that is not there is named here, as the SDK's own spawn names it
        if shutil.which(command, path=cfg.env.get("PATH", os.environ.get("PATH"))) is None:
            raise FileNotFoundError(f"no such command: {command!r}")
        command, args = sys.executable, ["-I", "-S", "-c", _WRAPPER, str(os.getpid()), command, *args]
    params = StdioServerParameters(command=command, args=args, env={**cfg.env, TOKEN_VAR: token},
                                   encoding_error_handler="replace")
    return stdio_client(params, errlog=errlog)


def _state(pid: int) -> tuple[int, str] | None:
    """(ppid, state letter) of a process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[0]
    except (OSError, IndexError, ValueError):
        return None


def find_server(token: str) -> int | None:
    """The pid of this process's child started with `token`; None where /proc is not there."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or (_state(int(entry.name)) or (0, ""))[0] != me:
            continue
        try:
            if f"{TOKEN_VAR}={token}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except OSError:
            continue
    return None


def _running_child(pid: int) -> bool:
    """Still our child and not yet dead: a pid the child watcher reaped may be another process's now."""
    found = _state(pid)
    return found is not None and found[0] == os.getpid() and found[1] != "Z"


def end_server(pid: int | None, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`, to the server (and its process group, which it leads:
    the SDK starts it in a session of its own); nothing when it has already ended."""
    if pid is None:
        return
    # after SIGKILL too: the kill lands asynchronously, and a caller may check the process right after
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not _running_child(pid):
            return
        for send in (os.killpg, os.kill):
            try:
                send(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _running_child(pid):
            time.sleep(0.05)
