"""A session's recorded calls -> trajectories the trainer trains on.

A multi-turn agent calls the endpoint once per turn, each time sending the whole history again. When
the new call's rendered prompt begins with the previous call's prompt + completion, token for token,
the history is exactly what the policy saw and sampled: the call continues the same `Trajectory`. The
previous completion is a trained `Turn`; the tokens between it and the new completion (the template's
glue, the tool results, whatever the harness added) become that turn's observation, masked.

When the prompt does not extend it (the re-rendered history tokenises differently from what was
sampled, or the harness summarised, dropped or edited messages), the sampled tokens are not a prefix
of what the policy is now conditioned on, and one sequence cannot hold both: the call starts a new
Trajectory, a new *step* of the same session. Every step shares the session's outcome reward
(`assign_outcome`), as SkyRL's step-wise training does; `drift` counts these splits.

A call the agent threw away and asked again with the same history is dropped first (retries.py): its
reply was not used, so it is not trained on, and `abandoned` counts it.

Only a call's continuation of the *latest* step is checked: a harness that branches back to an older
step's context starts a new step too (the tokens are still all trained, once each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_r1.agents.records import CallRecord
from agent_r1.agents.retries import extends, used_calls
from agent_r1.trajectory import ObservationIds, Trajectory, Turn


@dataclass
class AssembleStats:
    calls: int = 0
    steps: int = 0  # trajectories built
    drift: int = 0  # calls that could not continue the previous step (steps - 1 when any call was made)
    abandoned: int = 0  # calls the agent asked again with the same prompt, reply unused: not trained (retries.py)
    length_cut: int = 0  # completions that hit their token budget

    def metrics(self, prefix: str = "agent/") -> dict[str, float]:
        return {f"{prefix}{k}": float(v) for k, v in vars(self).items()}


def build_trajectories(records: Sequence[CallRecord], sample_id: str, sample: dict | None = None,
                       decode: Callable[[list[int]], str] | None = None, session_id: str = "",
                       turn_close_ids: Sequence[int] = ()) -> tuple[list[Trajectory], AssembleStats]:
    """Records of one session, in call order -> (steps, stats). `decode` fills the texts (logs only);
    `session_id` marks every step as the session's (a group estimator counts the session once);
    `turn_close_ids`: the end-of-turn ids (the endpoint's stop ids), so an observation that opens with
    the template's close of an action that did not sample it counts it (trajectory.ObservationIds)."""
    stats = AssembleStats(calls=len(records))
    records, stats.abandoned = used_calls(records)
    steps: list[Trajectory] = []
    context: list[int] = []  # the latest step's prompt + every action and observation so far
    for rec in records:
        if len(rec.completion_ids) != len(rec.completion_logprobs):
            raise ValueError(f"a record of session {sample_id!r} holds {len(rec.completion_ids)} completion ids "
                             f"and {len(rec.completion_logprobs)} log-probs")
        continues = bool(steps) and extends(rec.prompt_ids, context)
        if continues:
            last = steps[-1].turns[-1]
            obs = rec.prompt_ids[len(context):]
            # a completion cut by a stop string or its budget holds no end-of-turn token: the re-rendered
            # history closes the turn first; GiGPO's anchor leaves that token out (collate)
            closed = bool(last.action_ids) and last.action_ids[-1] in turn_close_ids
            closes = bool(obs) and obs[0] in turn_close_ids and not closed
            last.observation_ids = ObservationIds(obs, close=int(closes))
            if decode is not None:
                last.observation_text = decode(last.observation_ids)
        else:
            if steps:
                stats.drift += 1
            steps.append(Trajectory(sample_id=sample_id, prompt_ids=list(rec.prompt_ids), sample=dict(sample or {}),
                                    stop_reason="agent", session_id=session_id))
        turn = Turn(action_ids=list(rec.completion_ids), action_logprobs=list(rec.completion_logprobs),
                    action_text=decode(list(rec.completion_ids)) if decode is not None else "",
                    tool_calls=len(rec.info.get("tool_calls", ())), truncated=rec.finish_reason == "length",
                    info={"finish_reason": rec.finish_reason, "step": len(steps) - 1})
        turn.valid_tool_calls = turn.tool_calls
        stats.length_cut += turn.truncated
        steps[-1].turns.append(turn)
        context = rec.prompt_ids + rec.completion_ids
    stats.steps = len(steps)
    for i, step in enumerate(steps):
        step.metrics.update({"agent/step": float(i), "agent/steps": float(len(steps))})
    return steps, stats


def assign_outcome(steps: Sequence[Trajectory], reward: float, answer: str | None = None) -> None:
    """The session's outcome reward on every step (step-wise training: each step is trained as if it had
    earned the episode's reward; a group estimator compares sessions, not steps: algos/advantages.py)."""
    for step in steps:
        step.outcome_reward = float(reward)
        step.answer = answer


def agent_metrics(trajs: Sequence[Trajectory]) -> dict[str, float]:
    """An iteration's agent metrics from the session counts its steps carry (`agent/count/*`, on each
    session's first step; the rollout's dropped sessions on its first trajectory; agents/rollout.py):
    agent/calls, steps, drift, length_cut, sessions, errors, empty (dropped) and steps_per_session;
    engine_calls and engine_s (the engine's calls and seconds; the rest of rollout_s is HTTP, rendering
    and the agents' own work) and calls_per_engine_call (how well concurrent calls were batched).
    Empty without agent sessions (the built-in envs)."""
    counts: dict[str, float] = {}
    for traj in trajs:
        for k, v in traj.metrics.items():
            if k.startswith("agent/count/"):
                counts[k[len("agent/count/"):]] = counts.get(k[len("agent/count/"):], 0.0) + v
    if not counts:
        return {}
    out = {f"agent/{k}": v for k, v in counts.items()}
    out["agent/steps_per_session"] = counts.get("steps", 0.0) / max(counts.get("sessions", 0.0), 1.0)
    if counts.get("engine_calls"):
        out["agent/calls_per_engine_call"] = counts.get("calls", 0.0) / counts["engine_calls"]
    return out
