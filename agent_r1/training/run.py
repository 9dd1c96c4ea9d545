"""`agent-r1 train`: builds every part from the config and runs the RL loop, resumably."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.training import checkpoint as ckpt
from agent_r1.training.metrics_log import JsonlMetrics


def run_train(cfg: ExperimentConfig, resume: bool = False, sink: Any = None, on_iteration: Any = None) -> dict[str, Any]:
    """Trains from `train.init_from` (or a fresh model); with `resume`, continues from the latest
    complete checkpoint in `train.out_dir`. Returns the final metrics."""
    from agent_r1.models.build import load_model, save_model
    from agent_r1.retrieval.base import open_index
    from agent_r1.training.setup import (build_policy, ensure_data, ensure_index, load_samples, make_env_factory,
                                         set_threads)
    from agent_r1.training.trainer import RLTrainer

    set_threads(cfg.train.threads)
    out = Path(cfg.train.out_dir)
    data_dir = ensure_data(cfg)
    retriever = open_index(ensure_index(cfg, data_dir))
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
    metrics_sink = sink or JsonlMetrics(out / "metrics.jsonl",
                                        resume_from_step=(ckpt.load_state(latest)["iteration"] + 1) if latest else None)
    trainer = RLTrainer(cfg, model, tokenizer, make_env_factory(cfg, retriever),
                        load_samples(data_dir / cfg.data.train_file),
                        load_samples(data_dir / cfg.data.eval_file, cfg.train.eval_size),
                        sink=metrics_sink, reference=reference)
    if latest is not None:
        trainer.load(latest)
        print(f"resumed from {latest} at iteration {trainer.iteration}")
    try:
        final = trainer.fit(on_iteration=on_iteration)
    finally:
        retriever.close()
    if final:
        (out / "final_metrics.json").write_text(json.dumps(final, indent=1))
    return {"iterations": trainer.iteration, "final": final, "out_dir": str(out)}
