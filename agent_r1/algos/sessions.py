"""Step-wise agent sessions in a group estimator: each session counts once, whatever its steps.

An agent trained through the endpoint (agents/) may leave one session as several steps: a call whose
rendered prompt does not extend the previous call's starts a new step, and every step carries the
session's outcome. Fed to GRPO as rows, a session of three steps would weigh three times in its
group's mean and std, and its advantage would depend on how often its harness edited the history.
SkyRL's step-wise training computes the advantage on each trajectory's last step and gives it to every
step of the trajectory; `per_session` does the same for the estimators that give a trajectory one
advantage (`scalar` in the registry: GRPO, its no-std and Dr. variants, RLOO, REINFORCE++-baseline):
the estimator sees one row per session (its last step), and each step's action tokens get the
session's advantage. Rows without a shared session (every built-in env) go through unchanged, so the
built-in runs compute exactly what they computed before.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

import torch

from agent_r1.algos.registry import ADV_ESTIMATORS, AdvantageInputs, AdvantageOutputs, Estimator


def last_step_rows(session_ids: Sequence[Hashable]) -> list[int]:
    """The row of each session's last step, in row order (steps of a session come in call order)."""
    last: dict[Hashable, int] = {}
    for row, session in enumerate(session_ids):
        last[session] = row
    return sorted(last.values())


def per_session(estimator: Estimator) -> Estimator:
    """`estimator` (a `scalar` one) over sessions instead of rows; the same call where no session has
    more than one row."""

    def run(x: AdvantageInputs) -> AdvantageOutputs:
        if x.session_ids is None or len(set(x.session_ids)) == len(x.session_ids):
            return estimator(x)
        rows = last_step_rows(x.session_ids)
        # one token per session carries its score: a scalar estimator reads scores, groups and the mask
        one = torch.ones((len(rows), 1), dtype=x.action_mask.dtype, device=x.action_mask.device)
        scores = x.scores[rows]
        out = estimator(replace(x, token_rewards=scores[:, None].to(one.dtype), scores=scores, action_mask=one,
                                group_ids=[x.group_ids[r] for r in rows], values=None, turn_index=None,
                                context_keys=None, session_ids=None))
        by_session = {x.session_ids[r]: out.advantages[k, 0] for k, r in enumerate(rows)}
        per_row = torch.stack([by_session[s] for s in x.session_ids]).to(x.action_mask.dtype)
        return AdvantageOutputs(per_row[:, None] * x.action_mask)

    return run


def estimator_over_sessions(name: str) -> Estimator:
    """The registered estimator `name`, counting each agent session once where it is a `scalar` one."""
    estimator = ADV_ESTIMATORS[name]
    return per_session(estimator) if ADV_ESTIMATORS.traits(name).scalar else estimator
