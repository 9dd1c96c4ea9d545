"""agent-r1 against TRL's GRPOTrainer: wall time per RL iteration, same work, alternated.

Both train the same policy (a copy of the same warm-started model, fresh per run) with GRPO on the
same prompts (the run's first `--prompts` training questions, rendered by the same chat template),
group size `rollout.n_samples`, at most `rollout.max_tokens_per_turn` new tokens, temperature 1,
no KL term, the same learning rate, weight decay and gradient clipping, and the same number of
optimiser steps per iteration (`train.ppo_epochs` full-batch steps: TRL `num_iterations` = epochs,
one minibatch of all completions). An iteration = generate + reward + old log-probs + the steps.

- single_turn (TRL's strongest case): agent-r1 with `rollout.max_turns: 1`; TRL with plain prompts.
- tool: agent-r1's multi-turn search env in the hermes format (`<tool_call>` JSON) against TRL's
  `tools=[search]` over the same tantivy index (TRL parses tool calls through its Qwen2.5 response
  template, so the tokenizer gets TRL's qwen2_5 chat template for both sides). The policy here is
  perf_common.hermes_policy: the tag warm start plus SFT on the same demos in the hermes format
  through that template, so both sides see a policy that writes `<tool_call>` JSON that parses.
  Budgets: both sides stop an action at the same ids and allow `rollout.max_turns` generations
  (TRL `max_tool_calling_iterations` = max_turns - 1); the search tool returns the same text
  (agent_r1.tools.search.format_hits, cut to `rollout.max_observation_tokens` tokens, as the
  rollout cuts it); TRL has one completion budget for all turns and tool results together, which
  is set to agent-r1's `rollout.max_total_tokens` minus the longest prompt. TRL has no per-turn
  cap (agent-r1: `rollout.max_tokens_per_turn`), which the stop ids make rarely binding (the
  JSON records actions per turn for both sides). Both report turns and tool calls per trajectory.

Ratio = agent-r1 seconds per iteration / TRL's, per repeat (the order alternates). Target <= 0.7.

    .venv/bin/python benchmarks/perf_trl.py [--full] [--modes single_turn,tool] [--device cuda]

Needs the `bench` extra (`pip install -e '.[bench]'`: trl). Writes benchmarks/results/perf_trl.json.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_common import (  # noqa: E402
    WORK,
    add_common_args,
    device_overrides,
    hermes_policy,
    load_cfg,
    policy,
    ratio_summary,
    summary,
    write_result,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def trl_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("trl")
    except Exception:  # noqa: BLE001
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap)
    ap.add_argument("--modes", default="single_turn,tool")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per iteration (default: train.prompts_per_iter)")
    ap.add_argument("--iterations", type=int, default=None, help="RL iterations per timed run")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    repeats = args.repeats or (5 if args.full else 2)
    iterations = args.iterations or (4 if args.full else 1)
    cuda = args.device.startswith("cuda")
    cfg = load_cfg(device_overrides(args.device))
    n_prompts = args.prompts or (cfg.train.prompts_per_iter if args.full else 8)
    results: dict[str, Any] = {"trl": trl_version(), "config": {
        "prompts_per_iteration": n_prompts, "group_size": cfg.rollout.n_samples, "iterations_per_run": iterations,
        "max_new_tokens": cfg.rollout.max_tokens_per_turn, "optimizer_steps_per_iteration": cfg.train.ppo_epochs,
        "lr": cfg.train.lr, "repeats": repeats, "threads": args.threads, "device": args.device}, "modes": {}}
    if results["trl"] is None:
        results["error"] = "trl is not installed: pip install -e '.[bench]'"
        write_result("perf_trl", results, args.device)
        print(results["error"])
        return 1

    from agent_r1.rewards.qa import exact_match
    from agent_r1.runs.assembly import ensure_data, ensure_index, load_samples

    data_dir = ensure_data(cfg)
    index_dir = ensure_index(cfg, data_dir)
    base_model, tok, model_desc = policy(cfg, args.device, dtype="bfloat16" if cuda else "float32")
    results["config"]["model"] = model_desc
    samples = load_samples(data_dir / cfg.data.train_file)[:n_prompts]
    for mode in args.modes.split(","):
        try:
            model, mtok = base_model, tok
            if mode == "tool" and not cuda:  # a warm start in the hermes format (see the module docstring)
                import trl

                template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
                model, mtok, desc = hermes_policy(cfg, template)
                results["config"]["tool_model"] = desc
            results["modes"][mode] = run_mode(mode, cfg, model, mtok, samples, exact_match, iterations,
                                              repeats, args, torch)
        except Exception as exc:  # noqa: BLE001  (recorded in the JSON: which side failed and why)
            traceback.print_exc()
            results["modes"][mode] = {"error": f"{type(exc).__name__}: {exc}"}
        print(mode, {k: v for k, v in results["modes"][mode].items() if k in ("error", "ratio_agent_r1_over_trl")},
              flush=True)
    write_result("perf_trl" + ("_cuda" if cuda else ""), results, args.device)
    return 0


def run_mode(mode: str, cfg: Any, base_model: Any, tok: Any, samples: list[dict], exact_match: Any,
             iterations: int, repeats: int, args: Any, torch: Any) -> dict[str, Any]:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from agent_r1.config import load_config  # noqa: F401
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.training.trainer import RLTrainer

    tool = mode == "tool"
    tok = copy.deepcopy(tok)
    if tool:  # TRL parses tool calls only through the response templates of chat templates it knows
        import trl

        tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    overrides = {"rollout": replace(cfg.rollout, max_turns=cfg.rollout.max_turns if tool else 1),
                 "env": replace(cfg.env, format="hermes" if tool else cfg.env.format),
                 "train": replace(cfg.train, prompts_per_iter=len(samples), minibatch_size=len(samples) * cfg.rollout.n_samples,
                                  iterations=iterations, threads=args.threads)}
    rcfg = replace(cfg, **overrides)
    codec = ChatCodec(tok)

    from agent_r1.retrieval.base import open_index
    from agent_r1.runs.assembly import make_env_factory
    from agent_r1.tools.search import format_hits

    retriever = open_index(cfg.search.index_dir)
    make_env = make_env_factory(rcfg, retriever)
    tool_calls_made = [0]

    def search(query: str) -> str:
        """Search the knowledge base. Returns the top documents for a query.

        Args:
            query: search query
        """
        # agent-r1's search tool text, cut to the rollout's observation budget as the rollout cuts it
        tool_calls_made[0] += 1
        text = format_hits(retriever.search([query], cfg.search.k)[0], cfg.search.max_chars_per_doc)
        ids = codec.encode(text)
        return text if len(ids) <= rcfg.rollout.max_observation_tokens else codec.decode(
            ids[:rcfg.rollout.max_observation_tokens])

    # the same prompt text for both sides: agent-r1's env messages through the tokenizer's template
    messages = [make_env(s).reset(s) for s in samples]
    budget: dict[str, Any] = {}
    if tool:
        dataset = Dataset.from_list([{"prompt": m, "answers": s["answers"]} for m, s in zip(messages, samples)])
        env0 = make_env(samples[0])
        ours = [len(codec.prompt_ids(m, tools=env0.tool_schemas)) for m in messages]
        theirs = [len(codec.encode(tok.apply_chat_template(m, tools=[search], tokenize=False, add_generation_prompt=True)))
                  for m in messages]
        budget = {"prompt_tokens_agent_r1": [min(ours), max(ours)], "prompt_tokens_trl": [min(theirs), max(theirs)],
                  "trl_max_completion_length": rcfg.rollout.max_total_tokens - max(theirs),
                  "trl_max_tool_calling_iterations": rcfg.rollout.max_turns - 1,
                  "agent_r1": {k: getattr(rcfg.rollout, k) for k in ("max_turns", "max_tokens_per_turn",
                                                                       "max_observation_tokens", "max_total_tokens")}}
    else:
        dataset = Dataset.from_list([{"prompt": codec.decode(codec.prompt_ids(m)), "answers": s["answers"]}
                                     for m, s in zip(messages, samples)])

    def reward(completions, answers, **kwargs):
        out = []
        for c, gold in zip(completions, answers):
            text = c if isinstance(c, str) else " ".join(str(m.get("content", "")) for m in c)
            found = ANSWER.findall(text)
            out.append(float(bool(found) and exact_match(found[-1].strip(), gold)))
        return out

    def run_agent_r1(r: int) -> dict[str, float]:
        model = copy.deepcopy(base_model)
        trainer = RLTrainer(replace(rcfg, seed=r), model, tok, make_env, samples)
        steps = []
        for _ in range(iterations):
            m = trainer.train_step()
            steps.append({"rollout_s": m["rollout_s"], "update_s": m["update_s"], "action_tokens": m["action_tokens"],
                          "response_tokens": m["response_length"], "turns": m["turns_per_trajectory"],
                          "tool_calls": m["tool_calls_per_trajectory"], "valid_call_rate": m["valid_call_rate"],
                          "truncated_actions": m["truncated_actions"],
                          **{k: v for k, v in m.items() if k.startswith("stop/")}})
        return {"steps": steps}

    # agent-r1 stops an action at the format's closing tags; TRL stops at its eos ids: give it the same ids
    fmt = make_env(samples[0]).fmt
    stop_ids = [tok.eos_token_id] + [ids[0] for ids in (codec.encode(x) for x in fmt.stop_strings) if len(ids) == 1]

    class CountingGRPO(GRPOTrainer):
        """Records, per generation batch, turns (assistant messages), tool calls, completion tokens
        (tool results included) and sampled tokens per trajectory."""

        seen: list[dict[str, float]] = []

        def _tool_call_loop(self, *a, **k):
            out = super()._tool_call_loop(*a, **k)
            tool_mask, completions, completion_ids = out[0], out[1], out[2]
            n = max(len(completions), 1)
            self.seen.append({
                "turns": sum(sum(m.get("role") == "assistant" for m in c) for c in completions) / n,
                "tool_calls": out[4] / n, "tool_failures": out[5] / n,
                "completion_tokens": sum(map(len, completion_ids)) / n,
                "action_tokens": sum(map(sum, tool_mask)) / n,
                "hit_completion_budget": sum(len(c) >= self.max_completion_length for c in completion_ids) / n})
            return out

    def run_trl(r: int) -> dict[str, float]:
        model = copy.deepcopy(base_model)
        model.generation_config.eos_token_id = stop_ids
        n_completions = len(samples) * cfg.rollout.n_samples
        gargs = GRPOConfig(
            output_dir=str(WORK / "trl_out"), use_cpu=not args.device.startswith("cuda"), bf16=args.device.startswith("cuda"),
            per_device_train_batch_size=n_completions, gradient_accumulation_steps=1, steps_per_generation=1,
            num_generations=cfg.rollout.n_samples, num_iterations=cfg.train.ppo_epochs,
            max_steps=iterations * cfg.train.ppo_epochs, max_completion_length=budget.get("trl_max_completion_length", cfg.rollout.max_tokens_per_turn),
            temperature=cfg.rollout.temperature, top_k=0, beta=0.0, learning_rate=cfg.train.lr,
            weight_decay=cfg.train.weight_decay, max_grad_norm=cfg.train.max_grad_norm, lr_scheduler_type="constant",
            warmup_steps=0, logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True, seed=r,
            dataloader_num_workers=0, max_tool_calling_iterations=cfg.rollout.max_turns - 1 if tool else None,
        )
        CountingGRPO.seen = []
        trainer = CountingGRPO(model=model, reward_funcs=reward, args=gargs, train_dataset=dataset,
                              processing_class=tok, tools=[search] if tool else None)
        torch.set_num_threads(args.threads)  # accelerate may change it
        t0 = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - t0
        logs = [h for h in trainer.state.log_history if "loss" in h]
        return {"train_s": total, "completion_length": [h["completions/mean_length"] for h in logs
                                                        if "completions/mean_length" in h],
                **({"rollouts": list(CountingGRPO.seen)} if tool else {})}

    agent_s, trl_s, runs = [], [], []
    run_trl(1000)  # warm-up: first-call imports and allocations of both sides
    run_agent_r1(1000)
    for r in range(repeats):
        order = [("agent_r1", run_agent_r1), ("trl", run_trl)]
        pair: dict[str, Any] = {}
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            detail = fn(r)
            pair[name] = {"seconds_per_iteration": (time.perf_counter() - t0) / iterations, **detail}
        agent_s.append(pair["agent_r1"]["seconds_per_iteration"])
        trl_s.append(pair["trl"]["seconds_per_iteration"])
        runs.append(pair)
        print(mode, r, round(agent_s[-1], 3), round(trl_s[-1], 3), flush=True)
    retriever.close()
    per_side: dict[str, Any] = {}
    if tool:
        ours = [st for p in runs for st in p["agent_r1"]["steps"]]
        theirs = [x for p in runs for x in p["trl"]["rollouts"]]
        mean = lambda xs, k: round(sum(x[k] for x in xs) / max(len(xs), 1), 3)  # noqa: E731
        per_side = {"per_trajectory": {
            "agent_r1": {k: mean(ours, k) for k in ("turns", "tool_calls", "valid_call_rate", "action_tokens",
                                                      "response_tokens")},
            "trl": {k: mean(theirs, k) for k in ("turns", "tool_calls", "tool_failures", "action_tokens",
                                                   "completion_tokens", "hit_completion_budget")}},
            "budgets": budget}
    comparable, note = not tool, ""
    if tool:  # the same kind of work: both sides call the tool, and take about as many turns
        a_, t_ = per_side["per_trajectory"]["agent_r1"], per_side["per_trajectory"]["trl"]
        comparable = (min(a_["tool_calls"], t_["tool_calls"]) >= 1.0
                      and abs(a_["turns"] - t_["turns"]) <= 0.2 * max(a_["turns"], t_["turns"]))
        note = ("criterion: both sides average >= 1 tool call per trajectory and their turns per trajectory differ "
                "by <= 20%. Differences left: TRL's budget is one completion length for all turns and tool results "
                "(set to max_total_tokens minus the longest prompt) with no per-turn cap; agent-r1 caps each "
                "action at max_tokens_per_turn. TRL ends an episode at a turn without a parseable call; agent-r1 "
                "answers a malformed action with an error observation and goes on. The tool schema in the prompt "
                "differs slightly (TRL derives it from the function signature; see budgets.prompt_tokens_*).")
    return {"comparable": comparable, "note": note, **per_side, "agent_r1_seconds_per_iteration": summary(agent_s), "trl_seconds_per_iteration": summary(trl_s),
            "ratio_agent_r1_over_trl": ratio_summary(agent_s, trl_s), "target": "<= 0.7", "runs": runs,
            "env_format": rcfg.env.format, "max_turns": rcfg.rollout.max_turns, "stop_ids": stop_ids}


if __name__ == "__main__":
    raise SystemExit(main())
