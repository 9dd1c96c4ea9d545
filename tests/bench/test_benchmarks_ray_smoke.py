"""The Ray benchmarks (async_speed, scale_grid) at micro size through their own
`main(argv)`, into tmp folders: one unit with the other Ray modules (tests/isolation.py GROUPS), so
that no two local Ray clusters run at once. See tests/bench/test_benchmarks_smoke.py for the others;
like them, marked `bench` (`make bench` runs them, `make test` does not)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from benchmarks import common

pytestmark = pytest.mark.bench

@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """tmp results and work folders, and one local Ray session for the module (each benchmark
    leaves a session it did not start up: two start-ups and shutdowns saved)."""
    import ray

    from agent_r1.config import load_config
    from agent_r1.training.ray_trainer import init_ray

    root = tmp_path_factory.mktemp("bench_ray")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(common.RESULTS_ENV, str(root / "results"))
        mp.setenv(common.WORK_ENV, str(root / "work"))
        init_ray(replace(load_config(None, {}).ray, num_cpus=4))  # the largest cell: 2 workers + 2 learners
        try:
            yield root
        finally:
            ray.shutdown()


def test_async_speed_and_scale_grid_share_scale_json(bench):
    from benchmarks import async_speed, scale_grid

    # the asynchronous mode (max_staleness 1) and the largest synchronous cell (2 workers, 2 learners):
    # a Ray trainer costs ~10 s to start here; tests/integration/test_async.py and test_ray_trainer.py cover the rest
    assert async_speed.main(["--smoke", "--iterations", "1", "--repeats", "1", "--modes", "async_1"]) == 0
    assert scale_grid.main(["--smoke", "--iterations", "1", "--repeats", "1", "--cells", "2x2",
                            "--plot", str(bench / "bench-scale-grid.png")]) == 0
    doc = json.loads((bench / "results" / "scale.json").read_text())
    assert {"async_speed", "scale_grid"} <= set(doc)  # each keeps the other's section
    assert doc["async_speed"]["iteration_s_median"]["async_1"] > 0
    assert set(doc["scale_grid"]["iteration_s_median"]) == {"2w_2l"}
    assert (bench / "bench-scale-grid.png").stat().st_size
