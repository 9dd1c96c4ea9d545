"""Does an agent written outside the project learn through the endpoint, and does its session stay one
trajectory? benchmarks/agents/arithmetic_agent.py (the `openai` package only: a developer message and
content parts, a two-parameter calculator schema of its own, up to two calls a turn, a final-answer
step) trained on the arithmetic task by docs/agents.md's three lines: params-arithmetic.yaml with
`env.kind: openai_agent` and `env.agent`, the warm start `train.init_from: sft` makes (`agent-r1 sft`'s: the
agent's own sessions over a scripted policy, agents/demos.py, so it learns the agent's developer message,
tool and results), then GRPO: rollouts at temperature 0.5 with DAPO's dynamic sampling (see DEFAULT).

Recorded per iteration: the training reward, `agent/drift` (calls that could not continue their
session's trajectory), `agent/sessions`, drift per session, steps per session, the share of sessions
whose first reply calls the calculator, the reward of every session rolled out (`sampled_reward`: with
dynamic sampling `reward_mean` is the kept groups' only), and the iteration's wall seconds. Held-out
greedy EM through the agent: the run's own evaluations on the test split at iteration 0, every 20
iterations and at the end. Every drifted call is classified where it happened (`drift`: the same text as other ids, i.e.
a tokenisation the endpoint could not write as sampled, or other text, with the first differing
tokens), so a figure above zero says why.

    python -m benchmarks.outside_agent            # the default size (RL about 70 min on 2 busy cores)
    python -m benchmarks.outside_agent --quick    # a smoke size, under a minute (the bench smoke test)

Writes benchmarks/results/outside_agent.json (outside_agent_quick.json with --quick).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.agents import arithmetic_agent
from benchmarks.common import ROOT, machine, micro_overrides, result_path, work_dir, write_json

AGENT = f"{arithmetic_agent.__name__}:{arithmetic_agent.agent.__name__}"
PARAMS = "params-arithmetic.yaml"
THREE_LINES = {"env.kind": "openai_agent", "env.agent": AGENT}
# params-arithmetic.yaml's model (4 layers, 128 wide). 30% guessing demos, not the params' 60%: with 60% the
# greedy warm start guesses (held-out EM 1) and its sampled calls at T=1 almost never earn a reward (0.00-0.02
# a batch over 17 iterations), so GRPO has nothing to reinforce. RL at lr 5e-5, not the params' 3e-4: from a
# warm start that already copies (EM 69), 3e-4 cut greedy EM to 50-51 (bf16 or fp32, T=1 or 0.7) in 40
# iterations, breaking the answer step (teacher-forced, 49 -> 33 of 60 answers copied the tool's result).
# Rollouts at T 0.5, not the params' 1.0: the warm start's greedy failures are all digit copies (a question's
# number into a call, a result into the next call or the answer; never a missing or malformed call), and at
# T=1 its sampled reward (0.30) is far below its greedy EM (69), so RL at T=1 spent itself sharpening tokens
# greedy decoding already picks (69 -> 68 at lr 5e-5). At T=0.5 a group's sessions differ where the policy
# is really unsure, so most groups are all-correct: dynamic sampling (up to 2 extra rounds) trains on mixed
# groups only. 80 iterations: held-out greedy EM 69 -> 75 (iteration 20) -> 77; 40 iterations reached 74
DEFAULT = {"sft.steps": 1000, "sft.guess_fraction": 0.3, "train.iterations": 80, "train.prompts_per_iter": 16,
           "rollout.n_samples": 8, "rollout.temperature": 0.5, "train.lr": 5e-5,
           "algo.dynamic_sampling.enabled": True, "algo.dynamic_sampling.max_extra_rounds": 2,
           "train.eval_size": 100, "train.eval_every": 20, "train.threads": 2, "train.lr_schedule": "cosine"}
QUICK = {**{k: v for k, v in micro_overrides(Path(".")).items() if k.startswith("model.")},
         "sft.steps": 4, "sft.batch_size": 4, "train.iterations": 2, "train.prompts_per_iter": 2,
         "rollout.n_samples": 2, "train.eval_size": 4, "train.threads": 1, "rollout.max_tokens_per_turn": 16,
         "train.minibatch_size": 8}
EXAMPLES = 8  # drifted calls kept with their text, per run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke size: micro model, 2 iterations (under a minute)")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--sft-steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=None, help="data, warm starts and runs (default benchmarks/.work/outside_agent)")
    ap.add_argument("--out", default=None, help="default benchmarks/results/outside_agent[_quick].json")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an extra config override")
    return ap.parse_args(argv)


def overrides(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """params-arithmetic.yaml + the three lines + this benchmark's size and folders. The run folder is a new
    one under the work folder each time; the warm start is reused by its key (same data, model, SFT)."""
    size = dict(QUICK if args.quick else DEFAULT)
    if args.iterations:
        size["train.iterations"] = args.iterations
    if args.sft_steps:
        size["sft.steps"] = args.sft_steps
    from agent_r1.config import parse_overrides

    size.update(parse_overrides(args.set))
    return {**THREE_LINES, "seed": args.seed, "data.dir": str(work / "data"), "search.index_dir": str(work / "index"),
            "train.runs_dir": str(work / "runs"), "train.out_dir": "", "sft.out_dir": "", "train.init_from": "sft",
            "train.eval_every": 0, "train.checkpoint_every": 1000, "train.log_trajectories_every": 0,
            "env.agent_concurrency": 256, **size}


def first_difference(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def classify_drift(prev: Any, rec: Any, decode: Any) -> dict[str, Any]:
    """Why `rec`'s prompt does not extend `prev`'s prompt + completion: where the first differing token
    lies (in the previous prompt or in the reply sampled for it), and whether the text is the same
    (ids other than those sampled: a tokenisation) or not (a message the agent or the template changed)."""
    context = list(prev.prompt_ids) + list(prev.completion_ids)
    at = first_difference(context, list(rec.prompt_ids))
    same_text = decode(list(rec.prompt_ids)).startswith(decode(context))
    return {"kind": "same text, other ids" if same_text else "other text",
            "where": "previous reply" if at >= len(prev.prompt_ids) else "previous prompt",
            "messages": rec.messages, "token": at,
            "sampled": decode(context[max(0, at - 12):at + 12]),
            "sent": decode(list(rec.prompt_ids)[max(0, at - 12):at + 12])}


def session_report(sessions: list[Any], decode: Any) -> dict[str, Any]:
    """One rollout's sessions (AgentRollout.last_sessions): how many first replies called a tool, and each
    drifted call classified (assemble.build_trajectories's continuation test, on the calls it keeps)."""
    from agent_r1.agents.assemble import extends
    from agent_r1.agents.retries import used_calls

    tool_first, reward, drifts = 0, 0.0, []
    for _sample, records, steps in sessions:
        reward += steps[-1].outcome_reward if steps else 0.0
        calls, _ = used_calls(records)
        tool_first += bool(calls) and bool(calls[0].info.get("tool_calls"))
        context: list[int] = []
        for i, rec in enumerate(calls):
            if i and not extends(rec.prompt_ids, context):
                drifts.append(classify_drift(calls[i - 1], rec, decode))
            context = list(rec.prompt_ids) + list(rec.completion_ids)
    return {"sessions": len(sessions), "tool_first": tool_first, "reward": reward, "drifts": drifts}


@contextlib.contextmanager
def watched_rollouts(reports: list[dict[str, Any]]):
    """Every agent rollout of the run (training and greedy evaluation) reports its sessions into `reports`."""
    from agent_r1.agents.rollout import AgentRollout

    original = AgentRollout.run_rollout

    def watched(self, engine, codec, *args, **kwargs):
        trajs = original(self, engine, codec, *args, **kwargs)
        reports.append({**session_report(self.last_sessions, codec.decode), "greedy": bool(kwargs.get("greedy"))})
        return trajs

    AgentRollout.run_rollout = watched
    try:
        yield
    finally:
        AgentRollout.run_rollout = original


def warm_start(cfg: Any, work: Path) -> dict[str, Any]:
    """The run's warm start (`train.init_from: sft`: made here once, found again by run_train), timed."""
    from agent_r1.runs.warm_start import ensure_warm_start

    timings = work / "sft_seconds.json"
    known = json.loads(timings.read_text()) if timings.exists() else {}
    start = time.perf_counter()
    made = ensure_warm_start(cfg)
    if not made.reused:
        known[made.hash] = round(time.perf_counter() - start, 1)
        timings.write_text(json.dumps(known, indent=1) + "\n")
    return {"hash": made.hash, "reused": made.reused, "sft_steps": cfg.sft.steps, "sft_seconds": known.get(made.hash)}


def iteration_row(it: int, m: dict[str, Any], seconds: float, report: dict[str, Any] | None) -> dict[str, Any]:
    sessions = m.get("agent/sessions", 0.0)
    row = {"iteration": it, "reward_mean": m.get("reward_mean"), "agent/drift": m.get("agent/drift"),
           "agent/sessions": sessions,
           "drift_per_session": (m.get("agent/drift", 0.0) / sessions) if sessions else None,
           "agent/steps_per_session": m.get("agent/steps_per_session"), "agent/calls": m.get("agent/calls"),
           "agent/errors": m.get("agent/errors"), "agent/length_cut": m.get("agent/length_cut"),
           "seconds": round(seconds, 2), **{k: round(m[k], 3) for k in ("rollout_s", "update_s") if k in m},
           # algo.dynamic_sampling: rollout rounds, and the all-equal groups dropped over them (reward_mean is then
           # the kept groups', every one of them mixed: not the policy's sampled reward)
           **{k: m[k] for k in ("dynamic/rounds", "dynamic/groups_dropped") if k in m}}
    if report and report["sessions"]:
        row["tool_first_rate"] = round(100.0 * report["tool_first"] / report["sessions"], 1)
        # every session rolled out, the groups dynamic sampling dropped too
        row["sampled_reward"] = round(report["reward"] / report["sessions"], 4)
    return row


def iteration_rollouts(reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The training rollouts of one iteration as one report: one rollout, or one per round of
    `algo.dynamic_sampling` (the greedy evaluations among `reports` left out)."""
    trained = [r for r in reports if not r["greedy"]]
    if not trained:
        return None
    return {k: sum(r[k] for r in trained) for k in ("sessions", "tool_first", "reward")}


def held_out(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The greedy held-out evaluation a metrics row holds (`eval/*`), or None."""
    if not row or "eval/em" not in row:
        return None
    keys = ("em", "n", "search_first_rate", "tool_calls_per_question", "mean_turns", "valid_call_rate")
    return {("tool_first_rate" if k == "search_first_rate" else k): row[f"eval/{k}"]
            for k in keys if f"eval/{k}" in row}


def drift_kinds(drifts: list[dict[str, Any]]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for d in drifts:
        label = f"{d['kind']} ({d['where']})"
        kinds[label] = kinds.get(label, 0) + 1
    return kinds


def summarise(doc: dict[str, Any]) -> dict[str, Any]:
    curve = doc["curve"]
    sessions = sum(r["agent/sessions"] or 0 for r in curve)
    drift = float(sum(r["agent/drift"] or 0 for r in curve))
    # iterations 2..N-1: the first also holds the start-of-run evaluation, the last the end-of-run one
    middle = [r["seconds"] for r in curve[1:-1]] or [r["seconds"] for r in curve]
    k = max(1, min(5, len(curve) // 4))
    # the reward of every session rolled out where the rows have it (with dynamic sampling, reward_mean is the
    # kept groups', all of them mixed), else the trained batch's
    reward = "sampled_reward" if all("sampled_reward" in r for r in curve) else "reward_mean"
    before, after = doc["held_out"]["before"], doc["held_out"]["after"]
    greedy = [r for r in doc["rollouts"] if r["greedy"]]
    return {"em_before": before and before["em"], "em_after": after and after["em"],
            "held_out_n": after and after.get("n"),
            "tool_first_before": before and before.get("tool_first_rate"),
            "tool_first_after": after and after.get("tool_first_rate"),
            "reward_first_iterations": sum(r[reward] for r in curve[:k]) / k,
            "reward_last_iterations": sum(r[reward] for r in curve[-k:]) / k, "reward_window": k,
            "reward_of": reward,
            "sessions": sessions, "drift": drift, "drift_per_session": drift / sessions if sessions else 0.0,
            "max_drift_per_session": max((r["drift_per_session"] or 0.0) for r in curve),
            "steps_per_session": sum((r["agent/steps_per_session"] or 0) * (r["agent/sessions"] or 0) for r in curve)
            / sessions if sessions else None,
            "drift_kinds": doc["drift_kinds"],
            "greedy_drift_per_session": sum(r["drift"] for r in greedy) / max(1, sum(r["sessions"] for r in greedy)),
            "seconds_per_iteration": sum(middle) / len(middle),
            "sft_seconds": doc["warm_start"]["sft_seconds"], "rl_seconds": doc["rl_seconds"]}


def train(cfg: Any) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], float]:
    """GRPO from the warm start through the agent: (run_train's result, the per-iteration curve, every agent
    rollout's report, the run's wall seconds)."""
    from agent_r1.runs.run import run_train

    reports: list[dict[str, Any]] = []
    curve: list[dict[str, Any]] = []
    clock = [time.perf_counter()]
    start = clock[0]

    seen = [0]  # reports of the iterations already recorded

    def on_iteration(it: int, m: dict[str, Any]) -> None:
        now = time.perf_counter()
        # this iteration's rollouts: one, or one per dynamic-sampling round (and any greedy evaluation)
        curve.append(iteration_row(it, m, now - clock[0], iteration_rollouts(reports[seen[0]:])))
        seen[0] = len(reports)
        clock[0] = now
        r = curve[-1]
        print(f"iteration {it}: reward {r['reward_mean']:.3f} drift {r['agent/drift']:.0f}/{r['agent/sessions']:.0f} "
              f"sessions, steps/session {r['agent/steps_per_session']:.2f}, tool first {r.get('tool_first_rate')}%, "
              f"{r['seconds']:.1f} s", flush=True)

    with watched_rollouts(reports):
        result = run_train(cfg, on_iteration=on_iteration)
    return result, curve, reports, round(time.perf_counter() - start, 1)


def record(doc: dict[str, Any], result: dict[str, Any], curve: list[dict[str, Any]],
           reports: list[dict[str, Any]]) -> None:
    """The run's figures into `doc`: held-out EM before (the run's iteration-0 evaluation) and after, the
    curve, each rollout's sessions and drifted calls (classified; a few kept with their text)."""
    run_dir = Path(result["out_dir"])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    start_row = next((r for r in rows if r.get("step") == 0), None)
    doc["held_out"] = {"split": "test", "greedy": True, "before": held_out(start_row),
                       "after": held_out(result["final"]),
                       # every greedy evaluation of the run (train.eval_every), the start's and the end's included
                       "curve": [{"iteration": r["step"], "em": r["eval/em"]} for r in rows if "eval/em" in r]}
    doc["curve"] = curve
    doc["drift_kinds"] = drift_kinds([d for r in reports if not r["greedy"] for d in r["drifts"]])
    doc["greedy_drift_kinds"] = drift_kinds([d for r in reports if r["greedy"] for d in r["drifts"]])
    doc["rollouts"] = [{"greedy": r["greedy"], "sessions": r["sessions"], "tool_first": r["tool_first"],
                        "reward": r["reward"],
                        "drift": len(r["drifts"])} for r in reports]
    doc["drift_examples"] = [d for r in reports for d in r["drifts"]][:EXAMPLES]
    doc["run"] = {"folder": str(run_dir), "iterations": result["iterations"], "checkpoint": result["checkpoint"]}
    doc["summary"] = summarise(doc)
    doc["load_average_after"] = [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(ROOT)  # env.agent is imported from the working directory, and config paths compare equal
    from agent_r1.config import load_config
    from agent_r1.runs.assembly import set_threads

    suffix = "_quick" if args.quick else ""
    work = Path(args.work or work_dir(f"outside_agent{suffix}")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out or result_path(f"outside_agent{suffix}"))
    over = overrides(args, work)
    cfg = load_config(PARAMS, over)
    set_threads(cfg.train.threads)
    doc: dict[str, Any] = {
        "command": " ".join(["python -m benchmarks.outside_agent", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(), "agent": AGENT, "params": PARAMS, "overrides": over,
        "model_chat_template": cfg.model.chat_template}
    doc["warm_start"] = warm_start(cfg, work)
    print(f"warm start {doc['warm_start']}", flush=True)
    result, curve, reports, doc["rl_seconds"] = train(cfg)
    record(doc, result, curve, reports)
    write_json(out, doc)
    s = doc["summary"]
    print(json.dumps({"held-out greedy EM": f"{s['em_before']} -> {s['em_after']} (n={s['held_out_n']})",
                      "reward": f"{s['reward_first_iterations']:.3f} -> {s['reward_last_iterations']:.3f}",
                      "drift per session": round(s["drift_per_session"], 4), "drift kinds": s["drift_kinds"],
                      "steps per session": s["steps_per_session"],
                      "seconds per iteration": round(s["seconds_per_iteration"], 2),
                      "sft seconds": s["sft_seconds"]}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
