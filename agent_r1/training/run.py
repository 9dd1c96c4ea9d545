"""`agent-r1 train`: builds every part from the config and runs the RL loop, resumably.

With `ray.enabled`, the same parts are built inside a Ray learner actor and rollouts run on
Ray worker actors (agent_r1/training/ray_trainer.py); the algorithm code is the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.training import checkpoint as ckpt
from agent_r1.training.metrics_log import JsonlMetrics


@dataclass
class RunParts:
    """What a trainer is built from: the policy to train, its KL reference, the data and index."""

    model: Any
    tokenizer: Any
    reference: Any | None
    latest: Path | None  # the checkpoint to resume from, if any
    index_dir: Path
    train_samples: list[dict[str, Any]]
    eval_samples: list[dict[str, Any]]


def prepare_run(cfg: ExperimentConfig, resume: bool = False) -> RunParts:
    """Data, index, policy (fresh, `train.init_from`, or the latest checkpoint with `resume`)."""
    from agent_r1.models.build import load_model, save_model
    from agent_r1.training.setup import build_policy, ensure_data, ensure_index, load_samples

    out = Path(cfg.train.out_dir)
    data_dir = ensure_data(cfg)
    index_dir = ensure_index(cfg, data_dir)
    latest = ckpt.latest_checkpoint(out / "checkpoints") if resume else None
    init_dir = out / "init_model"
    if latest is not None:
        model, tokenizer = load_model(latest)
        reference = load_model(init_dir)[0] if cfg.algo.kl_coef > 0 else None
    else:
        model, tokenizer = build_policy(cfg, data_dir, cfg.train.init_from)
        save_model(model, tokenizer, init_dir)  # the KL reference, and what a resume starts from
        reference = None
        (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2, default=str))
    return RunParts(model, tokenizer, reference, latest, index_dir,
                    load_samples(data_dir / cfg.data.train_file),
                    load_samples(data_dir / cfg.data.eval_file, cfg.train.eval_size))


def run_train(cfg: ExperimentConfig, resume: bool = False, sink: Any = None, on_iteration: Any = None) -> dict[str, Any]:
    """Trains from `train.init_from` (or a fresh model); with `resume`, continues from the latest
    complete checkpoint in `train.out_dir`. Returns the final metrics."""
    if cfg.ray.enabled:
        from agent_r1.training.ray_trainer import run_train_ray

        return run_train_ray(cfg, resume=resume, sink=sink, on_iteration=on_iteration)
    from agent_r1.retrieval.base import open_index
    from agent_r1.training.setup import make_env_factory, set_threads
    from agent_r1.training.trainer import RLTrainer

    set_threads(cfg.train.threads)
    out = Path(cfg.train.out_dir)
    parts = prepare_run(cfg, resume)
    retriever = open_index(parts.index_dir)
    metrics_sink = sink or default_sink(cfg, parts.latest)
    trainer = RLTrainer(cfg, parts.model, parts.tokenizer, make_env_factory(cfg, retriever), parts.train_samples,
                        parts.eval_samples, sink=metrics_sink, reference=parts.reference)
    if parts.latest is not None:
        trainer.load(parts.latest)
        print(f"resumed from {parts.latest} at iteration {trainer.iteration}")
    try:
        final = trainer.fit(on_iteration=on_iteration)
    finally:
        retriever.close()
    return finish_run(out, trainer.iteration, final)


def default_sink(cfg: ExperimentConfig, latest: Path | None) -> JsonlMetrics:
    """metrics.jsonl in the run folder; on resume, steps after the checkpoint are dropped."""
    return JsonlMetrics(Path(cfg.train.out_dir) / "metrics.jsonl",
                        resume_from_step=(ckpt.load_state(latest)["iteration"] + 1) if latest else None)


def finish_run(out: Path, iterations: int, final: dict[str, float]) -> dict[str, Any]:
    if final:
        (out / "final_metrics.json").write_text(json.dumps(final, indent=1))
    return {"iterations": iterations, "final": final, "out_dir": str(out)}
