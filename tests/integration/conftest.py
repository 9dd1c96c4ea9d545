"""Servers the integration modules share (tests/isolation.py runs each set as one unit, on one
worker, one after the other):

- one local Ray for the Ray modules: a start takes about 6 s and a shutdown 1 s on 2 cores, so the
  modules share the first one started instead of each starting and stopping its own. It is stopped
  at the end of the session, or by a module that needs no local Ray in the process
  (test_ray_cluster.py connects to a cluster of its own: `stop_local_ray`); the next module that
  asks starts it again.
- one real Prefect server (`prefect server start`) for the flow and deployment modules: a start
  costs about 8 s of CPU (20 s of wall on a busy 2-core machine), and an idle server uses none."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PrefectServer:
    api: str  # http://127.0.0.1:<port>/api
    log: Path


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """A real Prefect server on 127.0.0.1 with a home and database of its own, stopped (by its own
    process group) at the end of the session."""
    from tests.servers import free_port, stop, wait_http

    home = tmp_path_factory.mktemp("prefect_server")
    port = str(free_port())
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    log = home / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server", "start", "--host",
                                 "127.0.0.1", "--port", port], env=env, cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(f"{api}/health", proc, 240)
        yield PrefectServer(api=api, log=log)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def ray_session():
    """The shared local Ray (3 logical CPUs: one learner and two rollout workers), started if down."""
    import ray

    from agent_r1.config import RayConfig
    from agent_r1.training.ray_trainer import init_ray

    init_ray(RayConfig(num_cpus=3))  # no-op where it is already up
    return ray


def stop_local_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session", autouse=True)
def _stop_ray_at_the_end():
    yield
    import sys

    if "ray" in sys.modules:  # never import Ray just to find it down
        stop_local_ray()
