"""Rollout performance: overhead against raw generation, generation speed-ups, scaling.

1. Overhead: the multi-turn rollout (env, tag parsing, tantivy searches, observation encoding,
   masks) against plain `model.generate` on the same batch of prompts producing the same number of
   tokens (each row `ceil(sampled tokens / trajectories)` tokens, min = max, so none stops early),
   and against `model.generate` replaying each turn's exact contexts (observations included) for
   that turn's token count; alternated per repeat. Throughput = sampled tokens / wall second.
2. Speed-ups, before/after, alternated: KV reuse across turns on/off, finished rows dropped from
   the batch or kept until all finish, all trajectories in one batch or one trajectory at a time.
3. Scaling: rollout time as trajectories per batch grow (8, 32, 128) and as max turns grow (1..5).

    .venv/bin/python -m benchmarks.perf_rollout            # quick (a few minutes on 2 cores)
    .venv/bin/python -m benchmarks.perf_rollout --full     # more repeats
    .venv/bin/python -m benchmarks.perf_rollout --device cuda   # GPU host: random Qwen2-shaped bf16 model

The policy is params.yaml's model warm-started by a short SFT on the scripted demos, so it writes
`<search>` calls that hit the tantivy index (see perf_common.policy). Writes
benchmarks/results/perf_rollout.json (or perf_rollout_cuda.json).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.perf_common import (
    add_common_args,
    alternate,
    bench_cfg,
    policy,
    ratio_summary,
    sft_steps,
    summary,
    write_result,
)


class OneAtATime:
    """An engine wrapper that generates for one trajectory at a time (no batching): the 'before'."""

    supports_prefix_reuse = True

    def __init__(self, engine: Any):
        self.engine = engine

    def generate(self, prompts, params, prefix_keys=None, keep_prefixes=True):
        budgets = params.max_new_tokens if isinstance(params.max_new_tokens, list) else [params.max_new_tokens] * len(prompts)
        keys = prefix_keys or [None] * len(prompts)
        return [self.engine.generate([p], replace(params, max_new_tokens=[b]), prefix_keys=[k],
                                     keep_prefixes=keep_prefixes)[0] for p, b, k in zip(prompts, budgets, keys)]

    def drop_prefixes(self, keys=None):
        self.engine.drop_prefixes(keys)


class Recorder:
    """Passes calls through to an engine, keeping each call's contexts and its sampled token count."""

    supports_prefix_reuse = True

    def __init__(self, engine: Any):
        self.engine, self.calls = engine, []

    def generate(self, prompts, params, **kwargs):
        outs = self.engine.generate(prompts, params, **kwargs)
        self.calls.append(([list(p) for p in prompts], sum(len(o.token_ids) for o in outs)))
        return outs

    def drop_prefixes(self, keys=None):
        self.engine.drop_prefixes(keys)


def rollout_stats(trajs: list[Any]) -> dict[str, float]:
    n = max(len(trajs), 1)
    return {"trajectories": len(trajs), "sampled_tokens": sum(len(t.action_ids) for tr in trajs for t in tr.turns),
            "total_tokens": sum(len(tr.token_ids) for tr in trajs), "mean_turns": sum(len(tr.turns) for tr in trajs) / n,
            "tool_calls": sum(t.tool_calls for tr in trajs for t in tr.turns),
            "valid_tool_calls": sum(t.valid_tool_calls for tr in trajs for t in tr.turns)}


