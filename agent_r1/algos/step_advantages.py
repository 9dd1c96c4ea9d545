"""Step-level credit for multi-turn agents: the `gigpo` estimator.

GRPO gives every token of a trajectory the same advantage, so a good search in a failed trajectory is
punished like the bad answer after it. GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization
for LLM Agent Training", arXiv 2505.10978; reference code verl-agent's ``gigpo/core_gigpo.py``) adds a
turn-level term computed inside the same prompt group, with no critic:

- episode part: GRPO on the trajectory scores of the prompt group (``compute_grpo``, unchanged);
- step groups: the turns of one prompt group's trajectories whose *anchor state* is identical;
- step return of turn k: ``G_k = r_k + gamma * G_{k+1}`` (``algo.gamma``), where r_k is the reward the
  turn earned (its process reward, plus the outcome on the last turn);
- step advantage: ``G_k - mean(step group)``, divided by the group's std (+1e-6, Bessel's correction,
  as GRPO) when ``algo.gigpo.step_normalize_std``; 0 for a group of one or one whose returns are equal;
- every action token of turn k gets ``A_episode + step_weight * A_step(k)``; other tokens 0. With
  ``algo.gigpo.step_weight: 0`` this is GRPO exactly, agent sessions included: an agent session split
  into steps (agents/assemble.py) counts once in the episode part, every step getting the session's
  advantage, as GRPO through algos/advantages.py (tests/algos/test_gigpo_sessions.py).

Anchor state. GiGPO groups actions taken from the same *environment* state (in ALFWorld, the current
text observation), not the same full context: two samples that worded a query differently almost never
share a context again, so full-context groups would all be singletons after turn 0. For a retrieval QA
agent the environment's state is the question plus what the tools have returned so far; the wording of
the agent's own actions is not part of it. So the anchor of turn k is built from the token ids of the
contexts the turn acts on, skipping the actions (`collate`'s ``context_keys``: a digest of the prompt
for turn 0, of turn k-1's observation for turn k):

- ``observations`` (default): the prompt and every observation so far. Turn k of two trajectories is
  one group when they saw the same search results in the same order, however they asked for them.
- ``last_observation``: only the newest context (the prompt for turn 0, else the last observation),
  GiGPO's "current observation" taken literally: larger groups (a trajectory that reached the same
  documents in fewer searches joins them) at the cost of ignoring the earlier evidence.

Token ids rather than the observation text: the ids are what the policy conditions on (an observation
cut shorter by the token budget is a different state for it). Groups never cross prompt groups.

Rewards come from ``AdvantageInputs.token_rewards`` summed over each turn's tokens, the one source
every token-level estimator reads, so a KL in the reward (``algo.kl_in_reward``) enters the step
returns too. A masked turn (``Turn.masked``: sampled, never trained) has no trained token: like
`Trajectory.token_rewards`, its reward is counted on the trained turn before it (or, when none, the
first one after it), and the masked turn itself joins no step group (its own return would lack that
reward). Only turns with at least one token in ``action_mask`` are grouped and trained.

What upstream Agent-R1 (github 0russwest0/Agent-R1) does: v0.1 (read in the copy at
alphaXiv/paper-implementations, ``agent_r1/src/agent_r1/training/core_algos.py``) had no turn-level
advantage; its "step-level" credit was process rewards at each tool call's last token plus PPO's GAE run over the
action tokens only (observation tokens skipped), i.e. token-level GAE with a critic. Its current
``agent_r1/trainer/ppo/core_algos.py`` makes one row per agent step and runs GAE over steps (step
reward = the step's token-reward sum, V at the step's first token, whitened per step) and has a GiGPO
estimator like this one (episode GRPO + ``step_advantage_w`` x step-group-normalised discounted step
returns, grouped by an environment-provided ``anchor_obs``). Here the critic-based turn-level option
stays ``gae`` (token GAE across observation holes); ``gigpo`` is the critic-free one.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from agent_r1.algos.advantages import ADV_ESTIMATORS, AdvantageInputs, AdvantageOutputs, compute_grpo, per_session

__all__ = ["ANCHORS", "GiGPOConfig", "compute_step_advantages", "step_returns"]

ANCHORS = ("observations", "last_observation")


@dataclass
class GiGPOConfig:
    """`algo.gigpo`: the step-level part of `algo.adv_estimator: gigpo` (read by no other estimator)."""
    step_weight: float = 1.0  # omega in A = A_episode + omega * A_step (range in schema.LIMITS)
    step_normalize_std: bool = True  # divide the step advantage by its step group's std
    anchor: str = "observations"  # observations | last_observation (see this module's docstring)

    def __post_init__(self) -> None:
        if self.anchor not in ANCHORS:
            raise ValueError(f"algo.gigpo.anchor={self.anchor!r}; choose one of {sorted(ANCHORS)}")


def step_returns(token_rewards: torch.Tensor, turn_index: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted return of every turn -> float64 [B, K] (K = most turns in a row).

    r[b, k] = sum of token_rewards[b, t] over the tokens with turn_index k; G_k = r_k + gamma * G_{k+1}.
    """
    B = token_rewards.shape[0]
    K = int(turn_index.max().item()) + 1 if turn_index.numel() else 0
    own = turn_index >= 0
    rewards = torch.zeros(B, max(K, 1), dtype=torch.float64, device=token_rewards.device)
    rewards.scatter_add_(1, turn_index.clamp(min=0),
                         torch.where(own, token_rewards.to(torch.float64), torch.zeros((), dtype=torch.float64)))
    returns = torch.zeros_like(rewards)
    running = torch.zeros(B, dtype=torch.float64, device=token_rewards.device)
    for k in reversed(range(K)):
        running = rewards[:, k] + gamma * running
        returns[:, k] = running
    return returns[:, :K]


