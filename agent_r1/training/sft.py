"""Supervised warm start on demonstration trajectories, with the rollout's action mask.

`sft_train` is the algorithm; `agent_r1/runs/warm_start.py` assembles a run of it (data, demos, model)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import torch

from agent_r1.algos import masked_mean
from agent_r1.tracking.metrics import JsonlMetrics
from agent_r1.training.compute import token_logprobs
from agent_r1.trajectory import Trajectory, collate

StepCallback = Callable[[int, dict[str, float]], None]


def sft_train(model: Any, tokenizer: Any, demos: list[Trajectory], steps: int, batch_size: int, lr: float,
              seed: int, metrics: JsonlMetrics | None = None, log_every: int = 50,
              on_step: StepCallback | None = None) -> list[float]:
    """Minimises the token-mean NLL of action tokens; returns the loss per step.

    `on_step(step, values)` is called at the metrics' cadence (step 0, every `log_every` steps, the
    last step) with `sft/loss` (that step's), `sft/tokens_per_s`, `elapsed_s` and `eta_s` (seconds;
    0 at the last step); `print_progress(steps)` is a ready one for the terminal."""
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
        if step % log_every == 0 or step == steps - 1:
            elapsed = time.perf_counter() - start
            logged = {"sft/loss": losses[-1], "sft/tokens_per_s": tokens / elapsed}
            if metrics is not None:
                metrics.log(step, logged)
            if on_step is not None:
                # the mean time per step so far, times the steps left: the warm-up steps cost about the same
                on_step(step, {**logged, "elapsed_s": elapsed, "eta_s": elapsed / (step + 1) * (steps - step - 1)})
    model.eval()
    return losses


def _duration(seconds: float) -> str:
    """52s, 2m01s, 1h05m: short enough for a progress line."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def print_progress(total: int) -> StepCallback:
    """An `on_step` that prints one line per call (the step shown is steps done, so the last reads
    500/500), e.g.
    `sft step 150/500 loss 1.234 tok/s 5,432 elapsed 52s left ~2m01s`; flushed, so it shows as it
    happens under `dvc repro` and in Prefect's captured logs (both read a pipe, which Python buffers)."""
    width = len(str(total))

    def show(step: int, values: dict[str, float]) -> None:
        print(f"sft step {step + 1:>{width}}/{total} loss {values['sft/loss']:.3f} "
              f"tok/s {values['sft/tokens_per_s']:,.0f} elapsed {_duration(values['elapsed_s'])} "
              f"left ~{_duration(values['eta_s'])}", flush=True)

    return show
