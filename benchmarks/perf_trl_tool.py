"""perf_trl.py's tool mode: agent-r1's multi-turn search loop against TRL's `tools=` loop, like for like.

What is made the same, and checked before anything is timed (a failed check is recorded with the
evidence, and the timing is marked not comparable):
- the prompt, token for token: TRL gets the search tool as `SchemaTool`, a dict holding agent-r1's
  own JSON schema that TRL can also call (transformers renders a dict tool as it is; a plain Python
  function would be re-described from its signature: another schema, other tokens). Every prompt's
  ids are compared.
- the glue after a call: both stop an action at `</tool_call>` (the same stop ids), so the model
  never writes the end-of-turn token itself; agent-r1's observation glue starts with it, and TRL's
  tool suffix gets it prepended (`EndOfTurnGRPO`); the tool text is agent-r1's search result, cut
  to `rollout.max_observation_tokens` as the rollout cuts it. One call's ids are compared.
- the micro-batch: `--micro` rows per forward/backward on both sides, and every other shared setting
  (perf_trl.py's docstring).
- the policy: perf_common.hermes_policy (the tag warm start, then SFT on the same demos in the
  hermes format through TRL's qwen2_5 template); the warm-up run of each side must make tool
  calls per trajectory within 10% of each other.

- the episode's end: TRL ends it at a turn without a parseable call; agent-r1's env is wrapped to
  do the same here (`ending_like_trl`; by itself it answers with an error observation and goes on).
  Both allow `rollout.max_turns` generations (TRL `max_tool_calling_iterations` = max_turns - 1).

A difference that remains (recorded): TRL has one completion budget for all turns and tool results
(`rollout.max_total_tokens` minus the longest prompt) and no per-turn cap (agent-r1:
`rollout.max_tokens_per_turn`), so a turn that never closes its call runs longer on TRL's side.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.common import loadavg
from benchmarks.perf_common import alternate, time_generate
from benchmarks.perf_trl import grpo_config, seconds_ratio, side_summary, stop_ids, timed_grpo_class


class SchemaTool(dict):
    """A tool TRL can call (by `__name__`) whose chat-template rendering is exactly `schema`."""

    def __init__(self, schema: dict[str, Any], fn: Any):
        super().__init__(schema)
        self.__name__ = schema["function"]["name"]
        self._fn = fn

    def __call__(self, **kwargs: Any) -> Any:
        return self._fn(**kwargs)


def run_tool(cfg: Any, model: Any, tok: Any, samples: list[dict], reward_fn: Any, args: Any) -> dict[str, Any]:
    bench = ToolBench(cfg, model, tok, samples, reward_fn, args)
    checks = bench.checks
    # the warm-up runs (untimed) are the check that both loops call the tool alike
    warm = {"agent_r1": bench.agent_r1(1000), "trl": bench.trl(1000)}
    calls_a = per_trajectory([warm["agent_r1"]])["tool_calls"]
    calls_t = per_trajectory([warm["trl"]])["tool_calls"]
    checks["tool_calls_per_trajectory_warmup"] = {"agent_r1": calls_a, "trl": calls_t}
    checks["tool_calls_within_10_percent"] = abs(calls_a - calls_t) <= 0.1 * max(calls_a, calls_t, 1e-9)
    checks["examples_warmup"] = {k: v["example"] for k, v in warm.items()}
    print("tool: warm-up tool calls per trajectory", checks["tool_calls_per_trajectory_warmup"], flush=True)
    timed_runs = alternate({"agent_r1": bench.agent_r1, "trl": bench.trl}, args.repeats)
    bench.run.close()
    runs = {k: [v for _, v in vals] for k, vals in timed_runs.items()}
    a, t = runs["agent_r1"], runs["trl"]
    for name, vals in runs.items():
        print(f"  {name}: " + ", ".join(f"{v['seconds']:.1f}s (load {v['load'][0]})" for v in vals), flush=True)
    comparable = checks["prompts_identical"] and checks["glue_identical"] and checks["tool_calls_within_10_percent"]
    return {"comparable": comparable, "checks": checks, "budgets": bench.budgets, "agent_r1": bench.side(a),
            "trl": bench.side(t), "ratio_agent_r1_over_trl": seconds_ratio(a, t),
            "prompts": len(samples), "group_size": cfg.rollout.n_samples, "iterations_per_run": args.iterations,
            "micro_batch_size": bench.micro,
            "stop_ids": bench.stop_ids, "note": __doc__.split("\n\n", 1)[1].strip()}


def per_trajectory(runs: list[dict[str, Any]]) -> dict[str, float]:
    steps = [s for run in runs for s in run["steps"]]
    keys = [k for k in steps[0] if isinstance(steps[0][k], (int, float))]
    return {k: round(statistics.mean(s[k] for s in steps), 3) for k in keys}


def end_of_turn_grpo_class(tok: Any, prompt_tokens: list[int]) -> Any:
    """TRL's GRPOTrainer (generation timed) with agent-r1's glue after a call (see the module docstring);
    records, per generation batch, turns, tool calls, completion tokens and sampled tokens per trajectory."""

    class EndOfTurnGRPO(timed_grpo_class()):
        seen: list[dict[str, Any]] = []

        def _get_tool_suffix_ids(self, tool_messages: Any) -> list[int]:
            return [tok.eos_token_id] + super()._get_tool_suffix_ids(tool_messages)

        def _tool_call_loop(self, *a: Any, **k: Any) -> Any:
            out = super()._tool_call_loop(*a, **k)
            tool_mask, completions, completion_ids = out[0], out[1], out[2]
            n = max(len(completions), 1)
            EndOfTurnGRPO.seen.append({
                "turns": sum(sum(m.get("role") == "assistant" for m in c) for c in completions) / n,
                "tool_calls": out[4] / n, "tool_failures": out[5] / n,
                "tokens": sum(map(len, completion_ids)) / n + statistics.mean(prompt_tokens),
                "sampled_tokens": sum(map(sum, tool_mask)) / n,
                "hit_completion_budget": sum(len(c) >= self.max_completion_length for c in completion_ids) / n,
                "example": tok.decode(completion_ids[0])[:600]})
            return out

    return EndOfTurnGRPO


class ToolBench:
    """The tool mode's shared setup (config, env, the search tool both sides call, checks), then one
    method per side."""

    def __init__(self, cfg: Any, model: Any, tok: Any, samples: list[dict], reward_fn: Any, args: Any):
        from datasets import Dataset

        from agent_r1.rollout.chat import ChatCodec
        from agent_r1.runs.run import Run

        self.cfg, self.model, self.tok, self.samples, self.reward_fn = cfg, model, tok, samples, reward_fn
        self.iterations, self.args = args.iterations, args
        self.n_completions = n_completions = len(samples) * cfg.rollout.n_samples
        self.micro = args.micro if n_completions % args.micro == 0 else n_completions
        self.rcfg = rcfg = replace(cfg, env=replace(cfg.env, format="hermes"),
                                   train=replace(cfg.train, prompts_per_iter=len(samples), minibatch_size=n_completions,
                                                 micro_batch_size=self.micro, iterations=iterations,
                                                 threads=args.threads))
        self.codec = ChatCodec(tok)
        self.run = Run(rcfg)  # its retriever and env factory (closed by run_tool)
        self.retriever = self.run.retriever
        self.make_env = ending_like_trl(self.run.env_factory)
        env0 = self.make_env(samples[0])
        (schema,) = [s for s in env0.tool_schemas if s["function"]["name"] == "search"]
        self.tool = SchemaTool(schema, self.search)
        messages = [self.make_env(s).reset(s) for s in samples]
        self.checks = _check_identical(tok, self.codec, self.make_env, samples[0], messages, self.tool, self.search,
                                       rcfg)
        self.stop_ids = stop_ids(tok, self.codec, env0.fmt)
        self.dataset = Dataset.from_list([{"prompt": m, "answers": s["answers"]} for m, s in zip(messages, samples)])
        longest = max(self.checks["prompt_tokens"])
        self.budgets = {"trl_max_completion_length": rcfg.rollout.max_total_tokens - longest,
                        "trl_max_tool_calling_iterations": rcfg.rollout.max_turns - 1,
                        "agent_r1": {k: getattr(rcfg.rollout, k) for k in (
                            "max_turns", "max_tokens_per_turn", "max_observation_tokens", "max_total_tokens")}}

    def search(self, query: str) -> str:
        """agent-r1's search tool text, cut to the rollout's observation budget as the rollout cuts it."""
        from agent_r1.tools.search import format_hits

        cfg = self.cfg
        text = format_hits(self.retriever.search([query], cfg.search.k)[0], cfg.search.max_chars_per_doc)
        ids = self.codec.encode(text)
        cap = self.rcfg.rollout.max_observation_tokens
        return text if len(ids) <= cap else self.codec.decode(ids[:cap])

    def agent_r1(self, r: int) -> dict[str, Any]:
        from agent_r1.training.trainer import RLTrainer

        trainer = RLTrainer(replace(self.rcfg, seed=r), copy.deepcopy(self.model), self.tok, self.make_env,
                            self.samples)
        gen, steps = time_generate(trainer.engine), []
        load, t0 = loadavg(), time.perf_counter()
        for _ in range(self.iterations):
            m = trainer.train_step()
            trajs = trainer.last_trajectories
            steps.append({"tool_calls": m["tool_calls_per_trajectory"], "turns": m["turns_per_trajectory"],
                          "valid_call_rate": m["valid_call_rate"], "action_tokens": m["action_tokens"],
                          "tokens": sum(len(t.token_ids) for t in trajs) / len(trajs),
                          "sampled_tokens": sum(len(t.action_ids) for tr in trajs for t in tr.turns) / len(trajs)})
        total = time.perf_counter() - t0
        return {"seconds": total / self.iterations, "generate_s": gen[0] / self.iterations, "load": load,
                "steps": steps, "example": self.codec.decode(trajs[0].token_ids[len(trajs[0].prompt_ids):])[:600]}

    def trl(self, r: int) -> dict[str, Any]:
        import torch

        m = copy.deepcopy(self.model)
        m.generation_config.eos_token_id = self.stop_ids
        grpo = end_of_turn_grpo_class(self.tok, self.checks["prompt_tokens"])
        grpo.seen, grpo.gen_s = [], 0.0
        args = grpo_config(self.cfg, r, self.micro, self.n_completions, self.iterations * self.cfg.train.ppo_epochs,
                           max_completion_length=self.budgets["trl_max_completion_length"],
                           max_tool_calling_iterations=self.rcfg.rollout.max_turns - 1)
        trainer = grpo(model=m, reward_funcs=self.reward_fn, args=args, train_dataset=self.dataset,
                       processing_class=self.tok, tools=[self.tool])
        torch.set_num_threads(self.args.threads)  # accelerate may change it
        load, t0 = loadavg(), time.perf_counter()
        trainer.train()
        total = time.perf_counter() - t0
        seen = list(grpo.seen)
        return {"seconds": total / self.iterations, "generate_s": grpo.gen_s / self.iterations, "load": load,
                "steps": [{k: v for k, v in s.items() if k != "example"} for s in seen],
                "example": seen[0]["example"] if seen else ""}

    def side(self, vals: list[dict[str, Any]]) -> dict[str, Any]:
        pt, n = per_trajectory(vals), self.n_completions
        return {**side_summary(vals, n * pt["sampled_tokens"], self.cfg.train.ppo_epochs * n * pt["tokens"]),
                "per_trajectory": pt, "runs": [{k: x for k, x in v.items() if k != "example"} for v in vals]}


def ending_like_trl(make_env: Any) -> Any:
    """agent-r1's env, ending an episode at an action with neither a parseable call nor an answer, as
    TRL's loop does (agent-r1 itself answers such an action with an error observation and goes on)."""

    def make(sample: dict[str, Any]) -> Any:
        env = make_env(sample)
        finish = env.finish

        def finish_like_trl(pending: Any, results: Any) -> Any:
            out = finish(pending, results)
            return dataclasses.replace(out, done=True) if not out.done and not out.info.get("tool_calls") else out

        env.finish = finish_like_trl
        return env

    return make


