"""Shared parts of the Ray benchmarks (async_speed.py, scale_grid.py).

- `small_config(work, **over)`: the small config they all time (a 2-layer, 128-wide model on the
  synthetic world, 8 prompts x 4 samples, 3 turns), data and index in the benchmark's work folder.
- `prepare_world(config)`: builds that data and index once (not timed).
- `timed_ray_run(cfg, iterations)`: a fresh Ray trainer (start-up reported, not timed), one warm-up
  iteration, then `iterations` timed ones; seconds, rollout wait and update per iteration.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks import common

SMALL = {
    "data.n_people": 120, "model.hidden_size": 128, "model.num_layers": 2, "model.num_heads": 4,
    "model.intermediate_size": 256, "model.vocab_size": 600, "train.prompts_per_iter": 8, "rollout.n_samples": 4,
    "rollout.max_turns": 3, "rollout.max_tokens_per_turn": 24, "train.ppo_epochs": 2, "train.minibatch_size": 16,
    "train.eval_every": 0, "algo.adv_estimator": "grpo",
}


def small_config(work: Path, smoke: bool = False, **over: Any) -> dict[str, Any]:
    """The small benchmark config with its data and index under `work`, then `over` (dotted keys);
    `smoke`: the micro model and world instead (common.micro_overrides), for the smoke tests."""
    micro = {k: v for k, v in common.micro_overrides(work).items() if k.startswith(("data.n_", "model.", "rollout."))}
    return {"data.dir": str(work / "data"), "search.index_dir": str(work / "index"),
            "train.runs_dir": str(work / "runs"),  # the corpus digest cache too: never the repository's runs/
            **SMALL,
            **(micro if smoke else {}), **over}


def ray_machine() -> dict[str, Any]:
    """common.machine() with Ray's version; the caller records the load average before and after its runs."""
    from importlib.metadata import version

    return common.machine(at_start=False, ray=version("ray"))


def add_smoke_arg(ap: Any) -> None:
    ap.add_argument("--smoke", action="store_true", help="the micro model and world, for the smoke tests (seconds)")


def prepare_world(config: dict[str, Any], work: Path) -> Any:
    """Data and index for `config`, built once (a run folder under `work`/prep); returns that config."""
    from agent_r1.config import load_config
    from agent_r1.runs.run import Run

    base = load_config(None, {**config, "train.out_dir": str(work / "prep")})
    Run(base).index_dir  # builds the data, then the index
    return base


def timed_ray_run(cfg: Any, iterations: int) -> dict[str, Any]:
    """One fresh Ray trainer: start-up, one warm-up iteration (first-call costs; an asynchronous
    pipeline filling), then `iterations` timed ones."""
    from agent_r1.runs.run import Run
    from agent_r1.training.ray_trainer import RayTrainer

    t0 = time.perf_counter()
    with RayTrainer(Run(cfg).spec()) as trainer:
        startup = time.perf_counter() - t0
        trainer.train_step()
        walls, metrics = [], []
        for _ in range(iterations):
            t1 = time.perf_counter()
            metrics.append(trainer.train_step())
            walls.append(time.perf_counter() - t1)
    return {"iteration_s_mean": round(statistics.mean(walls), 4), "iteration_s": [round(w, 4) for w in walls],
            "rollout_wait_s": [round(m["rollout_s"], 4) for m in metrics],
            "update_s": [round(m["update_s"], 4) for m in metrics],
            # the tokens a batch holds (prompt and response, every trajectory): the work of an update
            "batch_tokens": [round(m["update_tokens_per_s"] * m["update_s"] / cfg.train.ppo_epochs) for m in metrics],
            "staleness_max": max(m.get("staleness/max", 0.0) for m in metrics), "startup_s": round(startup, 2)}
