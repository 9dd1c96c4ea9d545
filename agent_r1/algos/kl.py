"""Per-token KL estimators between the policy and a reference policy.

All functions take log-probabilities of the *sampled* tokens, [B, T], and
return an element-wise [B, T] estimate of KL(pi || pi_ref) (Schulman's k1/k2/k3).
Reduce with ``agent_r1.algos.aggregate_loss`` / ``masked_mean`` and the
action mask.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from agent_r1.registry import NoTraits, Registry

__all__ = ["KL_PENALTIES", "kl_penalty", "get_kl_penalty"]

KLFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
KL_PENALTIES: Registry[KLFn, NoTraits] = Registry(
    "KL estimator", key="algo.kl_kind", where="agent_r1.algos.KL_PENALTIES", plugins="agent_r1.kl_estimators")


@KL_PENALTIES.register("k1")
@KL_PENALTIES.register("kl")
def _k1(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k1 = logp - ref (unbiased, high variance, can be negative)."""
    return log_probs - ref_log_probs


@KL_PENALTIES.register("abs")
def _abs(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """|logp - ref|."""
    return (log_probs - ref_log_probs).abs()


@KL_PENALTIES.register("k2")
@KL_PENALTIES.register("mse")
def _k2(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k2 = 0.5 * (logp - ref)^2 (verl "mse")."""
    return 0.5 * (log_probs - ref_log_probs).square()


@KL_PENALTIES.register("k3")
@KL_PENALTIES.register("low_var_kl")
def _k3(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k3 = exp(ref - logp) - (ref - logp) - 1 >= 0 (verl "low_var_kl"), clamped to [0, 10].

    Computed as expm1(x) - x (accurate for small x); the lower clamp 0 only removes
    float rounding below the true minimum (verl clamps at -10, a no-op bound).
    """
    kl = (ref_log_probs - log_probs).clamp(min=-20.0, max=20.0)  # keep exp() finite
    return (torch.expm1(kl) - kl).clamp(min=0.0, max=10.0)


def get_kl_penalty(kind: str) -> KLFn:
    """Look up a KL estimator by name; unknown name -> ValueError listing known ones."""
    return KL_PENALTIES[kind]


def kl_penalty(log_probs: torch.Tensor, ref_log_probs: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Element-wise KL estimate [B, T] of kind "k1" | "k2" | "k3" | "abs" (aliases: kl, mse, low_var_kl)."""
    return get_kl_penalty(kind)(log_probs, ref_log_probs)
