"""vLLM's CPU build against the transformers engine on multi-turn agent rollouts with params.yaml's
budgets (turns, tokens per turn, observation tokens, group of 8, temperature 1): the synthetic world's
questions, the search tool over its tantivy index, the hermes tool-call format, a `--like qwen2.5`
policy (the real 151,936-token vocabulary; head_dim 64 as vLLM's CPU attention needs). Run it in
`.venv-vllm` (the main environment has no vLLM: `--engines transformers` runs the other half):

    .venv-vllm/bin/python -m benchmarks.vllm_rollout [--prompts 4] [--repeats 2]

Writes benchmarks/results/vllm_rollout.json: sampled tokens per second of rollout wall time, with the
tokens, turns and tool calls each engine did beside it. Each engine samples its own trajectories, so
the work is equal only when both sampled the same tokens and turns (`equal_work` says whether they
did: a random policy usually fills every turn's token budget).
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
    ap.add_argument("--repeats", type=int, default=3, help="rounds; in each, every engine rolls out once (same seed)")
    ap.add_argument("--engines", default="vllm,transformers")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--smoke", action="store_true", help="a 60-person world, 2 turns of 8 tokens (the smoke test)")
    args = ap.parse_args(argv)
    args.layers = 2  # vllm_cpu.build_policy's folder: --hidden wide, 2 layers
    return args


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


def rollout_once(engine: Any, run: Any, codec: Any, samples: list[dict[str, Any]], seed: int) -> dict:
    """One timed rollout: sampled tokens, turns and tool calls, and tokens per second."""
    from agent_r1.rollout.loop import run_rollout

    cfg = run.cfg
    t0 = time.perf_counter()
    trajs = run_rollout(engine, codec, run.env_factory, samples, cfg.rollout, cfg.reward, seed=seed)
    wall = time.perf_counter() - t0
    tokens = sum(sum(t.action_mask) for t in trajs)
    return {"seconds": round(wall, 2), "sampled_tokens": tokens, "trajectories": len(trajs),
            "turns": sum(len(t.turns) for t in trajs),
            "tool_calls": sum(turn.tool_calls for t in trajs for turn in t.turns),
            "tokens_per_s": round(tokens / wall, 1)}


def interleaved(engines: dict[str, Any], run: Any, tokenizer: Any, samples: list[dict[str, Any]],
                repeats: int) -> dict[str, list[dict]]:
    """A warm-up rollout per engine, then `repeats` rounds in which each engine rolls out once with the
    round's seed: the engines take turns, so a change in the machine's load falls on both."""
    from agent_r1.rollout.chat import ChatCodec

    codec = ChatCodec(tokenizer)
    for engine in engines.values():
        rollout_once(engine, run, codec, samples[:1], seed=99)
    runs: dict[str, list[dict]] = {name: [] for name in engines}
    for r in range(repeats):
        for name, engine in engines.items():
            runs[name].append(rollout_once(engine, run, codec, samples, seed=r))
    return runs


def _same_work(engines: dict[str, Any]) -> bool:
    """Whether every engine sampled the same number of tokens and turns in each repeat (a random policy
    usually fills every turn's token budget: then the rates compare engines on equal work)."""
    work = {name: [(r["sampled_tokens"], r["turns"]) for r in e["runs"]] for name, e in engines.items()}
    return len(engines) > 1 and len({tuple(w) for w in work.values()}) == 1


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
        built, starts = {}, {}
        try:
            for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
                built[name], starts[name] = build_engine(name, model, tokenizer, run.cfg)
            runs = interleaved(built, run, tokenizer, samples, args.repeats)
        finally:
            for engine in built.values():
                getattr(engine, "close", lambda: None)()
        engines = {name: {"start_s": starts[name], "runs": rows,
                          "tokens_per_s_median": statistics.median(r["tokens_per_s"] for r in rows)}
                   for name, rows in runs.items()}
        budgets = {k: getattr(run.cfg.rollout, k) for k in ("max_turns", "max_tokens_per_turn",
                                                             "max_observation_tokens", "max_total_tokens",
                                                             "temperature", "n_samples")}
    doc = {"benchmark": "vllm_rollout", "command": "python -m benchmarks.vllm_rollout" + (" --smoke" if args.smoke else ""),
           "model": {"like": "qwen2.5", "hidden_size": args.hidden, "num_layers": args.layers,
                     "parameters": sum(p.numel() for p in model.parameters())},
           "work": {"questions": len(samples), "rollout": budgets, "format": "hermes", "tool": "search (tantivy)"},
           "engines": engines, "machine": machine(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
           "equal_work": _same_work(engines)}
    if {"vllm", "transformers"} <= set(engines):
        doc["vllm_over_transformers"] = round(engines["vllm"]["tokens_per_s_median"]
                                              / engines["transformers"]["tokens_per_s_median"], 2)
    write_json(result_path("vllm_rollout_smoke" if args.smoke else "vllm_rollout"), doc, indent=2)
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":  # the vLLM engine core is a spawned process: it re-imports this module
    raise SystemExit(main())
