"""The multi-turn rollout, token-in/token-out.

Each turn, all active trajectories are generated in one batch; the sampled ids are appended as
they are; the env parses the decoded action, tool calls of all trajectories run in one batch,
and the observation (with its template glue) is tokenised and appended with action mask 0.
Budgets are in tokens; every budget hit is recorded in the trajectory, never silent.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from agent_r1.envs.tool_env import ToolEnv, step_many
from agent_r1.rewards.scoring import RewardConfig, outcome_reward, overlong_reward
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationEngine, SamplingParams
from agent_r1.sampling import RolloutConfig
from agent_r1.trajectory import Trajectory, Turn

_ROLLOUT_IDS = itertools.count()  # prefix-cache keys are (rollout id, trajectory index)


def run_rollout(
    engine: GenerationEngine,
    codec: ChatCodec,
    make_env: Callable[[dict[str, Any]], ToolEnv],
    samples: list[dict[str, Any]],
    config: RolloutConfig,
    reward: RewardConfig,
    seed: int | None = None,
    greedy: bool = False,
) -> list[Trajectory]:
    """Rolls out `config.n_samples` trajectories per sample; returns them grouped by sample. An env kind
    whose `make_env` has its own `run_rollout` (openai_agent: agents/rollout.py) rolls out itself."""
    own = getattr(make_env, "run_rollout", None)
    if own is not None:
        return own(engine, codec, samples, config, reward, seed=seed, greedy=greedy)
    start = time.perf_counter()
    envs, trajs = [], []
    for sample in samples:
        for _ in range(config.n_samples):
            env = make_env(sample)
            messages = env.reset(sample)
            tools = None if env.fmt.inline_observations else getattr(env, "tool_schemas", None)
            prompt = codec.prompt_ids(messages, tools=tools)
            envs.append(env)
            trajs.append(Trajectory(sample_id=str(sample["id"]), prompt_ids=prompt, sample=sample))
    fmt = envs[0].fmt if envs else None
    # stop strings the tokenizer holds as one token are also cheap id checks; every stop string stays
    # a text check too, since a model may spell a special token's text with ordinary tokens
    stop_strings = fmt.stop_strings if fmt else ()
    single = [_single_id(codec, s) for s in stop_strings]
    stop_ids = tuple(dict.fromkeys(i for i in [*_eos_ids(engine, codec), *single] if i is not None))
    text_stops = tuple(stop_strings)
    reuse = config.kv_reuse and getattr(engine, "supports_prefix_reuse", False)
    rollout_id = next(_ROLLOUT_IDS)
    try:
        _run_turns(engine, codec, envs, trajs, config, fmt, stop_ids, text_stops, seed, greedy,
                   rollout_id if reuse else None, reward.max_process_reward)
    finally:
        if reuse:
            engine.drop_prefixes([(rollout_id, i) for i in range(len(trajs))])
    for traj, env in zip(trajs, envs):
        if not traj.stop_reason:
            traj.stop_reason = "max_total_tokens"
        golds = traj.sample.get("answers") or []
        # the outcome reward sees only the answer the model wrote, never an observation;
        # the env's reward config carries the sample's own settings (its row's "env.reward")
        rc = getattr(env, "reward_config", reward)
        traj.outcome_reward = outcome_reward(traj.answer, golds, rc)
        rc = rc if hasattr(rc, "overlong_buffer") else reward
        if rc.overlong_buffer:  # DAPO's soft overlong punishment, inside the outcome (so score and token rewards)
            traj.metrics["overlong_penalty"] = overlong_reward(len(traj.token_ids), config.max_total_tokens, rc)
            traj.outcome_reward += traj.metrics["overlong_penalty"]
    elapsed = time.perf_counter() - start
    for traj in trajs:
        traj.metrics["rollout_seconds"] = elapsed
    for env in envs:
        env.close()
    return trajs


def _run_turns(engine: Any, codec: ChatCodec, envs: list[ToolEnv], trajs: list[Trajectory], config: RolloutConfig,
               fmt: Any, stop_ids: tuple[int, ...], text_stops: tuple[str, ...], seed: int | None, greedy: bool,
               rollout_id: int | None, reward_cap: float = float("inf")) -> None:
    """The turns: generate for every active trajectory, step the envs, append observations.
    With `rollout_id`, each trajectory's KV cache stays in the engine between its turns."""
    active = list(range(len(trajs)))
    for turn_idx in range(config.max_turns):
        contexts, budgets, runnable = [], [], []
        for i in active:
            room = config.max_total_tokens - len(trajs[i].token_ids)
            if room <= 0:
                trajs[i].stop_reason = "prompt_too_long" if not trajs[i].turns else "max_total_tokens"
                continue
            runnable.append(i)
            contexts.append(trajs[i].token_ids)
            budgets.append(min(config.max_tokens_per_turn, room))
        active = runnable
        if not active:
            break
        params = SamplingParams(
            max_new_tokens=budgets, temperature=0.0 if greedy else config.temperature, top_k=config.top_k,
            top_p=config.top_p, stop_token_ids=stop_ids, stop_strings=text_stops,
            seed=None if seed is None else seed * 1000 + turn_idx,
        )
        generate_start = time.time_ns()
        if rollout_id is None:
            outputs = engine.generate(contexts, params)
        else:  # a prefix is worth keeping only when another turn can follow
            outputs = engine.generate(contexts, params, prefix_keys=[(rollout_id, i) for i in active],
                                      keep_prefixes=turn_idx + 1 < config.max_turns)
        generate_end = time.time_ns()
        texts = [codec.decode(o.token_ids) for o in outputs]
        steps = step_many([envs[i] for i in active], texts)
        # wall-clock times of this turn (the batch's generation, then its tool calls), for traces
        timing_ns = [generate_start, generate_end, time.time_ns()]
        still = []
        for i, out, text, step in zip(active, outputs, texts, steps):
            traj = trajs[i]
            truncated = out.finish_reason == "length"
            turn = Turn(action_ids=list(out.token_ids), action_logprobs=list(out.logprobs), action_text=text,
                        truncated=truncated,
                        masked=truncated and config.mask_truncated_turns and _open_call(text, fmt),
                        tool_calls=step.info.get("tool_calls", 0),
                        valid_tool_calls=step.info.get("valid_tool_calls", 0),
                        info={**step.info, "timing_ns": timing_ns})  # step.info["calls"]: each tool call
            traj.turns.append(turn)
            if step.done:
                traj.answer = step.answer
                traj.stop_reason = "answer"
                continue
            if turn_idx + 1 == config.max_turns:
                traj.stop_reason = "max_turns"
                turn.observation_text = step.observation or ""
                continue
            room = config.max_total_tokens - len(traj.token_ids)
            obs_ids, obs_trunc = codec.observation_ids(
                step.observation or "", fmt.inline_observations, turn.action_ids,
                min(config.max_observation_tokens, max(room, 0)))
            turn.observation_text, turn.observation_truncated = step.observation or "", obs_trunc
            if len(obs_ids) >= room:  # no room left to act after this observation
                traj.stop_reason = "max_total_tokens"
                continue
            turn.observation_ids = obs_ids
            # a call's process reward is granted only once its observation is shown (not on the last
            # turn, nor when the budget drops it), and the trajectory's total stays within the cap
            turn.process_reward = _capped(step.reward, traj, envs[i], reward_cap)
            still.append(i)
        if rollout_id is not None:  # ended trajectories never come back: free their caches now
            engine.drop_prefixes([(rollout_id, i) for i in set(active) - set(still)])
        active = still


