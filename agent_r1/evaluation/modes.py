"""Evaluation modes, registered by name: how a model gets from a question to an answer.

- `agent`:  multi-turn tool use through the real rollout loop (search, read, answer).
- `rag`:    the paper's naive RAG: retrieve top-k with the question itself, put the documents in
            the user message, answer in one turn.
- `direct`: no retrieval, one turn.

Every mode returns `Trajectory` objects (one per question), so one stats function scores all
modes alike. Single-turn modes parse `<answer>..</answer>`; when the tag is missing the cleaned
raw text is scored as the answer and the trajectory is counted as an answer-format failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_r1.envs.formats import _extract_answer
from agent_r1.evaluation.agent_eval import rollout_in_batches
from agent_r1.registry import Registry
from agent_r1.rewards.scoring import outcome_reward
from agent_r1.rollout.engine import SamplingParams
from agent_r1.tools.search import format_hits
from agent_r1.trajectory import Trajectory, Turn

ANSWER_CLOSE = "</answer>"
SINGLE_TURN_INSTRUCTIONS = {
    "rag": "Answer the question using the documents. Give the final answer as <answer>answer</answer>.",
    "direct": "Answer the question. Give the final answer as <answer>answer</answer>.",
}


@dataclass
class EvalContext:
    """What every mode may use. `cfg` is an ExperimentConfig (rollout, reward, env, search)."""

    engine: Any
    codec: Any
    cfg: Any
    retriever: Any = None
    make_env: Callable[[dict[str, Any]], Any] | None = None
    greedy: bool = True
    seed: int = 0
    batch_size: int = 64


EvalMode = Callable[[EvalContext, list[dict[str, Any]]], list[Trajectory]]


@dataclass(frozen=True)
class ModeTraits:
    """needs_retriever: the mode searches itself (`--index`); tools: the mode rolls out the run's env,
    whose prompts carry its tool list (the format's chat-template requirements apply) and which needs a
    retriever only when `env.tools` has `search` (an env of MCP tools alone needs none)."""

    needs_retriever: bool = False
    tools: bool = False


EVAL_MODES: Registry[EvalMode, ModeTraits] = Registry(
    "evaluation mode", where="agent_r1.evaluation.modes.EVAL_MODES", traits=ModeTraits)


def register_mode(name: str, needs_retriever: bool = False, tools: bool = False) -> Callable[[EvalMode], EvalMode]:
    """Shorthand for `@EVAL_MODES.register(name, needs_retriever=..., tools=...)`."""
    return EVAL_MODES.register(name, needs_retriever=needs_retriever, tools=tools)


def get_mode(name: str) -> EvalMode:
    return EVAL_MODES[name]


def needs_retriever(mode: str, cfg: Any) -> bool:
    """Whether `mode` under run config `cfg` needs a retriever: its own searches, or the env's search tool."""
    traits = EVAL_MODES.traits(mode)
    return traits.needs_retriever or (traits.tools and "search" in cfg.env.tools)


def _batches(samples: list[dict[str, Any]], size: int):
    for i in range(0, len(samples), max(size, 1)):
        yield i, samples[i:i + size]


@register_mode("agent", tools=True)
def agent_mode(ctx: EvalContext, samples: list[dict[str, Any]]) -> list[Trajectory]:
    if ctx.make_env is None:
        raise ValueError("agent mode needs the run's env (and a retriever when env.tools has search)")
    return rollout_in_batches(ctx.engine, ctx.codec, ctx.make_env, samples, ctx.cfg.rollout, ctx.cfg.reward,
                              ctx.greedy, ctx.seed, ctx.batch_size)


def _system_message(ctx: EvalContext, mode: str) -> list[dict[str, Any]]:
    env = ctx.cfg.env
    howto = SINGLE_TURN_INSTRUCTIONS[mode] if env.format_instructions else ""
    system = " ".join(filter(None, [env.system_prompt, howto]))
    return [{"role": "system", "content": system}]


def _rag_prompt(ctx: EvalContext, sample: dict[str, Any], hits: list[Any],
                room_for_answer: int) -> tuple[list[int], bool]:
    """The prompt ids with the retrieved documents in the user message; documents are cut
    (halving the characters kept per document) until prompt + answer fit the token budget."""
    limit = ctx.cfg.rollout.max_total_tokens - room_for_answer
    chars = ctx.cfg.search.max_chars_per_doc
    cut = False
    while True:
        user = f"{format_hits(hits, chars)}\n\nQuestion: {sample['question']}"
        ids = ctx.codec.prompt_ids(_system_message(ctx, "rag") + [{"role": "user", "content": user}])
        if len(ids) <= limit or chars < 16:
            return ids, cut
        chars, cut = chars // 2, True


def _single_turn(ctx: EvalContext, mode: str, samples: list[dict[str, Any]],
                 prompts: list[list[int]], infos: list[dict[str, Any]], seed: int) -> list[Trajectory]:
    """Generates one answer turn per prompt (batched) and parses it."""
    ro = ctx.cfg.rollout
    trajs = [Trajectory(sample_id=str(s["id"]), prompt_ids=p, sample=s) for s, p in zip(samples, prompts)]
    live = [i for i, p in enumerate(prompts) if ro.max_total_tokens - len(p) > 0]
    for i in set(range(len(trajs))) - set(live):
        trajs[i].stop_reason = "prompt_too_long"
    close_ids = ctx.codec.encode(ANSWER_CLOSE)
    stop_ids = tuple(x for x in (ctx.codec.eos_token_id, close_ids[0] if len(close_ids) == 1 else None)
                     if x is not None)
    params = SamplingParams(
        max_new_tokens=[min(ro.max_tokens_per_turn, ro.max_total_tokens - len(prompts[i])) for i in live],
        temperature=0.0 if ctx.greedy else ro.temperature, top_k=ro.top_k, top_p=ro.top_p,
        stop_token_ids=stop_ids, stop_strings=(ANSWER_CLOSE,), seed=seed)
    outputs = ctx.engine.generate([prompts[i] for i in live], params) if live else []
    tokenizer = ctx.codec.tokenizer
    for i, out in zip(live, outputs):
        traj = trajs[i]
        text = ctx.codec.decode(out.token_ids)
        answer = _extract_answer(text)
        turn = Turn(action_ids=list(out.token_ids), action_logprobs=list(out.logprobs), action_text=text,
                    truncated=out.finish_reason == "length", info=dict(infos[i]))
        traj.turns.append(turn)
        if answer is not None:
            traj.answer, traj.stop_reason = answer, "answer"
        else:
            # no tag: score the raw text (special tokens and a dangling tag removed)
            raw = tokenizer.decode(out.token_ids, skip_special_tokens=True)
            traj.answer = raw.replace("<answer>", "").strip()
            traj.metrics["format_failure"] = 1.0
            traj.stop_reason = "max_tokens_per_turn" if out.finish_reason == "length" else "no_answer_tag"
    for traj in trajs:
        traj.outcome_reward = outcome_reward(traj.answer, traj.sample.get("answers") or [], ctx.cfg.reward)
    return trajs


@register_mode("rag", needs_retriever=True)
def rag_mode(ctx: EvalContext, samples: list[dict[str, Any]]) -> list[Trajectory]:
    if ctx.retriever is None:
        raise ValueError("rag mode needs a retriever (--index DIR)")
    room = min(ctx.cfg.rollout.max_tokens_per_turn, ctx.cfg.rollout.max_total_tokens // 2)
    trajs: list[Trajectory] = []
    for i, batch in _batches(samples, ctx.batch_size):
        all_hits = ctx.retriever.search([s["question"] for s in batch], ctx.cfg.search.k)
        prompts, infos = [], []
        for sample, hits in zip(batch, all_hits):
            ids, cut = _rag_prompt(ctx, sample, hits, room)
            prompts.append(ids)
            infos.append({"retrieved_titles": [h.title for h in hits], "context_cut": cut})
        trajs += _single_turn(ctx, "rag", batch, prompts, infos, seed=ctx.seed + i)
    return trajs


@register_mode("direct")
def direct_mode(ctx: EvalContext, samples: list[dict[str, Any]]) -> list[Trajectory]:
    trajs: list[Trajectory] = []
    for i, batch in _batches(samples, ctx.batch_size):
        prompts = [ctx.codec.prompt_ids(_system_message(ctx, "direct") + [{"role": "user", "content": s["question"]}])
                   for s in batch]
        trajs += _single_turn(ctx, "direct", batch, prompts, [{} for _ in batch], seed=ctx.seed + i)
    return trajs
