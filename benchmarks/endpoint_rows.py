"""The learning benchmark's endpoint rows: the same QA task trained through the OpenAI-compatible
endpoint by an agent written with the `openai` package (benchmarks/agents/qa_search_agent.py), against the
built-in env in the same chat format, from one warm start per seed.

- `CHAT_RECIPE` (learning.py `--chat`): the built-in env in the hermes format, a local model with Qwen2.5's
  turns and tool calls (its template renders an assistant message's tool_calls, so the agent's re-sent history
  renders back the tokens the policy sampled) but a tools block of names only (`qwen2.5-brief`: behind Qwen's
  whole tools block the 4-layer model had not learnt to copy a name into its search after 1,000 SFT
  steps), SFT demos written as that template writes assistant turns, and 2,000 SFT steps (with 1,000 the
  brief template's warm start copied a name's first syllable only; docs/results.md, "The QA task through the
  OpenAI endpoint"). One warm start serves both variants: the env and the agent render the same prompts
  (checked: `compare_episodes`).
- `grpo_hermes`: GRPO in the built-in env; `grpo_endpoint`: GRPO through the endpoint, the agent's searches
  answered by the run's own search tool (agents/search_service.py). Both are evaluated by the built-in env
  (one evaluator for every row); the endpoint row is also evaluated through its agent (`greedy_agent`).
- Seconds per iteration from the training curve (iterations 2..N-1: the first and the last also hold the
  run's held-out evaluations); the endpoint's overhead is its seconds minus the built-in env's, paired by
  seed and iteration.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from agent_r1.evaluation.stats import mean_ci, paired_difference_ci
from benchmarks.agents import qa_search_agent

AGENT = f"{qa_search_agent.__name__}:{qa_search_agent.agent.__name__}"  # env.agent of the endpoint row
CHAT_RECIPE = {"env.format": "hermes", "model.chat_template": "qwen2.5-brief", "sft.demo_style": "chat",
               "sft.steps": 2000}
TOOL_CALL_TEMPLATES = ("qwen2.5-brief", "qwen2.5")  # model.chat_template values whose chat demos the agent speaks
VARIANTS = {
    "grpo_hermes": {"algo.adv_estimator": "grpo"},
    # every session of an iteration at once (16 prompts x 8), as the built-in rollout batches them all
    "grpo_endpoint": {"algo.adv_estimator": "grpo", "env.kind": "openai_agent", "env.agent": AGENT,
                      "env.agent_concurrency": 256},
}
PAIRED_WITH = {"grpo_endpoint": "grpo_hermes"}  # the built-in row it is compared with; others: grpo
CURVE_KEYS = ("rollout_s", "update_s", "response_length", "agent/drift", "agent/steps_per_session", "agent/errors",
              "agent/empty", "agent/engine_calls", "agent/engine_s", "agent/calls")  # where the rollout's seconds go


def check_recipe(names: list[str], cfg: Any) -> None:
    """The endpoint rows need the chat recipe's warm start; a clear error instead of an agent that cannot
    speak the warm start's format. `--set model.chat_template=qwen2.5` (Qwen's whole tools block) is the
    other template that renders tool calls: the recorded rows it could not learn from ran with it."""
    if not set(names) & set(VARIANTS):
        return
    have = {"env.format": cfg.env.format, "model.chat_template": cfg.model.chat_template,
            "sft.demo_style": cfg.sft.demo_style}
    if any(have[k] != CHAT_RECIPE[k] for k in ("env.format", "sft.demo_style")) \
            or have["model.chat_template"] not in TOOL_CALL_TEMPLATES:
        raise SystemExit(f"variants {sorted(set(names) & set(VARIANTS))} need --chat ({CHAT_RECIPE}); "
                         f"this run has {have}")


def builtin(cfg: Any) -> Any:
    """`cfg` with the built-in env: what every row is evaluated with."""
    return replace(cfg, env=replace(cfg.env, kind="tool"))


@contextlib.contextmanager
def agent_tools(cfg: Any, model_dir: Any):
    """For an openai_agent run: the search service its agent calls (the run's index and search tool, text cut
    with the tokenizer of `model_dir`); for any other run nothing."""
    if cfg.env.kind != "openai_agent":
        yield None
        return
    from transformers import AutoTokenizer

    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.runs.run import Run
    from benchmarks.agents.search_service import SearchService

    with Run(builtin(cfg)) as run:
        env = run.env_factory({"id": "search-service", "question": "", "answers": []})
        codec = ChatCodec(AutoTokenizer.from_pretrained(str(model_dir)))
        with SearchService(env, codec, cfg.rollout.max_observation_tokens, cfg.rollout.max_turns) as service:
            yield service


def compare_episodes(cfg: Any, model_dir: Any, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Greedy episodes of the model in `model_dir`, one question at a time, in the built-in env and through the
    endpoint agent: are the first prompts, and the whole token sequences, the same ids? (The endpoint's
    policy also samples the end-of-turn token the built-in env appends as glue; the answer turn's own is
    left out of the comparison.)"""
    from agent_r1.agents.agent_ref import load_agent
    from agent_r1.agents.rollout import AgentRollout
    from agent_r1.models.build import load_model
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.engine import TransformersEngine
    from agent_r1.rollout.loop import run_rollout
    from agent_r1.runs.run import Run

    agent_cfg = replace(cfg, env=replace(cfg.env, kind="openai_agent", agent=AGENT))
    model, tok = load_model(model_dir)
    engine, codec = TransformersEngine(model, tok), ChatCodec(tok)
    rollout = replace(cfg.rollout, n_samples=1)
    agent = AgentRollout(load_agent(AGENT), concurrency=1)
    prompts = episodes = steps = 0
    first_difference = None
    try:
        with Run(builtin(cfg)) as run, agent_tools(agent_cfg, model_dir):
            for s in samples:
                (ours,) = run_rollout(engine, codec, run.env_factory, [s], rollout, cfg.reward, greedy=True)
                theirs = agent.run_rollout(engine, codec, [s], rollout, cfg.reward, greedy=True)
                steps += len(theirs)
                ids = theirs[0].token_ids
                ids = ids[:-1] if ids and ids[-1] == tok.eos_token_id else ids
                prompts += ours.prompt_ids == theirs[0].prompt_ids
                same = len(theirs) == 1 and ours.token_ids == ids
                episodes += same
                if not same and first_difference is None:
                    first_difference = {"question": s["question"], "env": codec.decode(ours.token_ids)[-400:],
                                        "agent": [codec.decode(t.token_ids)[-400:] for t in theirs]}
    finally:
        agent.close()
    return {"questions": len(samples), "prompts_identical": prompts, "episodes_identical": episodes,
            "agent_steps": steps, "first_difference": first_difference}


