"""Scores a policy by rolling it out (greedy by default) on held-out questions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agent_r1.rewards.qa import exact_match, f1_score, substring_match
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.loop import RolloutConfig, run_rollout
from agent_r1.trajectory import Trajectory


def trajectory_stats(trajs: list[Trajectory]) -> dict[str, float]:
    """EM / F1 / substring EM (separately, never blended) and tool-use behaviour."""
    n = max(len(trajs), 1)
    calls = sum(t.tool_calls for tr in trajs for t in tr.turns)
    valid = sum(t.valid_tool_calls for tr in trajs for t in tr.turns)
    answers = [(tr.answer or "", tr.sample.get("answers") or []) for tr in trajs]
    return {
        "em": 100.0 * sum(exact_match(a, g) for a, g in answers) / n,
        "f1": 100.0 * sum(f1_score(a, g) for a, g in answers) / n,
        "substring_em": 100.0 * sum(substring_match(a, g) for a, g in answers) / n,
        "search_first_rate": 100.0 * sum(bool(tr.turns) and tr.turns[0].tool_calls > 0 for tr in trajs) / n,
        "mean_turns": sum(len(tr.turns) for tr in trajs) / n,
        "tool_calls_per_question": calls / n,
        "valid_call_rate": 100.0 * valid / calls if calls else 0.0,
        "answer_format_failures": float(sum(tr.answer is None for tr in trajs)),
        "budget_hits": float(sum(tr.stop_reason not in ("answer",) for tr in trajs)),
    }


def evaluate_policy(engine: Any, codec: ChatCodec, make_env: Callable[[dict[str, Any]], Any],
                    samples: list[dict[str, Any]], rollout: RolloutConfig, reward: RewardConfig,
                    greedy: bool = True, seed: int = 0, batch_size: int = 64) -> dict[str, float]:
    cfg = replace(rollout, n_samples=1)
    trajs: list[Trajectory] = []
    for i in range(0, len(samples), batch_size):
        trajs += run_rollout(engine, codec, make_env, samples[i:i + batch_size], cfg, reward, seed=seed + i,
                             greedy=greedy)
    return trajectory_stats(trajs)
