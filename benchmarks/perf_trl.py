"""agent-r1 against TRL's GRPOTrainer: seconds per RL iteration on the same work, sides alternated.

Both sides train a fresh copy of the same warm-started model with GRPO on the same prompts (the run's
first training questions, rendered by agent-r1's env through the same chat template), group size
`rollout.n_samples`, temperature 1, no KL term, the same learning rate, weight decay, gradient clipping
and micro-batch (agent-r1 `train.micro_batch_size = m`, TRL `per_device_train_batch_size = m` with
`gradient_accumulation_steps = steps_per_generation = completions / m`), fp32 (TRL's default bf16 and
gradient checkpointing are turned off), and `train.ppo_epochs` full-batch optimiser steps per iteration
(TRL `num_iterations` = epochs). Ratio = agent-r1 seconds per iteration / TRL's, per repeat (A B, then
B A, ...), then the median; the load average is recorded with every run.

- equal_work (here): one turn, every completion exactly N tokens on both sides, checked on every run (a
  run that breaks it raises, naming the side): TRL gets `generation_kwargs={"min_new_tokens": N}` with
  `max_completion_length = N`; agent-r1's engine `ignore_stops` (stop ids are sampled but end nothing),
  `max_tokens_per_turn = N` and `rollout.mask_truncated_turns: false`; both sides' token counts must
  agree. Per cell (`--cells`: completions per iteration x N) and side: `generate_s` (agent-r1's
  `engine.generate` calls, TRL's `_generate_single_turn`) and `update_s` (the rest: rewards, old
  log-probs, advantages, optimiser steps); generation tokens/s = completions x N / generate_s, update
  tokens/s = ppo_epochs x (prompt + completion tokens) / update_s. In the `--skip-cells` two more sides,
  reported apart: agent-r1 with `algo.skip_zero_advantage` (a saving TRL does not make: not equal work),
  and the floor (`floor_side`): the same work by the bare model with nothing around it, so `floor / TRL`
  is the least ratio a framework could reach with this model's own kernels.
- tool (perf_trl_tool.py): agent-r1's multi-turn search env in the hermes format against TRL's `tools=`
  loop over the same tantivy index, with token-identical prompts and glue and a warm start that calls
  the tool alike in both loops (checked before timing).

Modes (and equal_work cells) not run keep their earlier entry in the JSON; each records its own commit
and load average.

    .venv/bin/python -m benchmarks.perf_trl [--full] [--modes equal_work,tool] [--cells 128x256] [--repeats 5]

Quick by default (cells 32x64 and 128x256, 2 repeats); --full: all four cells, 5 repeats, 2 iterations per
tool run. The committed figures: `--cells 32x64,32x256,128x64,128x256 --repeats 3`, then
`--modes equal_work --cells 128x256 --repeats 5`.

Needs the `bench` extra (`pip install -e '.[bench]'`: trl). Writes benchmarks/results/perf_trl.json.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import re
import time
import traceback
from dataclasses import replace
from typing import Any

from benchmarks.common import git_commit, loadavg, result_path
from benchmarks.perf_common import (
    add_common_args,
    alternate,
    bench_cfg,
    hermes_policy,
    perf_work,
    policy,
    ratio_summary,
    sft_steps,
    summary,
    time_generate,
    write_result,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
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


# --- what both modes share ------------------------------------------------------------------------

def trl_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("trl")
    except Exception:  # noqa: BLE001
        return None


def make_reward(exact_match: Any) -> Any:
    """TRL's reward function: exact match of the last <answer>...</answer> (agent-r1's outcome reward)."""

    def reward(completions, answers, **kwargs):
        out = []
        for c, gold in zip(completions, answers):
            text = c if isinstance(c, str) else " ".join(str(m.get("content", "")) for m in c)
            found = ANSWER.findall(text)
            out.append(float(bool(found) and exact_match(found[-1].strip(), gold)))
        return out

    return reward


def stop_ids(tok: Any, codec: Any, fmt: Any) -> list[int]:
    """The end-of-text id and every single-token stop string of the env's format."""
    return [tok.eos_token_id] + [ids[0] for ids in (codec.encode(x) for x in fmt.stop_strings) if len(ids) == 1]


