"""agent-r1 against TRL's GRPOTrainer: seconds per RL iteration on the same work, sides alternated.

Both sides train a fresh copy of the same warm-started model with GRPO on the same prompts
(the run's first training questions, rendered by agent-r1's env through the same chat template),
group size `rollout.n_samples`, temperature 1, no KL term, the same learning rate, weight decay
and gradient clipping, fp32 (TRL's default bf16 and gradient checkpointing are turned off), and
`train.ppo_epochs` full-batch optimiser steps per iteration (TRL `num_iterations` = epochs).

- equal_work (perf_trl_equal.py): one turn, every completion exactly N tokens on both sides
  (stops ignored), at each `--cells` (completions per iteration x N), the same micro-batch of
  `--micro` rows (TRL's default per-device batch, 8); generation and update tokens/s per side;
  agent-r1 with `algo.skip_zero_advantage` beside it (not equal work: reported apart).
- tool (perf_trl_tool.py): agent-r1's multi-turn search env in the hermes format against TRL's
  `tools=` loop over the same tantivy index, with token-identical prompts and glue and a warm start
  that calls the tool alike in both loops (checked before timing).

Ratio = agent-r1 seconds per iteration / TRL's, per repeat (A B, then B A, ...), then the median.
Modes (and equal_work cells) not run keep their earlier entry in the JSON; each records its own
commit and load average.

    .venv/bin/python -m benchmarks.perf_trl [--full] [--modes equal_work,tool] [--cells 128x256] [--repeats 5]

Quick by default (cells 32x64 and 128x256, 2 repeats); --full: all four cells, 5 repeats, 2
iterations per tool run. The committed figures: `--cells 32x64,32x256,128x64,128x256 --repeats 3`, then
`--modes equal_work --cells 128x256 --repeats 5`.

Needs the `bench` extra (`pip install -e '.[bench]'`: trl). Writes benchmarks/results/perf_trl.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import traceback
from typing import Any

from benchmarks.common import git_commit, loadavg, result_path
from benchmarks.perf_common import add_common_args, bench_cfg, hermes_policy, policy, sft_steps, write_result

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


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


def parse_args(argv: list[str] | None) -> Any:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    ap.add_argument("--modes", default="equal_work,tool", help="equal_work, tool (comma-separated)")
    ap.add_argument("--cells", default=None, help="equal_work: completions per iteration x tokens per completion "
                    "(default 32x64,128x256; --full: 32x64,32x256,128x64,128x256)")
    ap.add_argument("--micro", type=int, default=8, help="equal_work: rows per forward/backward, both sides")
    ap.add_argument("--skip-cells", default="128x256", help="equal_work cells that also run algo.skip_zero_advantage")
    ap.add_argument("--prompts", type=int, default=16, help="tool: prompts per iteration (params.yaml's 16)")
    ap.add_argument("--iterations", type=int, default=None, help="tool: RL iterations per timed run")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (1 if args.smoke else 5 if args.full else 2)
    args.cells = args.cells or ("4x4" if args.smoke else "32x64,32x256,128x64,128x256" if args.full else "32x64,128x256")
    args.iterations = args.iterations or (2 if args.full else 1)
    return args


def run_mode(mode: str, cfg: Any, samples: list[dict], reward: Any, args: Any, previous: dict,
             started: dict[str, Any]) -> dict[str, Any]:
    """One mode's results (its sides, ratios, checks) and the policy's description."""
    import torch

    if mode == "equal_work":
        from benchmarks.perf_trl_equal import run_equal_work

        model, tok, desc = policy(cfg, "cpu", sft_steps(args))
        cells = [tuple(int(x) for x in c.split("x")) for c in args.cells.split(",")]
        skip = {tuple(int(x) for x in c.split("x")) for c in args.skip_cells.split(",") if c}
        out = run_equal_work(cfg, model, tok, samples, reward, args, torch, cells, args.micro, args.repeats, skip)
        for cell in out["cells"].values():  # cells not run this time keep their last entry
            cell["measured"] = {**started, "load_average_at_end": loadavg()}
        out["cells"] = {**previous.get(mode, {}).get("cells", {}), **out["cells"]}
    elif mode == "tool":
        from benchmarks.perf_trl_tool import run_tool, template_path

        model, tok, desc = hermes_policy(cfg, template_path().read_text(), sft_steps(args, 500),
                                         base_steps=sft_steps(args))
        out = run_tool(cfg, model, tok, samples[:args.prompts], reward, args.iterations, args.repeats, args, torch)
    else:
        raise ValueError(f"unknown mode {mode!r}; choose equal_work or tool")
    return {"measured": {**started, "load_average_at_end": loadavg()}, "model": desc, **out}


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
    all_samples = run.samples("train")
    previous = result_path("perf_trl")
    if previous.exists():  # modes not run this time keep their last entry
        results["modes"] = json.loads(previous.read_text()).get("modes", {})
    reward = make_reward(exact_match)
    for mode in args.modes.split(","):
        started = {"commit": git_commit(), "load_average_at_start": loadavg(), "threads": args.threads,
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        try:
            results["modes"][mode] = run_mode(mode, cfg, all_samples, reward, args, results["modes"], started)
        except Exception as exc:  # noqa: BLE001  (recorded in the JSON: which side failed and why)
            traceback.print_exc()
            results["modes"][mode] = {"measured": started, "error": f"{type(exc).__name__}: {exc}"}
        print(mode, {k: v for k, v in results["modes"][mode].items() if k in ("error", "ratio_agent_r1_over_trl")},
              flush=True)
    write_result("perf_trl", results, args.device)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
