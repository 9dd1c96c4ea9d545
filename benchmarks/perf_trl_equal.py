"""perf_trl.py's equal-work mode: agent-r1 against TRL's GRPOTrainer with every completion exactly
`tokens` long, at each (completions per iteration, tokens per completion) cell.

Equal work, checked on every run (a run that breaks it raises, naming the side):
- lengths: TRL gets `generation_kwargs={"min_new_tokens": N}` with `max_completion_length = N`
  (transformers masks the stop ids out until N tokens exist, so no completion ends early);
  agent-r1's engine gets `ignore_stops` (stop ids and strings are sampled but end nothing), one
  turn of `max_tokens_per_turn = N`, and `rollout.mask_truncated_turns: false` (every completion
  is cut at N; masking cut calls would train on fewer tokens than TRL). Both sides' token counts
  (prompt + completion) are recorded and must agree.
- the same warm-started model, prompts (agent-r1's rendered prompt text for both), group size
  (`rollout.n_samples`), temperature 1, no KL, learning rate, clipping, precision (fp32 on CPU; TRL's
  defaults bf16 and gradient checkpointing are turned off, as agent-r1 runs without either),
  `train.ppo_epochs` full-batch optimiser steps per iteration (TRL `num_iterations`), and the same
  micro-batch: agent-r1 `train.micro_batch_size = m`, TRL `per_device_train_batch_size = m` with
  `gradient_accumulation_steps = steps_per_generation = completions / m` (its old log-prob pass
  also runs m rows at a time). Both generate all completions of an iteration in one batch.

Per iteration, per side: `generate_s` (agent-r1: every `engine.generate` call; TRL: every
`_generate_single_turn` call, i.e. `model.generate`) and `update_s` = the rest of the iteration
(rewards, old log-probs, advantages, the optimiser steps). Generation tokens/s = completions x N /
generate_s; update tokens/s = ppo_epochs x (prompt + completion tokens) / update_s. The sides run
alternated (A B, B A, ...); ratios are per repeat, then the median; the load average is recorded
with every run.

Two more sides run in the `--skip-cells`, reported apart from the equal-work ratio:
`agent_r1_skip`, agent-r1 with `algo.skip_zero_advantage: true` (groups whose advantages are all
zero skip their forward/backward), a saving TRL does not make, with the share of rows it skipped;
and `floor` (perf_floor.py), the same work done by the bare transformers model both sides call,
with nothing around it: `floor / TRL` is the least ratio a framework could reach on this work
with this model's own kernels.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from typing import Any

from benchmarks.common import loadavg
from benchmarks.perf_common import alternate, perf_work, ratio_summary, summary, time_generate
from benchmarks.perf_floor import floor_side

# where the two sides' work is the same but done differently (what the ratio is made of)
NOTES = [
    "same tokens, model, optimiser steps and precision on both sides; each side's own implementation",
    ("agent-r1 takes the old log-probs from the first optimiser step's own forward (one mini-batch per epoch); "
    "TRL runs a separate no-grad pass whenever num_iterations > 1"),
    ("generation: agent-r1 writes the KV cache into preallocated buffers and draws tokens by inverse CDF; "
    "TRL's transformers generate() concatenates the cache every token and draws with torch.multinomial"),
    ("TRL's loss computes log-probs with its chunked fused head kernel; agent-r1 applies the head to the "
    "completion positions only, in chunks"),
]


def run_equal_work(cfg: Any, base_model: Any, tok: Any, all_samples: list[dict], reward_fn: Any, args: Any,
                   torch: Any, cells: list[tuple[int, int]], micro: int, repeats: int,
                   skip_cells: set[tuple[int, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {"micro_batch_size": micro, "cells": {}, "notes": NOTES}
    for completions, tokens in cells:
        key = f"{completions}x{tokens}"
        print(f"equal_work {key}: start, load {loadavg()}", flush=True)
        out["cells"][key] = _cell(cfg, base_model, tok, all_samples, reward_fn, args, torch, completions, tokens,
                                  micro, repeats, (completions, tokens) in skip_cells)
        cell = out["cells"][key]
        print(f"equal_work {key}: ratio {cell['ratio_agent_r1_over_trl']['median']} "
              f"({cell['ratio_agent_r1_over_trl']['runs']})", flush=True)
    return out


def _cell(cfg: Any, base_model: Any, tok: Any, all_samples: list[dict], reward_fn: Any, args: Any, torch: Any,
          completions: int, tokens: int, micro: int, repeats: int, with_skip: bool) -> dict[str, Any]:
    cell = Cell(cfg, base_model, tok, all_samples, reward_fn, args, torch, completions, tokens, micro)
    sides = {"agent_r1": cell.agent_r1, "trl": cell.trl}
    if with_skip:
        sides["agent_r1_skip"] = lambda r: cell.agent_r1(r, skip=True)
        sides["floor"] = cell.floor
    for fn in sides.values():  # warm-up: first-call imports and allocations of every side
        fn(1000)
    timed_runs = alternate(sides, repeats)
    cell.run.close()
    runs = {name: [v for _, v in vals] for name, vals in timed_runs.items()}
    for name, vals in runs.items():
        print(f"  {name}: " + ", ".join(f"{v['seconds']:.1f}s (gen {v['generate_s']:.1f}, load {v['load'][0]})"
                                         for v in vals), flush=True)
    return cell.report(runs, with_skip)


def timed_grpo_class() -> Any:
    """TRL's GRPOTrainer, timing every `_generate_single_turn` call (i.e. `model.generate`)."""
    from trl import GRPOTrainer

    class TimedGRPO(GRPOTrainer):
        gen_s = 0.0

        def _generate_single_turn(self, *a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return super()._generate_single_turn(*a, **k)
            finally:
                TimedGRPO.gen_s += time.perf_counter() - t0

    return TimedGRPO


class Cell:
    """One (completions, tokens) cell: the shared prompts and config, then one method per side."""

    def __init__(self, cfg: Any, base_model: Any, tok: Any, all_samples: list[dict], reward_fn: Any, args: Any,
                 torch: Any, completions: int, tokens: int, micro: int):
        from datasets import Dataset

        from agent_r1.rollout.chat import ChatCodec
        from agent_r1.runs.run import Run

        group = cfg.rollout.n_samples
        if completions % group or completions % micro:
            raise ValueError(f"{completions} completions: not a multiple of the group size {group} and "
                             f"micro-batch {micro}")
        self.cfg, self.base_model, self.tok, self.reward_fn, self.args, self.torch = \
            cfg, base_model, tok, reward_fn, args, torch
        self.completions, self.tokens, self.micro, self.group = completions, tokens, micro, group
        self.samples = samples = all_samples[: completions // group]
        codec = ChatCodec(tok)
        self.rcfg = replace(cfg, rollout=replace(cfg.rollout, max_turns=1, max_tokens_per_turn=tokens,
                                                 max_total_tokens=max(cfg.rollout.max_total_tokens, 4096),
                                                 mask_truncated_turns=False),
                            train=replace(cfg.train, prompts_per_iter=len(samples), minibatch_size=completions,
                                          micro_batch_size=micro, iterations=1, threads=args.threads))
        self.run = Run(self.rcfg)  # its retriever and env factory (closed by _cell)
        self.retriever = self.run.retriever
        self.make_env = self.run.env_factory
        self.prompt_ids = [codec.prompt_ids(self.make_env(s).reset(s)) for s in samples]
        self.dataset = Dataset.from_list([{"prompt": codec.decode(p), "answers": s["answers"]}
                                          for p, s in zip(self.prompt_ids, samples)])
        # every iteration trains on prompt + completion tokens of all completions (checked on both sides)
        self.batch_tokens = group * sum(len(p) for p in self.prompt_ids) + completions * tokens
        fmt = self.make_env(samples[0]).fmt
        self.stop_ids = [tok.eos_token_id] + [ids[0] for ids in (codec.encode(x) for x in fmt.stop_strings)
                                              if len(ids) == 1]

    def agent_r1(self, r: int, skip: bool = False, engine: Any = None) -> dict[str, Any]:
        """One GRPO iteration; `engine`: a shared engine that holds its own weights (perf_vllm.py's
        vLLM), given this repeat's fresh copy of the weights by the iteration's own sync."""
        from agent_r1.rollout.engines import EngineWeights
        from agent_r1.training.trainer import RLTrainer

        c = replace(self.rcfg, seed=r, algo=replace(self.rcfg.algo, skip_zero_advantage=skip))
        trainer = RLTrainer(c, copy.deepcopy(self.base_model), self.tok, self.make_env, self.samples)
        if engine is not None:
            trainer.engine, trainer.engine_weights = engine, EngineWeights(engine, trainer.model)
        trainer.engine.ignore_stops = True
        gen = time_generate(trainer.engine)
        load = loadavg()
        t0 = time.perf_counter()
        try:
            m = trainer.train_step()
        finally:
            del trainer.engine.generate  # time_generate's wrapper: a shared engine is timed afresh next repeat
        total = time.perf_counter() - t0
        seen = sum(len(t.token_ids) for t in trainer.last_trajectories)
        lengths = {len(t.turns[0].action_ids) for t in trainer.last_trajectories}
        if lengths != {self.tokens} or seen != self.batch_tokens:
            raise RuntimeError(f"agent-r1 did not do the equal work: completion lengths {sorted(lengths)} "
                               f"(want {self.tokens}), {seen} tokens (want {self.batch_tokens})")
        return {"seconds": total, "generate_s": gen[0], "update_s": total - gen[0], "load": load,
                "reward_mean": m["reward_mean"], "skipped_rows_fraction": m.get("skipped_rows_fraction", 0.0),
                "sync_s": trainer.engine_weights.last_sync_s}

    def trl_config(self, r: int, **extra: Any) -> Any:
        """`extra`: more GRPOConfig keys (perf_vllm.py's TRL vLLM mode, whose generation_kwargs are vLLM's)."""
        generation_kwargs = extra.pop("generation_kwargs", {"min_new_tokens": self.tokens})
        from trl import GRPOConfig

        cfg, steps = self.cfg, self.completions // self.micro
        return GRPOConfig(
            # TRL defaults to bf16 and gradient checkpointing; agent-r1 runs fp32 without recomputation here
            output_dir=str(perf_work() / "trl_out"), use_cpu=True, bf16=False, gradient_checkpointing=False,
            per_device_train_batch_size=self.micro, gradient_accumulation_steps=steps, steps_per_generation=steps,
            num_generations=self.group, num_iterations=cfg.train.ppo_epochs, max_steps=cfg.train.ppo_epochs,
            max_completion_length=self.tokens, generation_kwargs=generation_kwargs,
            temperature=cfg.rollout.temperature, top_k=0, beta=0.0, learning_rate=cfg.train.lr,
            weight_decay=cfg.train.weight_decay, max_grad_norm=cfg.train.max_grad_norm, lr_scheduler_type="constant",
            warmup_steps=0, logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True, seed=r,
            dataloader_num_workers=0, **extra)

    def trl(self, r: int, **extra: Any) -> dict[str, Any]:
        model = copy.deepcopy(self.base_model)
        model.generation_config.eos_token_id = self.stop_ids
        timed = timed_grpo_class()
        trainer = timed(model=model, reward_funcs=self.reward_fn, args=self.trl_config(r, **extra),
                        train_dataset=self.dataset, processing_class=self.tok)
        self.torch.set_num_threads(self.args.threads)  # accelerate may change it
        load = loadavg()
        t0 = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - t0
        logs = [h for h in trainer.state.log_history if "completions/min_length" in h]
        lo, hi = min(h["completions/min_length"] for h in logs), max(h["completions/max_length"] for h in logs)
        seen = trainer.state.num_input_tokens_seen
        if (lo, hi) != (self.tokens, self.tokens) or seen != self.batch_tokens:
            raise RuntimeError(f"TRL did not do the equal work: completion lengths {lo}..{hi} (want {self.tokens}), "
                               f"{seen} tokens (want {self.batch_tokens})")
        return {"seconds": total, "generate_s": timed.gen_s, "update_s": total - timed.gen_s, "load": load,
                "reward_mean": logs[0].get("reward", float("nan"))}

    def floor(self, r: int) -> dict[str, Any]:
        cfg = self.cfg
        self.torch.manual_seed(r)
        load = loadavg()
        out = floor_side(copy.deepcopy(self.base_model), self.prompt_ids, self.group, self.tokens, self.micro,
                         cfg.train.ppo_epochs, cfg.train.lr, self.tok.pad_token_id, cfg.train.max_grad_norm)
        return {**out, "load": load}

    def side(self, vals: list[dict[str, Any]]) -> dict[str, Any]:
        work = self.completions * self.tokens
        return {"seconds_per_iteration": summary([v["seconds"] for v in vals]),
                "generate_s": summary([v["generate_s"] for v in vals]),
                "update_s": summary([v["update_s"] for v in vals]),
                "generation_tokens_per_s": summary([work / v["generate_s"] for v in vals], 1),
                "update_tokens_per_s": summary([self.cfg.train.ppo_epochs * self.batch_tokens / v["update_s"]
                                                for v in vals], 1),
                "runs": vals}

    def report(self, runs: dict[str, list[dict[str, Any]]], with_skip: bool) -> dict[str, Any]:
        a, t = runs["agent_r1"], runs["trl"]
        cell: dict[str, Any] = {
            "completions": self.completions, "tokens_per_completion": self.tokens, "prompts": len(self.samples),
            "group_size": self.group, "batch_tokens": self.batch_tokens, "optimizer_steps": self.cfg.train.ppo_epochs,
            "micro_batch_size": self.micro, "agent_r1": self.side(a), "trl": self.side(t),
            "ratio_agent_r1_over_trl": ratio_summary([x["seconds"] for x in a], [x["seconds"] for x in t]),
            "ratio_generate": ratio_summary([x["generate_s"] for x in a], [x["generate_s"] for x in t]),
            "ratio_update": ratio_summary([x["update_s"] for x in a], [x["update_s"] for x in t])}
        if with_skip:
            s = runs["agent_r1_skip"]
            cell["agent_r1_skip_zero_advantage"] = {
                **self.side(s), "skipped_rows_fraction": summary([v["skipped_rows_fraction"] for v in s], 3),
                "ratio_over_trl": ratio_summary([x["seconds"] for x in s], [x["seconds"] for x in t]),
                "note": "not equal work: rows of groups whose advantages are all 0 skip forward/backward"}
            f = runs["floor"]
            cell["floor"] = {
                **self.side(f), "ratio_over_trl": ratio_summary([x["seconds"] for x in f], [x["seconds"] for x in t]),
                "ratio_agent_r1_over_floor": ratio_summary([x["seconds"] for x in a], [x["seconds"] for x in f]),
                "note": "the same work by the bare model (perf_floor.py): no framework, no sampling, no old "
                        "log-probs; floor / TRL is the least ratio a framework could reach with these kernels"}
        return cell
