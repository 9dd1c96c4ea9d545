"""Per-token KL estimators between the policy and a reference policy.

All functions take log-probabilities of the *sampled* tokens, [B, T], and
return an element-wise [B, T] estimate of KL(pi || pi_ref) (Schulman's k1/k2/k3).
Reduce with ``agent_r1.algos.aggregate_loss`` / ``masked_mean`` and the
action mask.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["KL_PENALTIES", "kl_penalty", "get_kl_penalty"]

KLFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _k1(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k1 = logp - ref (unbiased, high variance, can be negative)."""
    return log_probs - ref_log_probs


def _abs(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """|logp - ref|."""
    return (log_probs - ref_log_probs).abs()


def _k2(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k2 = 0.5 * (logp - ref)^2 (verl "mse")."""
    return 0.5 * (log_probs - ref_log_probs).square()


def _k3(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k3 = exp(ref - logp) - (ref - logp) - 1 >= 0 (verl "low_var_kl"), clamped to [0, 10].

    Computed as expm1(x) - x (accurate for small x); the lower clamp 0 only removes
    float rounding below the true minimum (verl clamps at -10, a no-op bound).
    """
    kl = (ref_log_probs - log_probs).clamp(min=-20.0, max=20.0)  # keep exp() finite
    return (torch.expm1(kl) - kl).clamp(min=0.0, max=10.0)


KL_PENALTIES: dict[str, KLFn] = {
    "k1": _k1,
    "kl": _k1,
    "abs": _abs,
    "k2": _k2,
    "mse": _k2,
    "k3": _k3,
    "low_var_kl": _k3,
}


def get_kl_penalty(kind: str) -> KLFn:
    """Look up a KL estimator by name; unknown name -> ValueError listing known ones."""
    try:
        return KL_PENALTIES[kind]
    except KeyError:
        raise ValueError(f"unknown KL penalty {kind!r}; known: {sorted(KL_PENALTIES)}") from None


def kl_penalty(log_probs: torch.Tensor, ref_log_probs: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Element-wise KL estimate [B, T] of kind "k1" | "k2" | "k3" | "abs" (aliases: kl, mse, low_var_kl)."""
    return get_kl_penalty(kind)(log_probs, ref_log_probs)
