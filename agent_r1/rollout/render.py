"""Human-readable trajectories: action spans (trained on) and observation spans (masked) look
different, so a reader sees at a glance what the policy wrote and what the tools returned."""

from __future__ import annotations

from typing import Any

from agent_r1.trajectory import Trajectory

STYLES = {
    "ansi": {"action": ("\x1b[1;32m", "\x1b[0m"), "observation": ("\x1b[36m", "\x1b[0m"), "prompt": ("\x1b[2m", "\x1b[0m")},
    "plain": {"action": ("[ACTION mask=1]", "[/ACTION]"), "observation": ("[OBSERVATION mask=0]", "[/OBSERVATION]"),
              "prompt": ("[PROMPT mask=0]", "[/PROMPT]")},
}


def render_trajectory(traj: Trajectory, tokenizer: Any, style: str = "plain") -> str:
    st = STYLES[style]

    def span(kind: str, ids: list[int]) -> str:
        return f"{st[kind][0]}{tokenizer.decode(ids)}{st[kind][1]}" if ids else ""

    parts = [f"=== {traj.sample_id}: {traj.sample.get('question', '')}  (gold: {traj.sample.get('answers')})",
             span("prompt", traj.prompt_ids)]
    for turn in traj.turns:
        parts.append(span("action", turn.action_ids))
        parts.append(span("observation", turn.observation_ids))
    parts.append(f"\n--- answer={traj.answer!r} reward={traj.outcome_reward:.2f} score={traj.score:.2f} "
                 f"turns={len(traj.turns)} stop={traj.stop_reason} action_tokens={traj.num_action_tokens} "
                 f"total_tokens={len(traj.token_ids)}")
    return parts[0] + "\n" + "".join(parts[1:-1]) + parts[-1]