@dataclass
class Bench:
    """What every part times against: the policy, its engines, the env factory and the prompts."""

    cfg: Any
    args: argparse.Namespace
    model: Any
    tok: Any
    codec: Any
    make_env: Any
    samples: list[dict]
    engine: Any
    keep_all: Any  # an engine that keeps finished rows in the batch
    sync: Any

    def batch(self, n_prompts: int, r: int) -> list[dict]:
        start = (r * n_prompts) % max(len(self.samples) - n_prompts, 1)
        return self.samples[start:start + n_prompts]

    def rollout(self, eng: Any, rcfg: Any, n_prompts: int):
        from agent_r1.rollout.loop import run_rollout

        return lambda r: rollout_stats(run_rollout(eng, self.codec, self.make_env, self.batch(n_prompts, r), rcfg,
                                                   self.cfg.reward, seed=r))

    def raw_generate(self, prompt_ids: list[list[int]], new_tokens: int, r: int) -> int:
        """Plain `model.generate` on the same (left-padded) prompts; returns the tokens produced."""
        import torch

        tok, device = self.tok, self.args.device
        width = max(map(len, prompt_ids))
        ids = torch.full((len(prompt_ids), width), tok.pad_token_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, p in enumerate(prompt_ids):
            ids[i, width - len(p):] = torch.tensor(p)
            attn[i, width - len(p):] = 1
        torch.manual_seed(r)
        with torch.no_grad():
            out = self.model.generate(input_ids=ids.to(device), attention_mask=attn.to(device), do_sample=True,
                                      temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new_tokens,
                                      min_new_tokens=new_tokens, pad_token_id=tok.pad_token_id)
        return (out.shape[1] - width) * len(prompt_ids)

    def prompts(self, r: int) -> list[list[int]]:
        """The prompt ids of repeat r's batch, n_samples copies of each."""
        out = []
        for s in self.batch(self.args.prompts, r):
            for _ in range(self.cfg.rollout.n_samples):
                env = self.make_env(s)
                out.append(self.codec.prompt_ids(env.reset(s), tools=env.tool_schemas
                                                 if not env.fmt.inline_observations else None))
        return out


def setup(args: argparse.Namespace) -> tuple[Bench, dict[str, Any], Any]:
    """(the bench, the policy's description, the retriever to close)."""
    import torch

    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.engine import TransformersEngine
    from agent_r1.runs.run import Run

    cuda = args.device.startswith("cuda")
    cfg = bench_cfg(args)
    run = Run(cfg)  # data, index and the retriever, built once
    retriever = run.retriever
    model, tok, model_desc = policy(cfg, args.device, sft_steps(args), dtype="bfloat16" if cuda else "float32")
    model.eval()
    bench = Bench(cfg, args, model, tok, ChatCodec(tok), run.env_factory,
                  run.samples("train"), TransformersEngine(model, tok, device=args.device),
                  TransformersEngine(model, tok, device=args.device, drop_finished=False),
                  torch.cuda.synchronize if cuda else None)
    return bench, model_desc, retriever


def overhead(b: Bench, repeats: int) -> dict[str, Any]:
    """1. rollout against raw generation, A and B back to back (A first in even repeats, B in odd):
    - raw_generate: one `model.generate` call on the same prompts, as many tokens in all (the
      plainest baseline; it encodes no observation, which the rollout must);
    - raw_replay: per turn, `model.generate` on exactly the contexts the rollout's engine got that
      turn (observations included), as many tokens as the rollout sampled that turn: the same
      model work without the framework (env, parsing, tantivy, masks, our engine loop)."""
    rcfg, n_traj = b.cfg.rollout, b.args.prompts * b.cfg.rollout.n_samples
    recorder = Recorder(b.engine)
    pairs = []
    for r in range(repeats):
        prompts = b.prompts(r)
        recorder.calls = []
        probe = b.rollout(recorder, rcfg, b.args.prompts)(r)  # same seed: A reproduces these tokens
        m = math.ceil(probe["sampled_tokens"] / n_traj)
        turns = [(ctx, math.ceil(tokens / len(ctx))) for ctx, tokens in recorder.calls]
        timed = alternate({"rollout": b.rollout(b.engine, rcfg, b.args.prompts),
                           "raw_generate": lambda rr, p=prompts, m=m: b.raw_generate(p, m, rr),
                           "raw_replay": lambda rr, t=turns: sum(b.raw_generate(c, k, rr) for c, k in t)},
                          1, b.sync, start=r)
        (a_s, a), (b_s, raw), (c_s, c) = timed["rollout"][0], timed["raw_generate"][0], timed["raw_replay"][0]
        pairs.append({"rollout_s": a_s, "rollout_tokens": a["sampled_tokens"], "raw_s": b_s, "raw_tokens": raw,
                      "replay_s": c_s, "replay_tokens": c, "stats": a})
    roll_tps = [p["rollout_tokens"] / p["rollout_s"] for p in pairs]
    raw_tps = [p["raw_tokens"] / p["raw_s"] for p in pairs]
    replay_tps = [p["replay_tokens"] / p["replay_s"] for p in pairs]
    return {
        "rollout_tokens_per_s": summary(roll_tps, 1), "raw_generate_tokens_per_s": summary(raw_tps, 1),
        "raw_replay_tokens_per_s": summary(replay_tps, 1),
        "rollout_over_raw_generate": ratio_summary(roll_tps, raw_tps),
        "rollout_over_raw_replay": ratio_summary(roll_tps, replay_tps), "target": ">= 0.85",
        "rollout_stats": [p["stats"] for p in pairs],
        "raw_generate_tokens": [p["raw_tokens"] for p in pairs], "raw_replay_tokens": [p["replay_tokens"] for p in pairs]}


def speedups(b: Bench, repeats: int) -> dict[str, Any]:
    """2. speed-ups, before/after (same seeds: reuse and early drop change no token)."""
    rcfg, n = b.cfg.rollout, b.args.prompts
    no_reuse = replace(rcfg, kv_reuse=False)
    variants = {"all_on": b.rollout(b.engine, rcfg, n),
                "no_kv_reuse": b.rollout(b.engine, no_reuse, n),
                "no_early_drop": b.rollout(b.keep_all, rcfg, n),
                "one_at_a_time": b.rollout(OneAtATime(b.engine), rcfg, n),
                "none_of_them": b.rollout(OneAtATime(b.keep_all), no_reuse, n)}
    timed = alternate(variants, repeats, b.sync)
    base_s = [t for t, _ in timed["all_on"]]
    out = {}
    for name, runs in timed.items():
        secs = [t for t, _ in runs]
        tps = [v["sampled_tokens"] / t for t, v in runs]
        out[name] = {"seconds": summary(secs), "tokens_per_s": summary(tps, 1),
                     "seconds_over_all_on": ratio_summary(secs, base_s), "mean_turns": runs[0][1]["mean_turns"]}
    return out


def scaling(b: Bench, repeats: int, prompt_counts=(2, 8, 32), max_turns: int = 5) -> dict[str, Any]:
    """3. rollout time as trajectories per batch and max turns grow."""
    rcfg = b.cfg.rollout
    out: dict[str, Any] = {"trajectories": {}, "turns": {}}
    reps = max(1, repeats - 1)
    for n_prompts in prompt_counts:
        timed = alternate({"x": b.rollout(b.engine, rcfg, n_prompts)}, reps, b.sync)["x"]
        secs = [t for t, _ in timed]
        key = str(n_prompts * rcfg.n_samples)
        out["trajectories"][key] = {
            "seconds": summary(secs), "sampled_tokens": timed[0][1]["sampled_tokens"],
            "ms_per_trajectory": round(1000 * min(secs) / (n_prompts * rcfg.n_samples), 2),
            "tokens_per_s": summary([v["sampled_tokens"] / t for t, v in timed], 1)}
        print("trajectories", key, out["trajectories"][key]["seconds"]["median"], flush=True)
    for turns in range(1, max_turns + 1):
        timed = alternate({"x": b.rollout(b.engine, replace(rcfg, max_turns=turns), b.args.prompts)}, reps, b.sync)["x"]
        secs = [t for t, _ in timed]
        out["turns"][str(turns)] = {"seconds": summary(secs), "mean_turns": timed[0][1]["mean_turns"],
                                    "sampled_tokens": timed[0][1]["sampled_tokens"],
                                    "total_tokens": timed[0][1]["total_tokens"]}
        print("turns", turns, out["turns"][str(turns)]["seconds"]["median"], flush=True)
    t = out["trajectories"]
    first, last = t[min(t, key=int)]["seconds"]["median"], t[max(t, key=int)]["seconds"]["median"]
    span = int(max(t, key=int)) / int(min(t, key=int))
    # growth exponent: time ~ n^k between 8 and 128 trajectories
    out["time_exponent_8_to_128_trajectories"] = round(math.log(last / first) / math.log(span), 3) if span > 1 else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per batch (x rollout.n_samples trajectories)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    repeats = args.repeats or (1 if args.smoke else 7 if args.full else 3)
    b, model_desc, retriever = setup(args)
    rcfg = b.cfg.rollout
    results: dict[str, Any] = {"config": {"rollout": vars(rcfg), "prompts": args.prompts,
                                          "trajectories": args.prompts * rcfg.n_samples,
                                          "repeats": repeats, "threads": args.threads, "device": args.device,
                                          "model": model_desc,
                                          "search": {"backend": b.cfg.search.backend, "k": b.cfg.search.k}}}
    b.rollout(b.engine, rcfg, 2)(0)  # warm-up (first-call allocations, tantivy searcher)
    results["overhead"] = overhead(b, repeats)
    print("overhead:", results["overhead"]["rollout_over_raw_generate"]["median"],
          results["overhead"]["rollout_over_raw_replay"]["median"], flush=True)
    results["speedups"] = speedups(b, repeats)
    print("speed-ups:", {k: v["seconds_over_all_on"]["median"] for k, v in results["speedups"].items()}, flush=True)
    results["scaling"] = scaling(b, repeats, (1, 2) if args.smoke else (2, 8, 32), 2 if args.smoke else 5)
    retriever.close()
    write_result("perf_rollout" + ("_cuda" if args.device.startswith("cuda") else ""), results, args.device)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