def grpo_config(cfg: Any, r: int, micro: int, completions: int, max_steps: int, **extra: Any) -> Any:
    """TRL's GRPOConfig for the shared settings above; `extra`: the mode's own keys."""
    from trl import GRPOConfig

    steps = completions // micro
    return GRPOConfig(
        # TRL defaults to bf16 and gradient checkpointing; agent-r1 runs fp32 without recomputation here
        output_dir=str(perf_work() / "trl_out"), use_cpu=True, bf16=False, gradient_checkpointing=False,
        per_device_train_batch_size=micro, gradient_accumulation_steps=steps, steps_per_generation=steps,
        num_generations=cfg.rollout.n_samples, num_iterations=cfg.train.ppo_epochs, max_steps=max_steps,
        temperature=cfg.rollout.temperature, top_k=0, beta=0.0, learning_rate=cfg.train.lr,
        weight_decay=cfg.train.weight_decay, max_grad_norm=cfg.train.max_grad_norm, lr_scheduler_type="constant",
        warmup_steps=0, logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True, seed=r,
        dataloader_num_workers=0, **extra)


def timed_grpo_class() -> Any:
    """TRL's GRPOTrainer, adding up the seconds of every `_generate_single_turn` call (`model.generate`)."""
    from trl import GRPOTrainer

    class TimedGRPO(GRPOTrainer):
        gen_s = 0.0

        def _generate_single_turn(self, *a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return super()._generate_single_turn(*a, **k)
            finally:
                type(self).gen_s += time.perf_counter() - t0

    return TimedGRPO


def side_summary(vals: list[dict[str, Any]], sampled_tokens: float, update_tokens: float) -> dict[str, Any]:
    """A side's medians over repeats: seconds, generation tokens/s, update tokens/s (per iteration)."""
    return {"seconds_per_iteration": summary([v["seconds"] for v in vals]),
            "generate_s": summary([v["generate_s"] for v in vals]),
            "generation_tokens_per_s": summary([sampled_tokens / v["generate_s"] for v in vals], 1),
            "update_tokens_per_s": summary([update_tokens / (v["seconds"] - v["generate_s"]) for v in vals], 1)}


def seconds_ratio(a: list[dict[str, Any]], b: list[dict[str, Any]], key: str = "seconds") -> dict[str, Any]:
    return ratio_summary([x[key] for x in a], [x[key] for x in b])


# --- equal work -----------------------------------------------------------------------------------

def run_equal_work(cfg: Any, base_model: Any, tok: Any, all_samples: list[dict], reward_fn: Any, args: Any,
                   cells: list[tuple[int, int]], skip_cells: set[tuple[int, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {"micro_batch_size": args.micro, "cells": {}, "notes": NOTES}
    for completions, tokens in cells:
        key = f"{completions}x{tokens}"
        print(f"equal_work {key}: start, load {loadavg()}", flush=True)
        cell = Cell(cfg, base_model, tok, all_samples, reward_fn, args, completions, tokens)
        with_skip = (completions, tokens) in skip_cells
        sides = {"agent_r1": cell.agent_r1, "trl": cell.trl}
        if with_skip:
            sides["agent_r1_skip"] = lambda r: cell.agent_r1(r, skip=True)
            sides["floor"] = cell.floor
        for fn in sides.values():  # warm-up: first-call imports and allocations of every side
            fn(1000)
        runs = {name: [v for _, v in vals] for name, vals in alternate(sides, args.repeats).items()}
        cell.run.close()
        for name, vals in runs.items():
            print(f"  {name}: " + ", ".join(f"{v['seconds']:.1f}s (gen {v['generate_s']:.1f}, load {v['load'][0]})"
                                             for v in vals), flush=True)
        out["cells"][key] = cell.report(runs, with_skip)
        ratio = out["cells"][key]["ratio_agent_r1_over_trl"]
        print(f"equal_work {key}: ratio {ratio['median']} ({ratio['runs']})", flush=True)
    return out


class Cell:
    """One (completions, tokens) cell: the shared prompts and config, then one method per side."""

    def __init__(self, cfg: Any, base_model: Any, tok: Any, all_samples: list[dict], reward_fn: Any, args: Any,
                 completions: int, tokens: int):
        from datasets import Dataset

        from agent_r1.rollout.chat import ChatCodec
        from agent_r1.runs.run import Run

        group, micro = cfg.rollout.n_samples, args.micro
        if completions % group or completions % micro:
            raise ValueError(f"{completions} completions: not a multiple of the group size {group} and "
                             f"micro-batch {micro}")
        self.cfg, self.base_model, self.tok, self.reward_fn, self.args = cfg, base_model, tok, reward_fn, args
        self.completions, self.tokens, self.micro, self.group = completions, tokens, micro, group
        self.samples = samples = all_samples[: completions // group]
        codec = ChatCodec(tok)
        self.rcfg = replace(cfg, rollout=replace(cfg.rollout, max_turns=1, max_tokens_per_turn=tokens,
                                                 max_total_tokens=max(cfg.rollout.max_total_tokens, 4096),
                                                 mask_truncated_turns=False),
                            train=replace(cfg.train, prompts_per_iter=len(samples), minibatch_size=completions,
                                          micro_batch_size=micro, iterations=1, threads=args.threads))
        self.run = Run(self.rcfg)  # its retriever and env factory (closed by run_equal_work)
        self.make_env = self.run.env_factory
        self.prompt_ids = [codec.prompt_ids(self.make_env(s).reset(s)) for s in samples]
        self.dataset = Dataset.from_list([{"prompt": codec.decode(p), "answers": s["answers"]}
                                          for p, s in zip(self.prompt_ids, samples)])
        # every iteration trains on prompt + completion tokens of all completions (checked on both sides)
        self.batch_tokens = group * sum(len(p) for p in self.prompt_ids) + completions * tokens
        self.stop_ids = stop_ids(tok, codec, self.make_env(samples[0]).fmt)

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

    def trl(self, r: int, **extra: Any) -> dict[str, Any]:
        """One TRL iteration; `extra`: more GRPOConfig keys (perf_vllm.py's TRL vLLM mode, whose
        generation_kwargs are vLLM's)."""
        import torch

        model = copy.deepcopy(self.base_model)
        model.generation_config.eos_token_id = self.stop_ids
        timed = timed_grpo_class()
        extra.setdefault("generation_kwargs", {"min_new_tokens": self.tokens})
        args = grpo_config(self.cfg, r, self.micro, self.completions, self.cfg.train.ppo_epochs,
                           max_completion_length=self.tokens, **extra)
        trainer = timed(model=model, reward_funcs=self.reward_fn, args=args, train_dataset=self.dataset,
                        processing_class=self.tok)
        torch.set_num_threads(self.args.threads)  # accelerate may change it
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
        import torch

        cfg = self.cfg
        torch.manual_seed(r)
        load = loadavg()
        out = floor_side(copy.deepcopy(self.base_model), self.prompt_ids, self.group, self.tokens, self.micro,
                         cfg.train.ppo_epochs, cfg.train.lr, self.tok.pad_token_id, cfg.train.max_grad_norm)
        return {**out, "load": load}

    def side(self, vals: list[dict[str, Any]]) -> dict[str, Any]:
        return {**side_summary(vals, self.completions * self.tokens, self.cfg.train.ppo_epochs * self.batch_tokens),
                "update_s": summary([v["update_s"] for v in vals]), "runs": vals}

    def report(self, runs: dict[str, list[dict[str, Any]]], with_skip: bool) -> dict[str, Any]:
        a, t = runs["agent_r1"], runs["trl"]
        cell: dict[str, Any] = {
            "completions": self.completions, "tokens_per_completion": self.tokens, "prompts": len(self.samples),
            "group_size": self.group, "batch_tokens": self.batch_tokens, "optimizer_steps": self.cfg.train.ppo_epochs,
            "micro_batch_size": self.micro, "agent_r1": self.side(a), "trl": self.side(t),
            "ratio_agent_r1_over_trl": seconds_ratio(a, t), "ratio_generate": seconds_ratio(a, t, "generate_s"),
            "ratio_update": seconds_ratio(a, t, "update_s")}
        if with_skip:
            s, f = runs["agent_r1_skip"], runs["floor"]
            cell["agent_r1_skip_zero_advantage"] = {
                **self.side(s), "skipped_rows_fraction": summary([v["skipped_rows_fraction"] for v in s], 3),
                "ratio_over_trl": seconds_ratio(s, t),
                "note": "not equal work: rows of groups whose advantages are all 0 skip forward/backward"}
            cell["floor"] = {
                **self.side(f), "ratio_over_trl": seconds_ratio(f, t), "ratio_agent_r1_over_floor": seconds_ratio(a, f),
                "note": "the same work by the bare model (perf_trl.floor_side): no framework, no sampling, no old "
                        "log-probs; floor / TRL is the least ratio a framework could reach with these kernels"}
        return cell


# --- the floor: the same work with the bare model and nothing around it ----------------------------

def floor_side(model: Any, prompt_ids: list[list[int]], group: int, tokens: int, micro: int, steps: int,
               lr: float, pad_id: int, max_grad_norm: float) -> dict[str, float]:
    """Seconds of the bare generate and update of one iteration; `model` is trained in place (the caller
    passes a fresh copy). Rows: each prompt `group` times, each completion `tokens` long. Generate: one
    left-padded prefill, then one forward per token over all rows with a KV cache written in place
    (agent-r1's `use_buffers`) and the arg-max token: no sampling, no stop checks, no per-row bookkeeping.
    Update: per optimiser step, every micro-batch runs the decoder, the LM head on the completion
    positions only, log-softmax, gather and one backward of a policy-gradient loss with random advantages;
    then clipping and one AdamW step: no old log-probs, no ratio, no metrics."""
    import torch

    ids, attn = left_padded([p for p in prompt_ids for _ in range(group)], pad_id)
    t0 = time.perf_counter()
    full, attn = bare_decode(model, ids, attn, tokens)
    generate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    bare_update(model, full, attn, tokens, micro, steps, torch.randn(len(full)), lr, max_grad_norm)
    update_s = time.perf_counter() - t0
    return {"seconds": generate_s + update_s, "generate_s": generate_s, "update_s": update_s}


def left_padded(prompts: list[list[int]], pad_id: int) -> tuple[Any, Any]:
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):], attn[b, width - len(p):] = torch.tensor(p), 1
    return ids, attn


def bare_decode(model: Any, ids: Any, attn: Any, tokens: int) -> tuple[Any, Any]:
    """(prompt + `tokens` greedy ids, their attention mask): a prefill, then one forward per token."""
    import torch

    from agent_r1.rollout.engine import cache_keyword, use_buffers

    kw, width = cache_keyword(), ids.shape[1]
    model.eval()
    with torch.no_grad():
        step_in, cache, sampled = ids, None, []
        for i in range(tokens):
            pos = (attn.cumsum(-1) - 1).clamp(min=0)[:, -step_in.shape[1]:]
            out = model(input_ids=step_in, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1,
                        **{kw: cache})
            cache = getattr(out, kw)
            if i == 0:
                use_buffers(cache, width + tokens)
            step_in = out.logits[:, -1].argmax(-1, keepdim=True)
            sampled.append(step_in)
            attn = torch.cat([attn, torch.ones_like(step_in)], dim=1)
    return torch.cat([ids, *sampled], dim=1), attn


def bare_update(model: Any, full: Any, attn: Any, tokens: int, micro: int, steps: int, advantages: Any, lr: float,
                max_grad_norm: float) -> None:
    """`steps` AdamW steps of a policy-gradient loss on the last `tokens` ids of every row, `micro`
    rows per forward/backward, the LM head applied to the completion positions only."""
    import torch

    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        for lo in range(0, len(full), micro):
            rows = slice(lo, lo + micro)
            hidden = model.model(input_ids=full[rows], attention_mask=attn[rows],
                                 position_ids=positions[rows]).last_hidden_state
            logits = model.lm_head(hidden[:, -tokens - 1:-1])  # the positions that predict the completion
            logp = torch.log_softmax(logits.float(), -1).gather(-1, full[rows, -tokens:, None]).squeeze(-1)
            loss = -(logp.mean(-1) * advantages[rows]).sum() / len(full)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)


# --- the command ----------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> Any:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    ap.add_argument("--modes", default="equal_work,tool", help="equal_work, tool (comma-separated)")
    ap.add_argument("--cells", default=None, help="equal_work: completions per iteration x tokens per completion "
                    "(default 32x64,128x256; --full: 32x64,32x256,128x64,128x256)")
    ap.add_argument("--micro", type=int, default=8, help="rows per forward/backward, both sides")
    ap.add_argument("--skip-cells", default="128x256", help="equal_work cells that also run algo.skip_zero_advantage "
                    "and the floor")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (1 if args.smoke else 5 if args.full else 2)
    args.cells = args.cells or ("4x4" if args.smoke else "32x64,32x256,128x64,128x256" if args.full else "32x64,128x256")
    args.iterations = 2 if args.full else 1  # tool: RL iterations per timed run
    return args


def cells_of(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in c.split("x")) for c in text.split(",") if c]


def run_mode(mode: str, cfg: Any, samples: list[dict], reward: Any, args: Any, previous: dict) -> dict[str, Any]:
    """One mode's results (its sides, ratios, checks) and the policy's description."""
    if mode == "equal_work":
        model, tok, desc = policy(cfg, "cpu", sft_steps(args))
        out = run_equal_work(cfg, model, tok, samples, reward, args, cells_of(args.cells), set(cells_of(args.skip_cells)))
        out["cells"] = {**previous.get(mode, {}).get("cells", {}), **out["cells"]}  # cells not run keep their entry
    elif mode == "tool":
        from benchmarks.perf_trl_tool import run_tool, template_path

        model, tok, desc = hermes_policy(cfg, template_path().read_text(), sft_steps(args, 500),
                                         base_steps=sft_steps(args))
        out = run_tool(cfg, model, tok, samples[:16], reward, args)  # params.yaml's 16 prompts per iteration
    else:
        raise ValueError(f"unknown mode {mode!r}; choose equal_work or tool")
    return {"model": desc, **out}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if args.device != "cpu":  # `make bench DEVICE=cuda` runs every perf_* script: skip, do not fail
        print(f"perf_trl.py: --device {args.device} skipped; the comparison runs on the CPU (fp32, one thread a side)")
        return 0
    torch.set_num_threads(args.threads)
    cfg = bench_cfg(args)
    results: dict[str, Any] = {"trl": trl_version(), "modes": {}}
    if results["trl"] is None:
        results["error"] = "trl is not installed: pip install -e '.[bench]'"
        write_result("perf_trl", results, args.device)
        print(results["error"])
        return 1

    from agent_r1.rewards.qa import exact_match
    from agent_r1.runs.run import Run

    run = Run(cfg)
    run.index_dir  # built here, for the modes that search
    previous = result_path("perf_trl")
    if previous.exists():  # modes not run this time keep their last entry
        results["modes"] = json.loads(previous.read_text()).get("modes", {})
    for mode in args.modes.split(","):
        started = {"commit": git_commit(), "load_average_at_start": loadavg(), "threads": args.threads,
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        try:
            out = run_mode(mode, cfg, run.samples("train"), make_reward(exact_match), args, results["modes"])
            results["modes"][mode] = {"measured": {**started, "load_average_at_end": loadavg()}, **out}
            for cell in out.get("cells", {}).values():  # this run's cells: their own record
                cell.setdefault("measured", results["modes"][mode]["measured"])
        except Exception as exc:  # noqa: BLE001  (recorded in the JSON: which side failed and why)
            traceback.print_exc()
            results["modes"][mode] = {"measured": started, "error": f"{type(exc).__name__}: {exc}"}
        print(mode, {k: v for k, v in results["modes"][mode].items() if k in ("error", "ratio_agent_r1_over_trl")},
              flush=True)
    write_result("perf_trl", results, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