def _check_identical(tok: Any, codec: Any, make_env: Any, sample: dict, messages: list, tool: SchemaTool,
                     search: Any, rcfg: Any) -> dict[str, Any]:
    """Prompt ids of both sides for every prompt, and the ids after one search call."""
    env = make_env(sample)
    env.reset(sample)
    ours = [codec.prompt_ids(m, tools=env.tool_schemas) for m in messages]
    theirs = [_ids(tok.apply_chat_template(m, tools=[tool], tokenize=True, add_generation_prompt=True))
              for m in messages]
    action = codec.encode('<tool_call>{"name": "search", "arguments": {"query": "capital"}}</tool_call>')
    result = search(query="capital")
    step = env.step(codec.decode(action))
    glue_ours, _ = codec.observation_ids(step.observation or "", False, action, rcfg.rollout.max_observation_tokens)
    glue_theirs = [tok.eos_token_id] + _trl_suffix(tok, {"role": "tool", "name": "search", "content": result})
    return {"prompts_identical": ours == theirs, "prompt_tokens": [len(p) for p in ours],
            "glue_identical": glue_ours == glue_theirs, "glue_tokens": [len(glue_ours), len(glue_theirs)],
            "glue_text": {"agent_r1": codec.decode(glue_ours)[:400], "trl": codec.decode(glue_theirs)[:400]}}


def _ids(x: Any) -> list[int]:
    return list(x["input_ids"] if isinstance(x, dict) or hasattr(x, "keys") else x)


def _trl_suffix(tok: Any, tool_message: dict[str, Any]) -> list[int]:
    """TRL's `_get_tool_suffix_ids` for one tool message (the same steps, outside a trainer)."""
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"type": "function", "function": {"name": tool_message["name"], "arguments": {}}}]}]
    prefix = _ids(tok.apply_chat_template(dummy, add_generation_prompt=False, tokenize=True))
    full = _ids(tok.apply_chat_template(dummy + [tool_message], add_generation_prompt=True, tokenize=True))
    ends = [i for i, t in enumerate(prefix) if t == tok.eos_token_id]
    prefix = prefix[: ends[-1] + 1] if ends else prefix
    return full[len(prefix):]


def template_path() -> Path:
    import trl

    return Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
