"""Trajectory tables: one row per trajectory, as MLflow's `log_table` takes them (columns)."""

from __future__ import annotations

from typing import Any


def trajectory_rows(step: int, trajectories: list[Any], tokenizer: Any = None,
                    max_rows: int | None = None) -> list[dict[str, Any]]:
    """One row per trajectory: question, gold, answer, EM, reward parts, and every turn's action and
    observation text (as the model produced / the tool returned it), plus a readable transcript."""
    from agent_r1.rewards.qa import exact_match

    trajs = trajectories[:max_rows] if max_rows else trajectories
    width = max((len(t.turns) for t in trajs), default=0)
    rows = []
    for t in trajs:
        sample = t.sample or {}
        gold = list(sample.get("answers") or [])
        process = [float(turn.process_reward) for turn in t.turns]
        row: dict[str, Any] = {
            "iteration": int(step), "sample_id": str(t.sample_id), "question": str(sample.get("question", "")),
            "gold": " | ".join(map(str, gold)), "answer": "" if t.answer is None else str(t.answer),
            "em": float(exact_match(t.answer or "", gold)) if gold else 0.0,
            "outcome_reward": float(t.outcome_reward), "process_reward": float(sum(process)),
            "score": float(t.score), "stop_reason": str(t.stop_reason), "num_turns": len(t.turns),
            "tool_calls": int(sum(turn.tool_calls for turn in t.turns)),
        }
        lines = []
        for i in range(width):
            turn = t.turns[i] if i < len(t.turns) else None
            row[f"turn{i + 1}_action"] = turn.action_text if turn else ""
            row[f"turn{i + 1}_observation"] = turn.observation_text if turn else ""
            row[f"turn{i + 1}_process_reward"] = float(turn.process_reward) if turn else 0.0
            if turn:
                lines.append(f"[action {i + 1}] {turn.action_text}")
                if turn.observation_text:
                    lines.append(f"[observation {i + 1}] {turn.observation_text}")
        row["transcript"] = "\n".join(lines)
        if tokenizer is not None:
            row["prompt"] = tokenizer.decode(t.prompt_ids)
        rows.append(row)
    return rows


def rows_to_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    return {k: [row.get(k) for row in rows] for k in keys}
