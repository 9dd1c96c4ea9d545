"""One local Ray for the Ray modules (tests/isolation.py runs them as one unit, on one worker, one
after the other): a start takes about 6 s and a shutdown 1 s on 2 cores, so the modules share the
first one started instead of each starting and stopping its own. It is stopped at the end of the
session, or by a module that needs no local Ray in the process (test_ray_cluster.py connects to a
cluster of its own: `stop_local_ray`); the next module that asks starts it again."""

from __future__ import annotations

import pytest


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