@torch.no_grad()
def compute_step_advantages(
    token_rewards: torch.Tensor,
    action_mask: torch.Tensor,
    turn_index: torch.Tensor,
    group_ids: Sequence[Hashable],
    context_keys: Sequence[Sequence[Hashable]],
    gamma: float = 1.0,
    normalize_std: bool = True,
    anchor: str = "observations",
    eps: float = 1e-6,
) -> torch.Tensor:
    """GiGPO step advantages -> [B, T] (A_step of the token's turn on action tokens, 0 elsewhere).

    token_rewards, action_mask: [B, T]; turn_index: long [B, T] (-1 off the turns); group_ids: B prompt
    ids; context_keys[b][k]: the newest context turn k of row b acts on (see the module docstring).
    """
    B = token_rewards.shape[0]
    if turn_index.shape != token_rewards.shape:
        raise ValueError(f"turn_index has shape {tuple(turn_index.shape)}, token_rewards {tuple(token_rewards.shape)}")
    if len(group_ids) != B or len(context_keys) != B:
        raise ValueError(f"len(group_ids)={len(group_ids)} and len(context_keys)={len(context_keys)} "
                         f"must both equal the batch size {B}")
    if anchor not in ANCHORS:
        raise ValueError(f"anchor={anchor!r}; choose one of {sorted(ANCHORS)}")
    returns = step_returns(token_rewards, turn_index, gamma)
    K = returns.shape[1]
    act = (action_mask > 0) & (turn_index >= 0)
    trained = torch.zeros(B, max(K, 1), dtype=torch.long, device=act.device)
    trained.scatter_add_(1, turn_index.clamp(min=0), act.long())
    groups: dict[tuple[Hashable, Hashable], list[tuple[int, int]]] = {}
    for b, k in (trained[:, :K] > 0).nonzero().tolist():
        keys = context_keys[b]
        if k >= len(keys):
            raise ValueError(f"row {b} has a token of turn {k} but only {len(keys)} context_keys")
        state = tuple(keys[:k + 1]) if anchor == "observations" else keys[k]
        groups.setdefault((group_ids[b], state), []).append((b, k))
    step_adv = torch.zeros(B, max(K, 1), dtype=torch.float64, device=returns.device)
    for members in groups.values():
        if len(members) < 2:
            continue
        rows, turns = zip(*members)
        g = returns[list(rows), list(turns)]
        if bool((g == g[0]).all()):  # equal returns: exactly 0 (a float mean need not equal its members)
            continue
        adv = g - g.mean()
        if normalize_std:
            adv = adv / (g.std() + eps)
        step_adv[list(rows), list(turns)] = adv
    per_token = torch.gather(step_adv, 1, turn_index.clamp(min=0))
    return torch.where(act, per_token, torch.zeros((), dtype=torch.float64)).to(
        token_rewards.dtype if token_rewards.is_floating_point() else torch.float32)


def _grpo(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(compute_grpo(x.scores, x.group_ids, x.action_mask, x.normalize_std))


# the episode part compares sessions, not rows: a session split into steps would weigh once per step
_episode = per_session(_grpo)


@ADV_ESTIMATORS.register("gigpo", group=True)
def _gigpo(x: AdvantageInputs) -> AdvantageOutputs:
    if x.turn_index is None or x.context_keys is None:
        raise ValueError("advantage estimator 'gigpo' needs AdvantageInputs.turn_index and .context_keys "
                         "(collate() builds both); got None")
    cfg = x.gigpo if x.gigpo is not None else GiGPOConfig()
    episode = _episode(x).advantages
    step = compute_step_advantages(x.token_rewards, x.action_mask, x.turn_index, x.group_ids, x.context_keys,
                                   x.gamma, cfg.step_normalize_std, cfg.anchor)
    return AdvantageOutputs(episode + cfg.step_weight * step.to(episode.dtype))
