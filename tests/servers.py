"""Starting and stopping real local servers in tests: a free port, waiting for HTTP, stopping a
process group that the test started (by its own pid, never machine-wide)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=3)
            return
        except OSError:
            assert proc.poll() is None, f"process for {url} exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"{url} did not come up in {timeout} s"
            time.sleep(0.25)  # a server up a moment after a poll is not left waiting a whole second


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group the test started (start_new_session=True), SIGKILL if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
