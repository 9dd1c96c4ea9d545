"""Scores a policy by rolling it out (greedy by default) on held-out questions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agent_r1.rewards.qa import exact_match, f1_score, substring_match
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import RolloutConfig
from agent_r1.trajectory import Trajectory

#: stop reasons that mean a token or turn budget ended the episode (not an answer, not a format slip)
BUDGET_STOPS = ("max_turns", "max_total_tokens", "prompt_too_long", "max_tokens_per_turn")


def support_recall(tr: Trajectory) -> float | None:
    """Share of the sample's supporting documents that any retrieval of this episode returned."""
    supports = set(tr.sample.get("supporting_titles") or [])
    if not supports:
        return None
    found = {t for turn in tr.turns for t in turn.info.get("retrieved_titles", [])}
    return len(found & supports) / len(supports)


def trajectory_stats(trajs: list[Trajectory]) -> dict[str, float]:
    """EM / F1 / substring EM (separately, never blended) and tool-use behaviour.

    Percentages for em, f1, substring_em, search_first_rate, valid_call_rate, support_recall;
    counts for answer_format_failures (no `<answer>` tag: the agent never answered, or a
    single-turn mode's raw text was scored instead) and budget_hits (a token or turn budget
    ended the episode; see BUDGET_STOPS); `n` questions.
    """
    n = max(len(trajs), 1)
    calls = sum(t.tool_calls for tr in trajs for t in tr.turns)
    valid = sum(t.valid_tool_calls for tr in trajs for t in tr.turns)
    answers = [(tr.answer or "", tr.sample.get("answers") or []) for tr in trajs]
    recalls = [r for r in map(support_recall, trajs) if r is not None]
    stats = {
        "n": float(len(trajs)),
        "em": 100.0 * sum(exact_match(a, g) for a, g in answers) / n,
        "f1": 100.0 * sum(f1_score(a, g) for a, g in answers) / n,
        "substring_em": 100.0 * sum(substring_match(a, g) for a, g in answers) / n,
        "search_first_rate": 100.0 * sum(bool(tr.turns) and tr.turns[0].tool_calls > 0 for tr in trajs) / n,
        "mean_turns": sum(len(tr.turns) for tr in trajs) / n,
        "tool_calls_per_question": calls / n,
        "valid_call_rate": 100.0 * valid / calls if calls else 0.0,
        "answer_format_failures": float(sum(tr.answer is None or bool(tr.metrics.get("format_failure"))
                                            for tr in trajs)),
        "budget_hits": float(sum(tr.stop_reason in BUDGET_STOPS for tr in trajs)),
    }
    if recalls:
        stats["support_recall"] = 100.0 * sum(recalls) / len(recalls)
    return stats


def rollout_in_batches(engine: Any, codec: ChatCodec, make_env: Callable[[dict[str, Any]], Any],
                       samples: list[dict[str, Any]], rollout: RolloutConfig, reward: RewardConfig,
                       greedy: bool = True, seed: int = 0, batch_size: int = 64) -> list[Trajectory]:
    """One trajectory per sample, `batch_size` samples per rollout (batch i seeded `seed + i`)."""
    cfg = replace(rollout, n_samples=1)
    trajs: list[Trajectory] = []
    for i in range(0, len(samples), batch_size):
        trajs += run_rollout(engine, codec, make_env, samples[i:i + batch_size], cfg, reward, seed=seed + i,
                             greedy=greedy)
    return trajs


def evaluate_policy(*args: Any, **kwargs: Any) -> dict[str, float]:
    """`trajectory_stats` of `rollout_in_batches(*args, **kwargs)`: the trainer's held-out evaluation."""
    return trajectory_stats(rollout_in_batches(*args, **kwargs))
