"""Name -> advantage-estimator registry.

Every estimator takes one ``AdvantageInputs`` and returns ``AdvantageOutputs``
so the trainer can switch algorithms by config string::

    est = get_adv_estimator(cfg.adv_estimator)
    out = est(AdvantageInputs(token_rewards, scores, action_mask, group_ids, values, gamma, lam))
    if needs_critic(cfg.adv_estimator): ...train the value head on out.returns...

Add a new estimator with ``@register_adv_estimator("name")``.
The policy-loss and KL registries live next to their functions
(``losses.POLICY_LOSSES``, ``kl.KL_PENALTIES``) and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch

from agent_r1.algos import advantages as adv
from agent_r1.algos.kl import KL_PENALTIES, get_kl_penalty
from agent_r1.algos.losses import POLICY_LOSSES, get_policy_loss

__all__ = [
    "AdvantageInputs",
    "AdvantageOutputs",
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
    """

    token_rewards: torch.Tensor
    scores: torch.Tensor
    action_mask: torch.Tensor
    group_ids: Sequence[Hashable]
    values: torch.Tensor | None = None
    gamma: float = 1.0
    lam: float = 1.0
    normalize_std: bool = True


@dataclass
class AdvantageOutputs:
    """advantages [B, T] (0 on masked tokens); returns [B, T] or None (critic-free estimators)."""

    advantages: torch.Tensor
    returns: torch.Tensor | None = None


Estimator = Callable[[AdvantageInputs], AdvantageOutputs]
ADV_ESTIMATORS: dict[str, Estimator] = {}
_NEEDS_CRITIC: dict[str, bool] = {}


def register_adv_estimator(name: str, *, needs_critic: bool = False) -> Callable[[Estimator], Estimator]:
    """Decorator registering ``fn(AdvantageInputs) -> AdvantageOutputs`` under ``name``."""

    def deco(fn: Estimator) -> Estimator:
        if name in ADV_ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} already registered")
        ADV_ESTIMATORS[name] = fn
        _NEEDS_CRITIC[name] = needs_critic
        return fn

    return deco


def get_adv_estimator(name: str) -> Estimator:
    """Look up an estimator; unknown name -> ValueError listing the known names."""
    try:
        return ADV_ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown advantage estimator {name!r}; known: {sorted(ADV_ESTIMATORS)}") from None


def needs_critic(name: str) -> bool:
    """True iff the estimator needs a value function (only "gae" among the built-ins)."""
    get_adv_estimator(name)  # validate the name
    return _NEEDS_CRITIC[name]


@register_adv_estimator("gae", needs_critic=True)
def _gae(x: AdvantageInputs) -> AdvantageOutputs:
    if x.values is None:
        raise ValueError("advantage estimator 'gae' needs values (a critic); got values=None")
    a, r = adv.compute_gae(x.token_rewards, x.values, x.action_mask, x.gamma, x.lam)
    return AdvantageOutputs(a, r)


@register_adv_estimator("grpo")
def _grpo(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_grpo(x.scores, x.group_ids, x.action_mask, x.normalize_std))


@register_adv_estimator("grpo_no_std")
def _grpo_no_std(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_grpo(x.scores, x.group_ids, x.action_mask, normalize_std=False))


@register_adv_estimator("rloo")
def _rloo(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_rloo(x.scores, x.group_ids, x.action_mask))


@register_adv_estimator("reinforce_pp")
def _reinforce_pp(x: AdvantageInputs) -> AdvantageOutputs:
    a, r = adv.compute_reinforce_pp(x.token_rewards, x.action_mask, x.gamma)
    return AdvantageOutputs(a, r)


@register_adv_estimator("reinforce_pp_baseline")
def _reinforce_pp_baseline(x: AdvantageInputs) -> AdvantageOutputs:
    return AdvantageOutputs(adv.compute_reinforce_pp_baseline(x.scores, x.group_ids, x.action_mask))
