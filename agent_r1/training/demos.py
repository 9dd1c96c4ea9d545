"""Scripted-agent demonstrations for the SFT warm start, rendered through the real env.

The scripted agent follows a sample's `plan` (its search queries) and then answers; a share of
demos instead answers at once with a guess, so that the warm start is deliberately imperfect
and RL has something to fix (see shared/design/LEARNING.md). Demos are Trajectories with the
same action mask as rollouts: only the agent's own text is trained on.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agent_r1.rollout.chat import ChatCodec
from agent_r1.trajectory import Trajectory, Turn

ACTION_TEMPLATES = {
    "tag": ("<search>{query}</search>", "<answer>{answer}</answer>"),
    "hermes": ('<tool_call>{{"name": "search", "arguments": {{"query": "{query}"}}}}</tool_call>',
               "<answer>{answer}</answer>"),
}


def scripted_actions(sample: dict[str, Any], fmt: str, guess: str | None) -> list[str]:
    search, answer = ACTION_TEMPLATES[fmt]
    if guess is not None:
        return [answer.format(answer=guess)]
    return [search.format(query=q) for q in sample.get("plan") or []] + [answer.format(answer=sample["answers"][0])]


def demo_trajectory(env: Any, codec: ChatCodec, sample: dict[str, Any], actions: list[str],
                    max_observation_tokens: int) -> Trajectory:
    """Plays `actions` in `env`; observations come from the real tools, masked as in rollouts."""
    messages = env.reset(sample)
    prompt = codec.prompt_ids(messages, tools=None if env.fmt.inline_observations else env.tool_schemas)
    traj = Trajectory(sample_id=str(sample["id"]), prompt_ids=prompt, sample=sample)
    for text in actions:
        ids = codec.encode(text)  # rollouts stop at the closing tag too, so no end-of-turn token
        step = env.step(text)
        turn = Turn(action_ids=ids, action_logprobs=[0.0] * len(ids), action_text=text)
        traj.turns.append(turn)
        if step.done:
            traj.answer, traj.stop_reason = step.answer, "answer"
            break
        turn.observation_ids, _ = codec.observation_ids(step.observation or "", env.fmt.inline_observations, ids,
                                                        max_observation_tokens)
    return traj


def build_demos(samples: list[dict[str, Any]], make_env: Callable[[dict[str, Any]], Any], codec: ChatCodec,
                fmt: str, guess_fraction: float, seed: int, max_observation_tokens: int) -> list[Trajectory]:
    """One demo per sample; `guess_fraction` of them answer by a guess drawn from the answers
    of other samples of the same question type (often wrong, sometimes right)."""
    rng = random.Random(seed)
    pools: dict[str, list[str]] = {}
    for s in samples:
        pools.setdefault(s.get("type", ""), []).append(s["answers"][0])
    demos = []
    for s in samples:
        guess = rng.choice(pools[s.get("type", "")]) if rng.random() < guess_fraction else None
        demos.append(demo_trajectory(make_env(s), codec, s, scripted_actions(s, fmt, guess), max_observation_tokens))
    return demos
