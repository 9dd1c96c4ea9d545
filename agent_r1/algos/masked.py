"""Masked reductions over token tensors.

Conventions used across ``agent_r1.algos``:

* token tensors are float ``[B, T]`` (batch, sequence);
* ``mask`` is a 0/1 float tensor of the same shape, 1 on the tokens that take
  part (for RL: the *action* tokens the policy generated, 0 on prompt, tool
  observation and padding tokens);
* positions where ``mask == 0`` never influence a result, even if ``x`` holds
  NaN/inf there (we select with ``torch.where`` rather than multiply), and they
  receive an exactly-zero gradient;
* an empty mask never produces NaN: sums are 0, means are 0, variances are 0.
"""

from __future__ import annotations

import torch

__all__ = ["masked_sum", "masked_mean", "masked_var", "masked_whiten"]


def _select(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x * mask where mask > 0, exact 0 elsewhere (NaN-safe, zero gradient)."""
    mask = mask.to(x.dtype)
    return torch.where(mask > 0, x * mask, torch.zeros_like(x))


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of ``x`` over masked entries.

    x, mask: [B, T].  dim=None -> scalar; dim=d -> reduced over d (e.g. [B] for dim=-1).
    """
    sel = _select(x, mask)
    return sel.sum() if dim is None else sel.sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` over masked entries; 0 where the mask is empty.

    x, mask: [B, T].  dim=None -> scalar; dim=d -> reduced over d.
    """
    total = masked_sum(x, mask, dim)
    count = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim=dim)
    return total / count.clamp(min=1.0)  # empty -> 0 / 1 = 0


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of ``x`` over *all* masked entries of the batch -> scalar.

    ``unbiased`` applies Bessel's correction n / (n - 1) (as verl's ``masked_var``).
    With fewer than two masked entries the variance is defined as 0 (no NaN).
    """
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    if unbiased:
        n = mask.to(x.dtype).sum()
        var = var * torch.where(n > 1, n / (n - 1).clamp(min=1.0), torch.zeros_like(n))
    return var


def masked_whiten(
    x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Whiten ``x`` with the mean / unbiased std of its masked entries -> [B, T].

    out = (x - mean) / sqrt(var + eps) on masked entries, 0 elsewhere.
    ``shift_mean=False`` adds the mean back (rescale only, as in verl).
    Rows with an all-zero mask (padding) never enter mean/var.
    """
    mean = masked_mean(x, mask)
    var = masked_var(x, mask, unbiased=True)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return _select(out, (mask > 0).to(x.dtype))
