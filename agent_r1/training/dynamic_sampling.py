"""`algo.dynamic_sampling`: DAPO's dynamic sampling (Yu et al. 2025, section 3.2).

A group whose trajectories all scored the same has advantage 0 under every group estimator (GRPO,
RLOO, ...): it adds nothing to the policy gradient, yet it counts in the batch, so the batch the
update learns from shrinks as the policy gets good (or stays bad) on a prompt. Dynamic sampling drops
such groups and rolls out more prompts until the batch holds `train.prompts_per_iter` groups that
do carry a gradient:

1. round 0 is the iteration's own rollout (`train.prompts_per_iter` prompts, the usual seed);
2. groups whose metric (`score`: outcome + process rewards, what the estimators read; or `outcome`)
   is equal on every session are dropped (a group is one prompt's `rollout.n_samples` sessions; an
   agent session split into steps counts once, with its last step's value: algos/dynamic_sampling.py);
3. while fewer than `train.prompts_per_iter` groups are kept and fewer than
   `algo.dynamic_sampling.max_extra_rounds` extra rounds were rolled out, another
   `train.prompts_per_iter` prompts are drawn from the same sampler (so a checkpoint's sampler
   position covers them, and a resumed run draws what the uninterrupted one did) and rolled out with
   the seed of (seed, iteration, shard, round): a full batch per round, as verl's recipe does;
4. the kept groups, in rollout order, are trimmed to exactly `train.prompts_per_iter`;
5. if the cap is reached with fewer, the update learns from what was kept; if no group survived at
   all, it learns from round 0's batch as it came (`dynamic/fallback` = 1): under a group estimator
   its advantages are all 0, so the policy loss adds no gradient and the update is what it would
   have been without dynamic sampling (the iteration, the LR schedule, checkpoints and asynchronous
   versions all advance as usual, which skipping the update would not do).

The same `fill_batch` serves the in-process trainer and the Ray driver (synchronous and
asynchronous: there round 0 is the batch popped from the in-flight queue, sampled by an older
policy, and extra rounds are rolled out with the learner's current weights; each trajectory keeps
its own `policy_version`, so the decoupled-PPO correction treats each at its own staleness).

Metrics: `dynamic/rounds` (1 = no extra round), `dynamic/prompts_sampled`, `dynamic/groups_kept`
(the groups trained on), `dynamic/groups_dropped` (all-equal groups over every round),
`dynamic/groups_trimmed` (kept beyond the batch and left out), `dynamic/fallback`. The usual rollout
metrics (reward_mean, groups_all_equal, ...) describe the trained batch; an agent run's `agent/*`
counts (calls, drift, sessions, empty, ...) describe every session rolled out, over every round.

How it differs from `algo.skip_zero_advantage`: that one keeps the batch as sampled and only
skips the forward/backward of rows whose gradient is 0 (a speed-up, same update); dynamic sampling
changes what is learned from, replacing those groups with informative ones (more rollouts, a
fuller gradient).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_r1.agents.assemble import agent_metrics
from agent_r1.algos.dynamic_sampling import informative, split_groups
from agent_r1.trajectory import Trajectory


def fill_batch(cfg: Any, first: list[Trajectory],
               more: Callable[[int], list[Trajectory]]) -> tuple[list[Trajectory], dict[str, float]]:
    """The trajectories to learn from and the `dynamic/*` metrics. `first`: round 0, the iteration's
    own rollout; `more(round)` draws `train.prompts_per_iter` prompts from the run's sampler and
    rolls them out with round `round`'s seed. Off (`algo.dynamic_sampling.enabled` false): `first`
    as it is, no metrics."""
    ds = cfg.algo.dynamic_sampling
    if not ds.enabled:
        return first, {}
    target, n = cfg.train.prompts_per_iter, cfg.rollout.n_samples
    kept: list[list[Trajectory]] = []
    dropped = sampled = 0
    batch, rounds = first, 0
    rolled_out: list[Trajectory] = []
    while True:
        rolled_out += batch
        groups = split_groups(batch, n)
        sampled += len(groups)
        for g in groups:
            if informative(g, ds.metric):
                kept.append(g)
            else:
                dropped += 1
        rounds += 1
        if len(kept) >= target or rounds > ds.max_extra_rounds:
            break
        batch = more(rounds)
    trimmed = max(len(kept) - target, 0)
    kept = kept[:target]
    metrics = {"dynamic/rounds": float(rounds), "dynamic/prompts_sampled": float(sampled),
               "dynamic/groups_kept": float(len(kept)), "dynamic/groups_dropped": float(dropped),
               "dynamic/groups_trimmed": float(trimmed), "dynamic/fallback": float(not kept),
               # agent sessions' counts (agent/*) over every session rolled out, dropped groups too: the
               # kept groups' steps alone would hide their drift and lose the rollout's empty-session count
               **agent_metrics(rolled_out)}
    if not kept:  # no group carries a gradient: learn from the iteration's own batch (see the module doc)
        return first, metrics
    return [t for g in kept for t in g], metrics
