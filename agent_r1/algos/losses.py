"""Policy / value / entropy losses over masked token tensors.

Shapes: token tensors [B, T]; ``action_mask`` 0/1 float [B, T] (1 on the
tokens whose loss counts; the trainer may pass a different mask for the
loss-mask ablation).  Masked tokens contribute nothing to the loss and get an
exactly-zero gradient, even if the inputs hold NaN/inf there.

Every loss returns ``(loss, metrics)``: ``loss`` a differentiable scalar,
``metrics`` a dict of detached scalar tensors (``float(v)`` to log).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from agent_r1.algos.masked import masked_mean, masked_sum
from agent_r1.registry import NoTraits, Registry

__all__ = [
    "AGG_MODES",
    "aggregate_loss",
    "loss_denominator",
    "ppo_policy_loss",
    "vanilla_policy_loss",
    "value_loss",
    "entropy_from_logits",
    "entropy_bonus",
    "POLICY_LOSSES",
    "get_policy_loss",
]

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")

PolicyLossFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]
# (log_probs, old_log_probs, advantages, action_mask, clip_low, clip_high, dual_clip, agg, denom) -> (loss, metrics)
POLICY_LOSSES: Registry[PolicyLossFn, NoTraits] = Registry(
    "policy loss", key="algo.policy_loss", where="agent_r1.algos.POLICY_LOSSES", plugins="agent_r1.policy_losses")


def _zero_masked(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x on masked-in tokens, exact 0 elsewhere: garbage (NaN/inf) there can't reach forward or backward."""
    return torch.where(mask > 0, x, torch.zeros_like(x))


def aggregate_loss(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean",
                   denom: float | torch.Tensor | None = None, norm_tokens: int | None = None) -> torch.Tensor:
    """Reduce a per-token loss [B, T] to a scalar.

    "token-mean":              sum over all masked tokens / number of masked tokens.
    "seq-mean-token-mean":     mean over rows of (row token mean).
    "seq-mean-token-sum":      mean over rows of (row token sum).
    "seq-mean-token-sum-norm": mean over rows of (row token sum / L), L a constant length
                               (`norm_tokens`; None = the tensor's width T, as verl's default):
                               Dr. GRPO's normaliser, which no sequence's own length enters.
    Rows with no masked token are excluded from the seq-mean; an empty mask gives 0.

    `denom` replaces the normaliser (masked tokens for token-mean, rows with tokens for the
    seq-mean modes, rows with tokens x L for the -norm mode) by one counted over a larger batch:
    a micro-batch then contributes exactly its share of the mini-batch loss, so accumulated
    gradients equal the one-shot gradient.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss aggregation mode {mode!r}; known: {list(AGG_MODES)}")
    if mode == "token-mean":
        if denom is None:
            return masked_mean(loss_mat, mask)
        return masked_sum(loss_mat, mask) / max(float(denom), 1.0)
    if mode == "seq-mean-token-sum-norm":  # one sum over every masked token, one constant normaliser
        n = loss_denominator(mask, mode, norm_tokens) if denom is None else float(denom)
        return masked_sum(loss_mat, mask) / max(n, 1.0)
    row_has_tokens = ((mask > 0).any(dim=-1)).to(loss_mat.dtype)  # [B]
    if mode == "seq-mean-token-mean":
        per_seq = masked_mean(loss_mat, mask, dim=-1)  # [B]
    else:
        per_seq = masked_sum(loss_mat, mask, dim=-1)  # [B]
    n = row_has_tokens.sum().clamp(min=1.0) if denom is None else max(float(denom), 1.0)
    return masked_sum(per_seq, row_has_tokens) / n


def loss_denominator(mask: torch.Tensor, mode: str, norm_tokens: int | None = None) -> float:
    """The normaliser `aggregate_loss` uses for `mask` (count it over a whole mini-batch).

    `norm_tokens`: the constant length L of "seq-mean-token-sum-norm" (None or 0 = the width of `mask`);
    the other modes ignore it."""
    if mode == "token-mean":
        return float((mask > 0).sum())
    rows = float((mask > 0).any(dim=-1).sum())
    if mode == "seq-mean-token-sum-norm":
        return rows * float(norm_tokens or mask.shape[-1])
    return rows


@POLICY_LOSSES.register("ppo")
def ppo_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO clipped surrogate (asymmetric clip, optional dual clip) as in verl.

    log_probs (grad), old_log_probs, advantages, action_mask: [B, T].
    ratio = exp(logp - old_logp);  L = max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high)).
    dual_clip = c > 1: for A < 0 the loss is further capped at -A * c.
    Metrics: clipfrac, clipfrac_lower (dual-clip hits), approx_kl (mean old - new logp), ratio_mean.
    """
    log_ratio = _zero_masked(log_probs - old_log_probs, action_mask).clamp(min=-20.0, max=20.0)
    advantages = _zero_masked(advantages, action_mask)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(loss1, loss2)
    clipfrac = masked_mean((loss2 > loss1).to(ratio.dtype), action_mask)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        loss3 = -advantages * dual_clip
        neg = advantages < 0
        pg_losses = torch.where(neg, torch.minimum(clipped, loss3), clipped)
        lower = masked_mean((neg & (clipped > loss3)).to(ratio.dtype), action_mask)
    else:
        pg_losses = clipped
        lower = torch.zeros((), dtype=ratio.dtype, device=ratio.device)
    loss = aggregate_loss(pg_losses, action_mask, agg, denom)
    metrics = {
        "clipfrac": clipfrac.detach(),
        "clipfrac_lower": lower.detach(),
        "approx_kl": masked_mean(-log_ratio, action_mask).detach(),
        "ratio_mean": masked_mean(ratio, action_mask).detach(),
    }
    return loss, metrics


