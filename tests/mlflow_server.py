"""A real `mlflow server` for the tests that take MLflow down and bring it back (tests/tracking/test_tracking.py,
tests/integration/test_traces.py), started with less work than its defaults:
- its SQLite store is a copy of an already-migrated one (tests/mlflow_store.py), so the server does
  not run MLflow's migrations on start;
- MLflow's job execution (a huey consumer process of its own, for server-side evaluation jobs these
  tests never start) is off: on a loaded 2-core machine that second process doubled the start-up.
The server is still the `mlflow server` command a user runs, on the port the test chose."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.mlflow_store import fresh_store
from tests.servers import stop, wait_http  # stop is re-exported: SIGTERM to the group, SIGKILL if it lingers

VENV_BIN = Path(sys.executable).parent


def start_mlflow_server(port: int, store: Path, timeout_s: float = 150.0) -> subprocess.Popen:
    """`mlflow server` on 127.0.0.1:port with its store and artifacts in `store`; returns once /health answers."""
    backend = fresh_store(store)
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(
        [str(VENV_BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", backend, "--artifacts-destination", str(store / "art")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", server, timeout_s)
    except AssertionError:
        stop(server)  # a server that never answered is not left behind
        raise
    return server
