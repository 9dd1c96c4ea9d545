"""Name -> advantage-estimator registry (`ADV_ESTIMATORS`, an `agent_r1.registry.Registry`).

Every estimator takes one ``AdvantageInputs`` and returns ``AdvantageOutputs`` and declares its
traits (`EstimatorTraits`) when it registers, so the trainer switches algorithms by config string and
the config's validation asks the registry instead of naming estimators::

    est = ADV_ESTIMATORS[cfg.adv_estimator]
    out = est(AdvantageInputs(token_rewards, scores, action_mask, group_ids, values, gamma, lam))
    if ADV_ESTIMATORS.traits(cfg.adv_estimator).critic: ...train the value head on out.returns...

Add a new estimator with ``@ADV_ESTIMATORS.register("name", group=..., critic=...)``.
The policy-loss and KL registries live next to their functions
(``losses.POLICY_LOSSES``, ``kl.KL_PENALTIES``) and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agent_r1.algos import advantages as adv
from agent_r1.algos.kl import KL_PENALTIES, get_kl_penalty
from agent_r1.algos.losses import POLICY_LOSSES, get_policy_loss
from agent_r1.registry import Registry

__all__ = [
    "AdvantageInputs",
    "AdvantageOutputs",
    "EstimatorTraits",
    "ADV_ESTIMATORS",
    "register_adv_estimator",
    "get_adv_estimator",
    "needs_critic",
    "POLICY_LOSSES",
    "get_policy_loss",
    "KL_PENALTIES",
    "get_kl_penalty",
]


@dataclass
class AdvantageInputs:
    """Everything an estimator may need; each uses a subset.

    token_rewards: [B, T] rewards on action tokens (outcome reward on the last one).
    scores:        [B] trajectory-level outcome scores (for group estimators).
    action_mask:   [B, T] 0/1, 1 on policy-generated tokens.
    group_ids:     length-B list of hashable prompt ids.
    values:        [B, T] critic values, or None (required by "gae").
    turn_index:    [B, T] long, turn k on its tokens, -1 elsewhere; context_keys: per row, a digest
                   per turn of the context it acts on (both from `collate`; read by "gigpo").
    gigpo:         `algo.gigpo` (step_advantages.GiGPOConfig), or None for its defaults.
    session_ids:   length-B list: rows that are steps of one agent session share an id (collate; read by
                   algos/sessions.py for the `scalar` estimators), or None: every row its own episode.
    """

    token_rewards: torch.Tensor
    scores: torch.Tensor
    action_mask: torch.Tensor
    group_ids: Sequence[Hashable]
    values: torch.Tensor | None = None
    gamma: float = 1.0
    lam: float = 1.0
    normalize_std: bool = True
    turn_index: torch.Tensor | None = None
    context_keys: Sequence[Sequence[Hashable]] | None = None
    gigpo: Any = None
    session_ids: Sequence[Hashable] | None = None


@dataclass
class AdvantageOutputs:
    """advantages [B, T] (0 on masked tokens); returns [B, T] or None (critic-free estimators)."""

    advantages: torch.Tensor
    returns: torch.Tensor | None = None


Estimator = Callable[[AdvantageInputs], AdvantageOutputs]


@dataclass(frozen=True)
class EstimatorTraits:
    """What the rest of the system needs to know about an estimator (read by config.validate and the trainer).

    group:  compares the samples of one prompt (a baseline from its group): needs rollout.n_samples >= 2.
    critic: needs a value function; the trainer builds one and trains it on `AdvantageOutputs.returns`.
    scalar: gives each trajectory one advantage on all its action tokens (an outcome estimator), so the
            steps of an agent session can take their session's (algos/sessions.py).
    """

    group: bool = False
    critic: bool = False
    scalar: bool = False


ADV_ESTIMATORS: Registry[Estimator, EstimatorTraits] = Registry(
    "advantage estimator", key="algo.adv_estimator", where="agent_r1.algos.ADV_ESTIMATORS", traits=EstimatorTraits,
    plugins="agent_r1.adv_estimators")


def register_adv_estimator(name: str, *, needs_critic: bool = False, group: bool = False,
                           scalar: bool = False) -> Callable[[Estimator], Estimator]:
    """Shorthand for ``ADV_ESTIMATORS.register(name, critic=needs_critic, group=group, scalar=scalar)``."""
    return ADV_ESTIMATORS.register(name, critic=needs_critic, group=group, scalar=scalar)


def get_adv_estimator(name: str) -> Estimator:
    """Look up an estimator; unknown name -> ValueError listing the known names."""
    return ADV_ESTIMATORS[name]


def needs_critic(name: str) -> bool:
    """True iff the estimator needs a value function (only "gae" among the built-ins)."""
    return ADV_ESTIMATORS.traits(name).critic


@ADV_ESTIMATORS.register("gae", critic=True)
def _gae(x: AdvantageInputs) -> AdvantageOutputs:
    if x.values is None:
        raise ValueError("advantage estimator 'gae' needs values (a critic); got values=None")
    a, r = adv.compute_gae(x.token_rewards, x.values, x.action_mask, x.gamma, x.lam)
    return AdvantageOutputs(a, r)


@ADV_ESTIMATORS.register("grpo", group=True, scalar=True)
def _grpo(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_grpo(x.scores, x.group_ids, x.action_mask, x.normalize_std))


@ADV_ESTIMATORS.register("grpo_no_std", group=True, scalar=True)
def _grpo_no_std(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_grpo(x.scores, x.group_ids, x.action_mask, normalize_std=False))


@ADV_ESTIMATORS.register("dr_grpo", group=True, scalar=True)
def _dr_grpo(x: AdvantageInputs) -> AdvantageOutputs:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective",
    arXiv:2503.20783): A_i = r_i - mean(group), no division by the group's std (which up-weights
    prompts whose rewards barely vary). The arithmetic of "grpo_no_std"; the paper's other half is
    the loss normaliser: ``algo.loss_agg: seq-mean-token-sum-norm`` (a constant length, not |o_i|)."""
    return AdvantageOutputs(adv.compute_grpo(x.scores, x.group_ids, x.action_mask, normalize_std=False))


@ADV_ESTIMATORS.register("rloo", group=True, scalar=True)
def _rloo(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_rloo(x.scores, x.group_ids, x.action_mask))


@ADV_ESTIMATORS.register("reinforce_pp")
def _reinforce_pp(x: AdvantageInputs) -> AdvantageOutputs:
    a, r = adv.compute_reinforce_pp(x.token_rewards, x.action_mask, x.gamma)
    return AdvantageOutputs(a, r)


@ADV_ESTIMATORS.register("reinforce_pp_baseline", group=True, scalar=True)
def _reinforce_pp_baseline(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_reinforce_pp_baseline(x.scores, x.group_ids, x.action_mask))
