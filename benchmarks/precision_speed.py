"""What `train.precision` costs or gains on this CPU for `make run`'s SFT and RL: the figures behind
`auto`'s choice (docs/real-models.md, "Precision").

On params.yaml's model and data (work folder benchmarks/.work/precision), from one warm start:
- SFT: `--sft-steps` steps of sft_train on the scripted demos, inside each precision's autocast.
  (`agent-r1 sft` itself runs in fp32 whatever train.precision says: this measures what following it
  would change.) Equal work: the same demos, batches and seed in both precisions.
- RL: GRPO iterations of params.yaml (rollout and update), one trainer per precision, their
  iterations alternated. Not equal work: each precision samples its own tokens, so the sampled
  tokens per iteration are recorded beside the seconds.

`--isa avx2` runs the same in a child process with ONEDNN_MAX_CPU_ISA=AVX2: oneDNN, which computes
torch's bf16 matmuls, then uses no instruction newer than AVX2, and torch reports no native bf16
(torch.ops.mkldnn._is_mkldnn_bf16_supported() is False), as on an AVX2-only CPU. A precision whose
SFT steps exceed `--budget-s` is not run in RL (recorded as not run).

    python -m benchmarks.precision_speed                 # this CPU as it is
    python -m benchmarks.precision_speed --isa avx2      # as on AVX2-only cores
-> benchmarks/results/precision_speed.json, one section per ISA.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import ROOT, machine, result_path, update_results, work_dir
from benchmarks.perf_common import alternate, load_cfg, policy, smoke_overrides, summary

PRECISIONS = ("fp32", "bf16")


def scripted_demos(cfg: Any, tok: Any) -> list[Any]:
    """The SFT demonstrations of `cfg`'s data (the same for both precisions: built once)."""
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.runs.run import Run
    from agent_r1.training.demos import build_demos

    run = Run(cfg)
    return build_demos(run.samples("train"), run.env_factory, ChatCodec(tok), cfg.env.format, cfg.sft.guess_fraction,
                       cfg.seed, cfg.rollout.max_observation_tokens, cfg.sft.demo_style)


def sft_seconds(cfg: Any, model: Any, tok: Any, demos: list[Any], steps: int) -> float:
    """Seconds of `steps` SFT steps inside the autocast of `cfg`'s train.precision (after 2 untimed)."""
    import copy

    from agent_r1.training.compute import Compute
    from agent_r1.training.sft import sft_train

    with Compute.from_config(cfg).autocast():
        sft_train(copy.deepcopy(model), tok, demos, 2, cfg.sft.batch_size, cfg.sft.lr, cfg.seed)  # warm-up, untimed
        t0 = time.perf_counter()
        sft_train(copy.deepcopy(model), tok, demos, steps, cfg.sft.batch_size, cfg.sft.lr, cfg.seed)
        return time.perf_counter() - t0


def rl_iterations(cfg_for: dict[str, Any], model: Any, tok: Any, iterations: int) -> dict[str, list[tuple[float, Any]]]:
    import copy

    from agent_r1.runs.run import Run
    from agent_r1.training.trainer import RLTrainer

    trainers = {}
    for name, cfg in cfg_for.items():
        run = Run(cfg)
        trainers[name] = RLTrainer(cfg, copy.deepcopy(model), tok, run.env_factory, run.samples("train"))
        assert trainers[name].compute.precision == name
    for trainer in trainers.values():
        trainer.train_step()  # warm-up
    return alternate({name: (lambda r, t=t: t.train_step()["action_tokens"]) for name, t in trainers.items()},
                     iterations)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from agent_r1.config import load_config
    from agent_r1.precision import resolve_precision

    work = work_dir("precision")

    # params.yaml's own tokenizer (perf_common keeps the older BPE one for its committed figures)
    tokenizer = load_config(ROOT / "params.yaml").model.tokenizer
    micro = smoke_overrides() if args.smoke else {}
    cfg_for = {p: load_cfg({**micro, "train.precision": p, "model.tokenizer": tokenizer}, work=work)
               for p in PRECISIONS}
    model, tok, desc = policy(cfg_for["fp32"], "cpu", args.warm_steps)
    out: dict[str, Any] = {"auto_resolves_to": resolve_precision("auto", torch.device("cpu"), warn=False),
                           "mkldnn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()), "policy": desc,
                           "sft": {}, "rl": {}}
    demos = scripted_demos(cfg_for["fp32"], tok)
    for p in PRECISIONS:
        seconds = sft_seconds(cfg_for[p], model, tok, demos, args.sft_steps)
        out["sft"][p] = {"steps": args.sft_steps, "seconds": round(seconds, 2),
                         "s_per_step": round(seconds / args.sft_steps, 4)}
        print(f"SFT {p}: {seconds / args.sft_steps:.3f} s/step", flush=True)
        if seconds > args.budget_s:
            out["sft"][p]["over_budget"] = True
    runnable = {p: c for p, c in cfg_for.items() if not out["sft"][p].get("over_budget")}
    timed = rl_iterations(runnable, model, tok, args.iterations)
    for p, rows in timed.items():
        out["rl"][p] = {"s_per_iteration": summary([s for s, _ in rows], 3),
                        "action_tokens": [float(t) for _, t in rows]}
        print(f"RL {p}: {out['rl'][p]['s_per_iteration']['median']} s/iteration", flush=True)
    for p in set(PRECISIONS) - set(runnable):
        out["rl"][p] = {"not_run": f"its {args.sft_steps} SFT steps took over {args.budget_s} s"}
    if len(timed) == 2:
        ratios = [a / b for (a, _), (b, _) in zip(timed["bf16"], timed["fp32"])]
        out["rl"]["bf16_over_fp32"] = summary(ratios, 3)
    out["sft"]["bf16_over_fp32"] = round(out["sft"]["bf16"]["seconds"] / out["sft"]["fp32"]["seconds"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isa", choices=["native", "avx2"], default="native",
                    help="avx2: oneDNN limited to AVX2 (ONEDNN_MAX_CPU_ISA), as on an AVX2-only CPU")
    ap.add_argument("--sft-steps", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=4, help="timed RL iterations per precision (after one warm-up)")
    ap.add_argument("--budget-s", type=float, default=600.0)
    ap.add_argument("--smoke", action="store_true", help="the micro model and world, 2 steps, 1 iteration (a test)")
    args = ap.parse_args(argv)
    args.warm_steps = 2 if args.smoke else 60  # SFT steps of the warm start both precisions share
    if args.smoke:
        args.sft_steps, args.iterations = 2, 1
    if args.isa == "avx2" and os.environ.get("ONEDNN_MAX_CPU_ISA") != "AVX2":
        # the limit is read when oneDNN loads: a child process of its own
        env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
        return subprocess.call([sys.executable, "-m", "benchmarks.precision_speed", *(argv or sys.argv[1:])], env=env,
                               cwd=ROOT)
    section = {**measure(args), "machine": machine("cpu"), "isa_limit": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
               "command": " ".join(["python -m benchmarks.precision_speed", *(argv or sys.argv[1:])])}
    update_results(result_path("precision_speed"), args.isa, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