def _open_call(text: str, fmt: Any) -> bool:
    """Whether `text` ends inside a call or answer: an opening tag of one of the format's closing
    stop strings (`<search>` for `</search>`, `<tool_call>` for `</tool_call>`) after its last close."""
    for close in getattr(fmt, "stop_strings", ()):
        if close.startswith("</"):
            opener = "<" + close[2:]
            if text.rfind(opener) > text.rfind(close):
                return True
    return False


def _capped(reward: float, traj: Trajectory, env: Any, default_cap: float) -> float:
    """`reward` cut so the trajectory's process rewards never sum above `max_process_reward`."""
    cap = getattr(getattr(env, "reward_config", None), "max_process_reward", default_cap)
    granted = sum(t.process_reward for t in traj.turns)
    return min(reward, max(cap - granted, 0.0)) if reward > 0 else reward


def _eos_ids(engine: Any, codec: ChatCodec) -> list[int]:
    """The tokenizer's end of turn and every id of the model's `generation_config.eos_token_id`
    (a list for Qwen2.5: <|im_end|> and <|endoftext|>)."""
    ids = [codec.eos_token_id]
    # an engine with its own copy of the model (vLLM) carries the generation config itself
    gen_cfg = getattr(engine, "generation_config", None) or getattr(getattr(engine, "model", None),
                                                                    "generation_config", None)
    eos = getattr(gen_cfg, "eos_token_id", None)
    ids += list(eos) if isinstance(eos, (list, tuple)) else [eos]
    return [i for i in ids if isinstance(i, int)]


def _single_id(codec: ChatCodec, text: str) -> int | None:
    """The id of a stop string that the tokenizer holds as one token (a cheap id check)."""
    ids = codec.encode(text)
    return ids[0] if len(ids) == 1 else None
