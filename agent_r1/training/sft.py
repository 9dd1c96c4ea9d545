"""Supervised warm start on demonstration trajectories, with the rollout's action mask."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import torch

from agent_r1.algos import masked_mean
from agent_r1.config import ExperimentConfig
from agent_r1.trajectory import Trajectory, collate
from agent_r1.training.metrics_log import JsonlMetrics
from agent_r1.training.policy import token_logprobs


def sft_train(model: Any, tokenizer: Any, demos: list[Trajectory], steps: int, batch_size: int, lr: float,
              seed: int, metrics: JsonlMetrics | None = None, log_every: int = 50) -> list[float]:
    """Minimises the token-mean NLL of action tokens; returns the loss per step."""
    if not demos:
        raise ValueError("no demonstrations to train on")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.1, 1 - s / max(steps, 1)))
    model.train()
    losses = []
    start, tokens = time.perf_counter(), 0
    for step in range(steps):
        batch = collate(rng.sample(demos, min(batch_size, len(demos))), tokenizer.pad_token_id)
        # log-probs of the demo's action tokens only: the output head never runs over prompt or
        # observation positions (with a 151,936-token vocabulary that is most of the memory)
        logp, _ = token_logprobs(model, batch["input_ids"], batch["attention_mask"], positions=batch["action_mask"])
        loss = -masked_mean(logp, batch["action_mask"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        tokens += int(batch["attention_mask"].sum())
        if metrics is not None and (step % log_every == 0 or step == steps - 1):
            metrics.log(step, {"sft/loss": losses[-1], "sft/tokens_per_s": tokens / (time.perf_counter() - start)})
    model.eval()
    return losses


def run_sft(cfg: ExperimentConfig) -> Path:
    """`agent-r1 sft`: data -> index -> fresh model -> demos -> SFT -> `cfg.sft.out_dir/model`."""
    from agent_r1.models.build import save_model
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.training.demos import build_demos
    from agent_r1.training.setup import (build_policy, ensure_data, ensure_index, load_samples, make_env_factory,
                                         open_run_index, set_threads)

    set_threads(cfg.train.threads)
    data_dir = ensure_data(cfg)
    retriever = open_run_index(cfg, ensure_index(cfg, data_dir))
    model, tokenizer = build_policy(cfg, data_dir)
    samples = load_samples(data_dir / cfg.data.train_file, cfg=cfg)
    demos = build_demos(samples, make_env_factory(cfg, retriever), ChatCodec(tokenizer), cfg.env.format,
                        cfg.sft.guess_fraction, cfg.seed, cfg.rollout.max_observation_tokens)
    out = Path(cfg.sft.out_dir)
    losses = sft_train(model, tokenizer, demos, cfg.sft.steps, cfg.sft.batch_size, cfg.sft.lr, cfg.seed,
                       JsonlMetrics(out / "metrics.jsonl"), cfg.sft.log_every)
    save_model(model, tokenizer, out / "model")
    retriever.close()
    print(f"SFT: {len(demos)} demos, {cfg.sft.steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
          f"model saved to {out / 'model'}")
    return out / "model"
