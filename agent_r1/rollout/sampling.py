"""Next-token sampling with temperature / top-k / top-p; returns ids and their log-probs."""

from __future__ import annotations

from typing import Any

import torch


def sample_next(logits: torch.Tensor, params: Any, generator: torch.Generator | None = None):
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
    tokens = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)
