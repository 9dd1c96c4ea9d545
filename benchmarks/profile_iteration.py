"""Where one training iteration's wall time goes, at the default settings (params.yaml).

The real `RLTrainer.train_step` runs unchanged; this file wraps, at runtime, the functions it calls
with wall-clock section timers (no library code is edited):

    rollout   trainer.rollout            of which
      generate                engine.generate (every turn's batched sampling)
      env step                agent_r1.rollout.loop.step_many (parse actions, run tool calls), of which
        retrieval             retriever.search (the tantivy queries)
      prompts, observations   the rest of trainer.rollout (chat template, observation tokens, rewards)
    update    trainer.learn              of which
      masks (collate)         agent_r1.training.trainer.collate (token ids, action / loss masks, padding)
      log-prob pass           trainer._per_token (old and reference log-probs, no gradients)
      advantages              the rest of trainer.prepare
      forward                 token_logprobs with gradients (the PPO epochs' forward)
      backward                torch.autograd.backward
      grad clip               torch.nn.utils.clip_grad_norm_
      optimizer step          optimizer.step (AdamW)
      loss, metrics, other    the rest of trainer.learn

One warm-up iteration, then `--iterations` timed ones; each section's median seconds and median
share of its iteration. The policy is params.yaml's model after a short SFT on the scripted demos
(perf_common.policy), so it writes searches and tantivy is really called.

    .venv/bin/python -m benchmarks.profile_iteration [--iterations 3] [--threads 1]
    py-spy record -o benchmarks/results/profile_iteration.svg --format flamegraph --rate 50 -- \\
        .venv/bin/python -m benchmarks.profile_iteration --iterations 2 --no-write

Writes benchmarks/results/profile.json and profile.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import ROOT, results_dir, work_dir
from benchmarks.perf_common import load_cfg, policy, smoke_overrides, summary, write_result

# (phase, label, how the seconds are found): a measured timer, or "rest:<parent>" = the parent's
# timer minus its measured children (listed in CHILDREN)
ROWS = [
    ("rollout", "generate", "generate"),
    ("rollout", "env step (tool calls)", "env_step"),
    ("rollout", "  of which retrieval", "retrieval"),
    ("rollout", "prompts, observation tokens, rewards", "rest:rollout"),
    ("rollout", "masks (collate)", "collate"),
    ("update", "log-prob pass (old/ref)", "logprob_pass"),
    ("update", "advantages", "rest:prepare"),
    ("update", "forward", "forward"),
    ("update", "backward", "backward"),
    ("update", "grad clip", "grad_clip"),
    ("update", "optimizer step", "optimizer_step"),
    ("update", "loss, metrics, other", "rest:learn"),
]
CHILDREN = {"rollout": ["generate", "env_step"], "prepare": ["collate", "logprob_pass"],
            "learn": ["prepare", "forward", "backward", "grad_clip", "optimizer_step"]}


class SectionTimer:
    """Accumulates wall seconds per section name; `wrap` times every call of a function."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def reset(self) -> dict[str, float]:
        done, self.seconds = self.seconds, {}
        return done

    def wrap(self, fn: Callable, name: str, when: Callable[[], bool] | None = None) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if when is not None and not when():
                return fn(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
        return timed


def instrument(trainer: Any, retriever: Any, timer: SectionTimer) -> Callable[[], None]:
    """Wraps the functions one iteration calls (instance attributes and module globals); returns
    what puts the module globals back (the process may go on: a test calls main in-process)."""
    import torch

    from agent_r1.rollout import loop
    from agent_r1.training import trainer as trainer_mod

    for attr, name in (("rollout", "rollout"), ("learn", "learn"), ("prepare", "prepare"),
                       ("_per_token", "logprob_pass")):
        setattr(trainer, attr, timer.wrap(getattr(trainer, attr), name))
    trainer.engine.generate = timer.wrap(trainer.engine.generate, "generate")
    trainer.optimizer.step = timer.wrap(trainer.optimizer.step, "optimizer_step")
    retriever.search = timer.wrap(retriever.search, "retrieval")
    # the log-prob pass calls token_logprobs too, without gradients; only the PPO forward counts here
    patches = [(loop, "step_many", "env_step", None), (trainer_mod, "collate", "collate", None),
               (trainer_mod, "token_logprobs", "forward", torch.is_grad_enabled),
               (torch.autograd, "backward", "backward", None), (torch.nn.utils, "clip_grad_norm_", "grad_clip", None)]
    originals = [(owner, attr, getattr(owner, attr)) for owner, attr, _, _ in patches]
    for owner, attr, name, when in patches:
        setattr(owner, attr, timer.wrap(getattr(owner, attr), name, when))

    def undo() -> None:
        for owner, attr, fn in originals:
            setattr(owner, attr, fn)

    return undo


def leaf_seconds(measured: dict[str, float]) -> dict[str, float]:
    """Every ROWS entry's seconds in one iteration (a 'rest:' row = parent minus its children)."""
    out = {}
    for _, _, key in ROWS:
        if key.startswith("rest:"):
            parent = key[5:]
            out[key] = measured.get(parent, 0.0) - sum(measured.get(c, 0.0) for c in CHILDREN[parent])
        else:
            out[key] = measured.get(key, 0.0)
    return out


FLAME = ("Flame graph: `benchmarks/results/profile_iteration.svg`, from `py-spy record -o "
         "benchmarks/results/profile_iteration.svg --format flamegraph --rate 50 -- .venv/bin/python "
         "-m benchmarks.profile_iteration --iterations 2 --no-write` (py-spy launches the process and samples it "
         "by ptrace at 50 Hz; the graph includes imports, setup and the warm-up iteration).")


def table(rows: list[dict[str, Any]], totals: dict[str, Any], header: str) -> str:
    lines = [header, "", "| phase | section | seconds (median) | share of iteration |", "|---|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['phase']} | {r['section']} | {r['seconds']['median']:.3f} | {100 * r['share']:.1f}% |")
    for name in ("rollout", "update", "iteration"):
        t = totals[name]
        lines.append(f"| **{name}** | total | **{t['seconds']['median']:.3f}** | {100 * t['share']:.1f}% |")
    return "\n".join([*lines, "", FLAME]) + "\n"


def setup(args: argparse.Namespace) -> tuple[Any, Any, Any, dict]:
    """(config, trainer, retriever, the policy's description)."""
    from agent_r1.config import load_config
    from agent_r1.runs.run import Run
    from agent_r1.training.trainer import RLTrainer

    # params.yaml as it is (perf_common's overrides keep the older BPE tokenizer: not here), with
    # data, index and warm start in the work folder
    cfg = load_cfg({"model.tokenizer": load_config(ROOT / "params.yaml").model.tokenizer,
                    **(smoke_overrides() if args.smoke else {})}, work=work_dir("profile"))
    run = Run(cfg)  # data, index and the retriever, built once
    retriever = run.retriever
    model, tok, model_desc = policy(cfg, "cpu", 2 if args.smoke else args.sft_steps)
    trainer = RLTrainer(cfg, model, tok, run.env_factory,
                        run.samples("train"))
    return cfg, trainer, retriever, model_desc


def run_iterations(trainer: Any, timer: SectionTimer, iterations: int) -> list[dict[str, float]]:
    """One warm-up then `iterations` timed iterations: each one's sections, phases and context."""
    iters: list[dict[str, float]] = []
    for i in range(iterations + 1):
        t0 = time.perf_counter()
        metrics = trainer.train_step()
        wall = time.perf_counter() - t0
        measured = timer.reset()
        if i == 0:
            print(f"warm-up iteration: {wall:.2f} s", flush=True)
            continue
        leaves = leaf_seconds(measured)
        # the rollout phase: generate, env, retrieval and the token masks (collate,
        # which runs at the start of the learner's prepare); the update phase is the rest
        rollout = measured.get("rollout", 0.0) + measured.get("collate", 0.0)
        leaves.update(iteration=wall, rollout=rollout, update=wall - rollout,
                      tool_calls=metrics.get("tool_calls_per_trajectory", 0),
                      action_tokens=metrics.get("action_tokens", 0.0), reward=metrics.get("reward_mean", 0.0))
        iters.append(leaves)
        print(f"iteration {i}: {wall:.2f} s (rollout {leaves['rollout']:.2f}, update {leaves['update']:.2f})", flush=True)
    return iters


def header_text(cfg: Any, args: argparse.Namespace, ctx: dict[str, Any], model_desc: dict) -> str:
    return (f"One iteration at the default settings (params.yaml: {cfg.train.prompts_per_iter} prompts x "
            f"{cfg.rollout.n_samples} samples, {cfg.train.ppo_epochs} PPO epochs, minibatch "
            f"{cfg.train.minibatch_size}), median of {args.iterations} iterations after 1 warm-up, "
            f"{args.threads} torch thread(s), CPU shared with another benchmark. "
            f"`python -m benchmarks.profile_iteration --iterations {args.iterations}`. "
            "'of which retrieval' is part of 'env step'; 'masks (collate)' runs at the start of the learner's "
            "prepare (counted in the rollout total here). Per iteration (median): "
            f"{ctx['tool_calls']['median']} tool calls and {ctx['action_tokens']['median']} sampled tokens per "
            f"trajectory, mean reward {ctx['reward']['median']}. Policy: {model_desc['kind']}.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=3, help="timed iterations (after one warm-up)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: leaves the other core alone)")
    ap.add_argument("--sft-steps", type=int, default=60, help="SFT steps of the benchmark warm start (cached)")
    ap.add_argument("--no-write", action="store_true", help="print only (e.g. under py-spy)")
    ap.add_argument("--smoke", action="store_true", help="micro model and world, 2 SFT steps (the smoke tests)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    cfg, trainer, retriever, model_desc = setup(args)
    timer = SectionTimer()
    undo = instrument(trainer, retriever, timer)
    try:
        iters = run_iterations(trainer, timer, args.iterations)
    finally:
        undo()
        retriever.close()

    def stats(key: str) -> dict[str, Any]:
        return {"seconds": summary([it[key] for it in iters]),
                "share": round(statistics.median(it[key] / it["iteration"] for it in iters), 4)}

    rows = [{"phase": phase, "section": label.strip(), "key": key, **stats(key)} for phase, label, key in ROWS]
    totals = {k: stats(k) for k in ("rollout", "update", "iteration")}
    ctx = {k: summary([it[k] for it in iters], 3) for k in ("tool_calls", "action_tokens", "reward")}
    header = header_text(cfg, args, ctx, model_desc)
    print(table(rows, totals, header))
    if not args.no_write:
        write_result("profile", {
            "config": {"train": {k: getattr(cfg.train, k) for k in ("prompts_per_iter", "ppo_epochs", "minibatch_size")},
                       "rollout": vars(cfg.rollout), "model": model_desc, "threads": args.threads,
                       "iterations": args.iterations, "warm_up_iterations": 1, "tokenizer": cfg.model.tokenizer},
            "load_note": "2 cores shared with another engineer's benchmark (async rollout timing) while measured",
            "sections": rows, "totals": totals,
            "per_iteration_context": ctx,
        })
        (results_dir() / "profile.md").write_text(table(rows, totals, header))
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
