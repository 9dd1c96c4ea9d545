"""One iteration's metrics, from its trajectories, its batch and its update (RLTrainer.learn)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent_r1.agents.assemble import agent_metrics
from agent_r1.evaluation.agent_eval import trajectory_stats
from agent_r1.tools.runner import tool_metrics
from agent_r1.trajectory import Trajectory


def iteration_metrics(trajs: list[Trajectory], batch: dict[str, Any], upd: dict[str, float], rollout_s: float,
                      update_s: float, ppo_epochs: int, skipped_updates: int,
                      engine: dict[str, float] | None = None) -> dict[str, float]:
    """The metrics of one iteration: rewards, trajectory shape, throughput, engine-vs-trainer drift,
    the update's own (`upd`), the engine's (`engine`: weight syncs), the off-policy and tool metrics."""
    scores = batch["scores"]
    groups: dict[str, list[float]] = {}
    for gid, s in zip(batch["group_ids"], scores.tolist()):
        groups.setdefault(gid, []).append(s)
    stats = trajectory_stats(trajs)
    reasons = Counter(t.stop_reason for t in trajs)
    sampled = int(batch["action_mask"].sum())
    # engine vs trainer log-probs of the sampled tokens: any drift (temperature, precision,
    # KV reuse, another engine) between the policy that sampled and the one trained shows here
    act = batch["action_mask"] > 0
    if "old_logp_rows" in batch:  # deferred old log-probs exist for the rows that were trained
        act = act & batch["old_logp_rows"][:, None]
    drift = (batch["sampled_logprobs"] - batch["old_logp"]).abs()[act]
    m = {
        "reward_mean": float(scores.mean()), "reward_std": float(scores.std()) if len(scores) > 1 else 0.0,
        "em": stats["em"], "f1": stats["f1"], "search_first_rate": stats["search_first_rate"],
        "turns_per_trajectory": stats["mean_turns"], "tool_calls_per_trajectory": stats["tool_calls_per_question"],
        "valid_call_rate": stats["valid_call_rate"],
        "response_length": float(batch["response_mask"].sum(-1).mean()),
        "action_tokens": float(batch["action_mask"].sum(-1).mean()),
        "groups_all_equal": sum(max(v) == min(v) for v in groups.values()) / max(len(groups), 1),
        "rollout_tokens_per_s": sampled / max(rollout_s, 1e-9),
        "update_tokens_per_s": ppo_epochs * float(batch["attention_mask"].sum()) / max(update_s, 1e-9),
        "rollout_s": rollout_s, "update_s": update_s,
        "skipped_updates": float(skipped_updates),
        "truncated_actions": float(sum(t.truncated for tr in trajs for t in tr.turns)),
        "truncated_observations": float(sum(t.observation_truncated for tr in trajs for t in tr.turns)),
        "masked_truncated_turns": float(sum(t.masked for tr in trajs for t in tr.turns)),
        "rollout/logprob_diff_max": float(drift.max()) if drift.numel() else 0.0,
        "rollout/logprob_diff_mean": float(drift.mean()) if drift.numel() else 0.0,
        **{f"stop/{k}": float(v) for k, v in reasons.items()},
    }
    shaped = [t.metrics["overlong_penalty"] for t in trajs if "overlong_penalty" in t.metrics]
    if shaped:  # reward.overlong_buffer: DAPO's soft overlong punishment (rewards/scoring.py overlong_reward)
        m["overlong_penalty"] = sum(shaped) / len(trajs)
        m["overlong_penalized"] = sum(p < 0 for p in shaped) / len(trajs)
    m.update(upd)
    m.update(engine or {})
    m.update(batch.get("offpolicy_metrics", {}))
    m.update(tool_metrics([t.info for tr in trajs for t in tr.turns]))
    m.update(agent_metrics(trajs))  # env.kind openai_agent: calls, steps, drift, failed sessions
    return m