@POLICY_LOSSES.register("vanilla")
def vanilla_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Plain policy gradient L = -A * ratio, no clipping (clip args ignored).

    Same signature as ``ppo_policy_loss``.  On-policy (old = logp.detach()) the
    ratio is 1 and the gradient is the REINFORCE gradient -A * grad(logp).
    """
    log_ratio = _zero_masked(log_probs - old_log_probs, action_mask).clamp(min=-20.0, max=20.0)
    advantages = _zero_masked(advantages, action_mask)
    ratio = torch.exp(log_ratio)
    loss = aggregate_loss(-advantages * ratio, action_mask, agg, denom)
    zero = torch.zeros((), dtype=ratio.dtype, device=ratio.device)
    metrics = {
        "clipfrac": zero,
        "clipfrac_lower": zero,
        "approx_kl": masked_mean(-log_ratio, action_mask).detach(),
        "ratio_mean": masked_mean(ratio, action_mask).detach(),
    }
    return loss, metrics


def get_policy_loss(name: str) -> PolicyLossFn:
    """Look up a policy loss by name; unknown name -> ValueError listing known ones."""
    return POLICY_LOSSES[name]


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    action_mask: torch.Tensor,
    clip: float | None = 0.2,
    agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped value loss 0.5 * max((v - R)^2, (v_clip - R)^2) (clip=None: unclipped).

    values (grad), old_values, returns, action_mask: [B, T];
    v_clip = old_v + clamp(v - old_v, -clip, clip).
    Metrics: vf_clipfrac (fraction where the clipped term is the larger), vpred_mean.
    """
    returns = _zero_masked(returns, action_mask)
    values, old_values = _zero_masked(values, action_mask), _zero_masked(old_values, action_mask)
    loss1 = (values - returns).square()
    if clip is None:
        loss_mat = loss1
        clipfrac = torch.zeros((), dtype=values.dtype, device=values.device)
    else:
        v_clip = old_values + torch.clamp(values - old_values, -clip, clip)
        loss2 = (v_clip - returns).square()
        loss_mat = torch.maximum(loss1, loss2)
        clipfrac = masked_mean((loss2 > loss1).to(values.dtype), action_mask)
    loss = 0.5 * aggregate_loss(loss_mat, action_mask, agg, denom)
    metrics = {"vf_clipfrac": clipfrac.detach(), "vpred_mean": masked_mean(values, action_mask).detach()}
    return loss, metrics


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution per position: logits [B, T, V] -> [B, T]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    # 0 * log 0 := 0, NaN-free in forward and backward even for -inf logits (masked vocab)
    logp = torch.where(p > 0, logp, torch.zeros_like(logp))
    return -(p * logp).sum(dim=-1)


def entropy_bonus(logits: torch.Tensor, action_mask: torch.Tensor, agg: str = "token-mean") -> torch.Tensor:
    """Aggregated entropy over action tokens (scalar).  Use as loss = pg_loss - coef * bonus."""
    return aggregate_loss(entropy_from_logits(logits), action_mask, agg)