def iteration_seconds(curve: list[dict[str, Any]]) -> list[float]:
    """Wall seconds of iterations 2..N-1: the first also holds the start-of-run evaluation, the last the
    end-of-run one (fit_loop evaluates before it reports the iteration)."""
    secs = [c["seconds"] for c in curve[:-1]]
    return [round(b - a, 3) for a, b in zip(secs, secs[1:])]


def summarise_seconds(summary: dict[str, Any], rows: dict[str, list[Any]]) -> None:
    """Seconds per iteration (mean, 95% interval over seeds and iterations) per row, and for each row of
    PAIRED_WITH its overhead over the built-in row, paired by seed and iteration."""
    per = {name: [iteration_seconds(r["train_curve"]) for r in runs if r]
           for name, runs in rows.items() if name != "warm_start"}
    for name, lists in per.items():
        if name in summary and lists and all(lists):
            summary[name]["seconds_per_iteration"] = mean_ci(lists).to_dict()
    for name, base in PAIRED_WITH.items():
        pairs = [(a, b) for a, b in zip(rows.get(name, []), rows.get(base, [])) if a and b
                 and iteration_seconds(a["train_curve"]) and iteration_seconds(b["train_curve"])]
        if name in summary and pairs:
            a = [iteration_seconds(x["train_curve"]) for x, _ in pairs]
            b = [iteration_seconds(y["train_curve"]) for _, y in pairs]
            summary[name][f"overhead_s_per_iteration_over_{base}"] = {
                **paired_difference_ci(a, b).to_dict(), "seeds": len(pairs)}
