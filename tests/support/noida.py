"""noida-db (a local server speaking the Elasticsearch REST API) for the tests' Elasticsearch fixtures
(tests/es_fixture.py) and the retrieval benchmarks: one way to start it and stop it.

`start_noida(data_dir)` runs the bundled server binary as our own child, in a session of its own,
on a free 127.0.0.1 port, and returns once it answers; `NoidaServer.stop()` signals exactly that
process group. It is not a real Elasticsearch: absolute figures measured against it say nothing of
a cluster.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.servers import free_port, stop, wait_http


def noida_binary() -> str | None:
    # Prefer the bundled server binary over the `noida-db` Python launcher: run directly,
    # it is our child, so stop() signals and reaps the server itself.
    try:
        from importlib.resources import files

        bundled = Path(str(files("noida_db").joinpath("noida-db")))
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    except ImportError:
        pass
    candidate = Path(sys.executable).with_name("noida-db")
    return str(candidate) if candidate.exists() else shutil.which("noida-db")


@dataclass
class NoidaServer:
    """A foreground `noida-db start` subprocess serving the Elasticsearch API."""

    proc: subprocess.Popen[bytes]
    url: str
    data_dir: Path
    log_path: Path

    def stop(self) -> None:
        stop(self.proc)  # its own session: exactly that process group, nothing else
        # If `proc` is the Python launcher, the server is its child and may still be
        # shutting down: wait until the port stops accepting connections.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.answers():
            time.sleep(0.05)

    def answers(self) -> bool:
        host, port = self.url.rsplit("/", 1)[-1].split(":")
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return True
        except OSError:
            return False


def start_noida(data_dir: Path, timeout_s: float = 30.0, port: int | None = None) -> NoidaServer:
    """noida-db serving `data_dir` on `port` (default: a free one); its output goes to noida.log there."""
    binary = noida_binary()
    if binary is None:
        raise RuntimeError("noida-db is not installed: run `make install` (it is in the dev extra)")
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "noida.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [binary, "start", "--data-dir", str(data_dir), "--host", "127.0.0.1",
             "--only", "elasticsearch", "--elasticsearch-port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    server = NoidaServer(proc=proc, url=f"http://127.0.0.1:{port}", data_dir=data_dir, log_path=log_path)
    try:
        wait_http(server.url, proc, timeout_s)
    except AssertionError as exc:
        server.stop()
        raise RuntimeError(f"noida-db did not answer at {server.url}: {exc}; "
                           f"{log_path.read_text(errors='replace')[-2000:]}") from None
    return server
