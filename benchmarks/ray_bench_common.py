"""Shared parts of the Ray benchmarks (async_speed.py, ray_overhead.py, scale_grid.py).

- `small_config(work, **over)`: the small config they all time (a 2-layer, 128-wide model on the
  synthetic world, 8 prompts x 4 samples, 3 turns), data and index in the benchmark's work folder.
- `prepare_world(config)`: builds that data and index once (not timed).
- `timed_ray_run(cfg, iterations)`: a fresh Ray trainer (start-up reported, not timed), one warm-up
  iteration, then `iterations` timed ones; seconds, rollout wait and update per iteration.
- `machine(note)`: perf_common.machine() (CPU, cores, versions, commit) plus Ray's
  version and the note.
- `update_results(path, key, section)`: read-modify-write of one key of a results JSON, so the
  benchmarks that share a file (scale.json) keep each other's sections.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from perf_common import machine as perf_machine  # noqa: E402

SMALL = {
    "data.n_people": 120, "model.hidden_size": 128, "model.num_layers": 2, "model.num_heads": 4,
    "model.intermediate_size": 256, "model.vocab_size": 600, "train.prompts_per_iter": 8, "rollout.n_samples": 4,
    "rollout.max_turns": 3, "rollout.max_tokens_per_turn": 24, "train.ppo_epochs": 2, "train.minibatch_size": 16,
    "train.eval_every": 0, "algo.adv_estimator": "grpo",
}


def small_config(work: Path, **over: Any) -> dict[str, Any]:
    """The small benchmark config with its data and index under `work`, then `over` (dotted keys)."""
    return {"data.dir": str(work / "data"), "search.index_dir": str(work / "index"), **SMALL, **over}


def prepare_world(config: dict[str, Any], work: Path) -> Any:
    """Data and index for `config`, built once (a run folder under `work`/prep); returns that config."""
    from agent_r1.config import load_config
    from agent_r1.runs.assembly import ensure_data, ensure_index

    base = load_config(None, {**config, "train.out_dir": str(work / "prep")})
    ensure_index(base, ensure_data(base))
    return base


def timed_ray_run(cfg: Any, iterations: int) -> dict[str, Any]:
    """One fresh Ray trainer: start-up, one warm-up iteration (first-call costs; an asynchronous
    pipeline filling), then `iterations` timed ones."""
    from agent_r1.runs.train import assembly
    from agent_r1.training.ray_trainer import RayTrainer

    t0 = time.perf_counter()
    with RayTrainer(cfg, assembly()) as trainer:
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


def machine(note: str = "") -> dict[str, Any]:
    """What the figures were measured on; the caller records the load average before and after."""
    import ray

    info = {**perf_machine(), "ray": ray.__version__, "note": note}
    info.pop("load_average_at_start", None)  # taken when this is called, which may be after the runs
    return info


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def update_results(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """Writes `section` under `key` of the JSON at `path`, keeping its other keys; returns the whole."""
    result = json.loads(path.read_text()) if path.exists() else {}
    result[key] = section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    return result
