"""Update performance: the trainer's policy update against a bare torch training step.

A: `RLTrainer.update(batch)`, the real code path (PPO epochs over shuffled minibatches: forward
   with per-token log-probs and entropy, the clipped policy loss over the action mask, backward,
   gradient clipping, AdamW step), on a batch that `RLTrainer.rollout` + `prepare` produced.
B: a bare loop over the same minibatches and epochs: forward, masked token NLL, backward, AdamW step.
Throughput = epochs x attention-mask tokens / wall second (the trainer's `update_tokens_per_s`);
ratio = A / B per repeat (A and B alternated).

    .venv/bin/python -m benchmarks.perf_update [--full] [--device cuda]

Writes benchmarks/results/perf_update.json (or perf_update_cuda.json).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.perf_common import (
    add_common_args,
    alternate,
    bench_cfg,
    device_overrides,
    policy,
    ratio_summary,
    sft_steps,
    summary,
    write_result,
)


def prepared_batch(args: argparse.Namespace) -> tuple[Any, Any, Any, dict, Any]:
    """(config, trainer, model, its description, batch): a batch that `rollout` + `prepare` produced."""
    from agent_r1.runs.run import Run
    from agent_r1.training import trainer as trainer_mod

    cfg = bench_cfg(args, device_overrides(args.device))
    run = Run(cfg)  # data, index and the retriever, built once
    retriever = run.retriever
    model, tok, model_desc = policy(cfg, args.device, sft_steps(args),
                                    dtype="bfloat16" if args.device.startswith("cuda") else "float32")
    trainer = trainer_mod.RLTrainer(cfg, model, tok, run.env_factory,
                                    run.samples("train"))
    batch = trainer.prepare(trainer.rollout())
    retriever.close()
    return cfg, trainer, model, model_desc, batch


def bare_update(model: Any, batch: dict, t: Any, device: str):
    """B: a bare loop over the same minibatches and epochs (forward, masked NLL, backward, AdamW)."""
    import torch

    # the trainer moves each micro-batch itself; the bare baseline gets the batch on the device
    dev_batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    n = batch["input_ids"].shape[0]
    bare_opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)

    def bare(r: int) -> None:
        model.train()
        gen = torch.Generator().manual_seed(r)
        for _ in range(t.ppo_epochs):
            order = torch.randperm(n, generator=gen)
            for start in range(0, n, t.minibatch_size):
                idx = order[start:start + t.minibatch_size]
                ids, attn, mask = (dev_batch[k][idx.to(device)] for k in ("input_ids", "attention_mask", "loss_mask"))
                logits = model(input_ids=ids, attention_mask=attn.long()).logits[:, :-1].float()
                nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
                loss = (nll * mask[:, 1:]).sum() / mask[:, 1:].sum().clamp(min=1)
                bare_opt.zero_grad(set_to_none=True)
                loss.backward()
                bare_opt.step()

    return bare


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    repeats = args.repeats or (1 if args.smoke else 9 if args.full else 5)
    cuda = args.device.startswith("cuda")
    cfg, trainer, model, model_desc, batch = prepared_batch(args)
    t = cfg.train
    n, width = batch["input_ids"].shape
    tokens = t.ppo_epochs * int(batch["attention_mask"].sum())
    bare = bare_update(model, batch, t, args.device)
    sync = torch.cuda.synchronize if cuda else None
    trainer.update(batch)  # warm-up
    bare(0)
    timed = alternate({"trainer_update": lambda r: trainer.update(batch), "bare_torch": bare}, repeats, sync)
    secs = {k: [s for s, _ in v] for k, v in timed.items()}
    tps = {k: [tokens / s for s in v] for k, v in secs.items()}
    results: dict[str, Any] = {
        "config": {"algo": vars(cfg.algo), "ppo_epochs": t.ppo_epochs, "minibatch_size": t.minibatch_size,
                   "batch_trajectories": n, "batch_width": width, "tokens_per_update": tokens,
                   "action_tokens": int(batch["action_mask"].sum()), "repeats": repeats, "threads": args.threads,
                   "device": args.device, "model": model_desc},
        "seconds": {k: summary(v) for k, v in secs.items()},
        "tokens_per_s": {k: summary(v, 1) for k, v in tps.items()},
        "trainer_over_bare": ratio_summary(tps["trainer_update"], tps["bare_torch"]),
        "target": ">= 0.85",
    }
    print("trainer/bare:", results["trainer_over_bare"]["median"], flush=True)
    write_result("perf_update" + ("_cuda" if cuda else ""), results, args.device)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
