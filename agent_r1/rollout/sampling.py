"""Next-token sampling with temperature / top-k / top-p; returns ids and their log-probs."""

from __future__ import annotations

from typing import Any

import torch


def row_generators(seed: int | list[int] | None, n: int) -> torch.Generator | list[torch.Generator] | None:
    """`SamplingParams.seed` as generators: one for the call (an int), one per prompt (a list), or None."""
    if seed is None:
        return None
    if isinstance(seed, int):
        return torch.Generator().manual_seed(seed)
    if len(seed) != n:
        raise ValueError(f"SamplingParams.seed has {len(seed)} seeds for {n} prompts")
    return [torch.Generator().manual_seed(int(s)) for s in seed]


def sample_next(logits: torch.Tensor, params: Any,
                generator: torch.Generator | list[torch.Generator] | None = None):
    """logits `[batch, vocab]` -> (token ids `[batch]`, log-probs `[batch]`).

    The log-prob is taken under the distribution actually sampled from (after temperature,
    top-k and top-p); greedy decoding (temperature 0) reports the untempered log-prob.
    """
    if params.temperature <= 0:
        logp = torch.log_softmax(logits, dim=-1)
        tokens = logits.argmax(dim=-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)
    logits = logits / params.temperature
    if params.top_k and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        drop_sorted = cum - torch.softmax(sorted_logits, dim=-1) > params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    tokens = draw(logp.exp(), generator)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def draw(probs: torch.Tensor, generator: torch.Generator | list[torch.Generator] | None = None) -> torch.Tensor:
    """One index per row of `probs` `[batch, vocab]` (rows need not sum to 1), by inverse CDF: the
    first index whose cumulative probability exceeds u * total, u ~ U[0, 1). The distribution of
    `torch.multinomial(probs, 1)`, which on a CPU validates and samples row by row (about 20x
    slower at 128 x 1,000: a tenth of a long decode). The sum runs in float64, so even a 152k
    vocabulary leaves every token its own probability; a zero-probability token (cut by top-k /
    top-p) is never drawn, since its cumulative value equals its predecessor's. `generator`: one for the
    batch, or one per row (each row's u from its own: its draws do not depend on the batch it is in)."""
    cdf = probs.to(torch.float64).cumsum(-1)
    total = cdf[:, -1]
    if not (torch.isfinite(total) & (total > 0)).all():  # torch.multinomial raised here too
        raise ValueError(f"cannot sample: {int((~torch.isfinite(total) | (total <= 0)).sum())} row(s) of the "
                         "next-token distribution have no finite probability mass (NaN/inf logits from the model?)")
    if isinstance(generator, list):
        u = torch.cat([torch.rand((1, 1), generator=g, dtype=torch.float64) for g in generator])
    else:
        u = torch.rand((probs.shape[0], 1), generator=generator, dtype=torch.float64)
    u = u.to(cdf.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).clamp_(max=probs.shape[-1] - 1).squeeze(-1)
