"""`algo.skip_zero_advantage`: rows whose policy-loss gradient is exactly 0 skip forward/backward.

A row whose advantages are 0 on every loss-mask token adds exactly 0 to the clipped (or vanilla)
policy loss and to its gradient: each token's term is -A * ratio (or -A * clip(ratio), or -A * c)
with A = 0, and the log-ratio is clamped, so the product is 0 in forward and backward. In GRPO
every row of a group whose rewards are all equal is such a row, which early in training (or on a
hard task) is most of the batch. Skipping them leaves the update as it was:

- the normaliser: `loss_denominator` is counted over every row of the mini-batch before the
  skipped rows are taken out, so each trained row's share of the loss is what it was (token-mean
  and both seq-mean modes);
- the optimiser step: a mini-batch whose rows are all skipped still steps, on zero gradients
  (AdamW's moments decay and weight decay applies, as after a backward of zeros);
- entropy bonus and KL loss terms are not 0 on such rows, so the config refuses the option unless
  `algo.entropy_coef` is 0 and `algo.kl_coef` is 0 or `algo.kl_in_reward` is true (then the KL
  sits inside the advantages and the loss has no KL term);
- metrics: `policy_loss` is unchanged (the skipped shares were 0); the `entropy` and `kl` metrics
  become means over the trained rows (rescaled by the full / trained normaliser); `clipfrac`,
  `approx_kl` and `ratio_mean` are means over the trained rows' micro-batches;
  `skipped_rows_fraction` records the share of rows left out;
- numerics: the trained rows run in other micro-batch compositions, so the gradient equals the
  unskipped one to float rounding, not bit for bit.

The critic (GAE) is trained on every row as before: its value loss does not vanish with the advantage.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from agent_r1.algos import loss_denominator


def trained_rows(advantages: torch.Tensor, loss_mask: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The rows of `idx` (1-D row indices into `[B, T]` tensors) with a non-zero advantage on at
    least one loss-mask token, in `idx` order. NaN counts as non-zero, so it still reaches the
    non-finite-loss check."""
    adv, mask = advantages[idx], loss_mask[idx] > 0
    return idx[((adv != 0) & mask).any(dim=-1)]


def finish_skipped(record: dict[str, float], params: Iterable[torch.nn.Parameter], loss_mask: torch.Tensor,
                   idx: torch.Tensor, rows: torch.Tensor, agg: str) -> dict[str, float]:
    """After the backward of `rows` (a subset of the mini-batch `idx`): zero gradients when no row
    ran (so the optimiser still steps, as on a batch of zeros), the entropy / kl metrics as means
    over the trained rows, and the skipped share."""
    if len(rows) == 0:
        for p in params:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
        record.setdefault("policy_loss", 0.0)
    else:
        # full / trained normaliser, both counted here: seq-mean-token-sum-norm's constant length cancels
        full, trained = loss_denominator(loss_mask[idx], agg), loss_denominator(loss_mask[rows], agg)
        for k in ("entropy", "kl"):
            if k in record and trained > 0:
                record[k] *= full / trained
    record["skipped_rows_fraction"] = 1.0 - len(rows) / max(len(idx), 1)
    return record
