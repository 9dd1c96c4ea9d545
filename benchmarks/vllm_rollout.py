"""vLLM's CPU build against the transformers engine on multi-turn agent rollouts with params.yaml's
budgets (turns, tokens per turn, observation tokens, group of 8, temperature 1): the synthetic world's
questions, the search tool over its tantivy index, the hermes tool-call format, a `--like qwen2.5`
policy (the real 151,936-token vocabulary; head_dim 64 as vLLM's CPU attention needs). Run it in
`.venv-vllm` (the main environment has no vLLM: `--engines transformers` runs the other half):

    .venv-vllm/bin/python benchmarks/vllm_rollout.py [--prompts 4] [--repeats 2]

Writes benchmarks/results/vllm_rollout.json. Not equal work: each engine samples its own trajectories
(a random policy's calls and answers end turns at different points), so the figure is sampled tokens
per second of rollout wall time, with the tokens, turns and tool calls each engine did beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from benchmarks.common import ROOT, machine, result_path, work_dir, write_json


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=4, help="questions per rollout (x rollout.n_samples trajectories)")
    ap.add_argument("--repeats", type=int, default=2, help="timed rollouts per engine (each with its own seed)")
    ap.add_argument("--engines", default="vllm,transformers")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="a 60-person world, 2 turns of 8 tokens (the smoke test)")
    return ap.parse_args(argv)


def run_config(args: argparse.Namespace) -> Any:
    """params.yaml's rollout budgets, the hermes format (the Qwen template), data in the work folder."""
    from agent_r1.config import load_config

    work = work_dir("vllm_rollout")
    overrides = {"env.format": "hermes", "data.dir": str(work / "data"), "search.index_dir": str(work / "index"),
                 "train.runs_dir": str(work / "runs"), "train.device": "cpu"}
    if args.smoke:
        overrides.update({"data.n_people": 60, "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8,
                          "rollout.n_samples": 2})
    return load_config(ROOT / "params.yaml", overrides)


def timed_rollouts(engine: Any, run: Any, tokenizer: Any, samples: list[dict[str, Any]], repeats: int) -> dict:
    """One warm-up rollout, then `repeats` timed ones: sampled tokens, turns and calls, per second."""
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.loop import run_rollout

    codec, cfg = ChatCodec(tokenizer), run.cfg
    run_rollout(engine, codec, run.env_factory, samples[:1], cfg.rollout, cfg.reward, seed=99)
    rows = []
    for r in range(repeats):
        t0 = time.perf_counter()
        trajs = run_rollout(engine, codec, run.env_factory, samples, cfg.rollout, cfg.reward, seed=r)
        wall = time.perf_counter() - t0
        tokens = sum(sum(t.action_mask) for t in trajs)
        rows.append({"seconds": round(wall, 2), "sampled_tokens": tokens, "trajectories": len(trajs),
                     "turns": sum(len(t.turns) for t in trajs),
                     "tool_calls": sum(turn.tool_calls for t in trajs for turn in t.turns),
                     "tokens_per_s": round(tokens / wall, 1)})
    return {"runs": rows, "tokens_per_s_median": statistics.median(r["tokens_per_s"] for r in rows)}


def build_engine(name: str, model: Any, tokenizer: Any, cfg: Any) -> tuple[Any, float]:
    """The engine and its start-up seconds (vLLM in the run's precision, fp32 here)."""
    from agent_r1.rollout.engines import build_engine as build, options_from_config

    t0 = time.perf_counter()
    engine = build(name, model, tokenizer, options_from_config(cfg, "cpu"))
    return engine, round(time.perf_counter() - t0, 1)


def main(argv: list[str] | None = None) -> int:
    from agent_r1.runs.run import Run
    from benchmarks.vllm_cpu import build_policy

    args = parse_args(argv)
    with Run(run_config(args)) as run:
        samples = run.samples("train", args.prompts)
        model, tokenizer = build_policy(args)
        engines = {}
        for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
            engine, start_s = build_engine(name, model, tokenizer, run.cfg)
            try:
                engines[name] = {"start_s": start_s, **timed_rollouts(engine, run, tokenizer, samples, args.repeats)}
            finally:
                getattr(engine, "close", lambda: None)()
        budgets = {k: getattr(run.cfg.rollout, k) for k in ("max_turns", "max_tokens_per_turn",
                                                             "max_observation_tokens", "max_total_tokens",
                                                             "temperature", "n_samples")}
    doc = {"benchmark": "vllm_rollout", "command": "python benchmarks/vllm_rollout.py" + (" --smoke" if args.smoke else ""),
           "model": {"like": "qwen2.5", "hidden_size": args.hidden, "num_layers": args.layers,
                     "parameters": sum(p.numel() for p in model.parameters())},
           "work": {"questions": len(samples), "rollout": budgets, "format": "hermes", "tool": "search (tantivy)"},
           "engines": engines, "machine": machine(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
           "equal_work": False}
    if {"vllm", "transformers"} <= set(engines):
        doc["vllm_over_transformers"] = round(engines["vllm"]["tokens_per_s_median"]
                                              / engines["transformers"]["tokens_per_s_median"], 2)
    write_json(result_path("vllm_rollout_smoke" if args.smoke else "vllm_rollout"), doc, indent=2)
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":  # the vLLM engine core is a spawned process: it re-imports this module
    raise SystemExit(main())
