"""The kernel floor of one equal-work iteration: what any implementation must spend on this model,
this machine and this work, measured with the bare model and nothing around it.

perf_trl_equal.py times agent-r1 and TRL on the same work (completions x N tokens, the same
micro-batch and optimiser steps, fp32). This side does the same work with no framework at all, so
`floor / TRL` is the smallest ratio any framework could reach without changing the work:

- generate: one left-padded prefill, then N decode steps of `model(...)` over all rows with a KV
  cache that is written in place (agent-r1's `use_buffers`, the cheapest cache we know of here), and
  the arg-max token. No sampling, no stop checks, no per-row bookkeeping.
- update: per optimiser step, every micro-batch of `micro` rows runs the decoder, the LM head on
  the completion positions only, log-softmax, gather and one backward of a policy-gradient loss with
  random advantages; then gradient clipping and one AdamW step. No old log-probs, no ratio, no
  clipping, no metrics: the least a policy-gradient update over these tokens can compute.
"""

from __future__ import annotations

import time
from typing import Any


def floor_side(model: Any, prompt_ids: list[list[int]], group: int, tokens: int, micro: int, steps: int,
               lr: float, pad_id: int, max_grad_norm: float) -> dict[str, float]:
    """Seconds of the bare generate and update of one iteration; `model` is trained in place (the
    caller passes a fresh copy). Rows: each prompt `group` times, each completion `tokens` long."""
    import torch

    ids, attn = left_padded([p for p in prompt_ids for _ in range(group)], pad_id)
    t0 = time.perf_counter()
    full, attn = bare_decode(model, ids, attn, tokens)
    generate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    bare_update(model, full, attn, tokens, micro, steps, torch.randn(len(full)), lr, max_grad_norm)
    update_s = time.perf_counter() - t0
    return {"seconds": generate_s + update_s, "generate_s": generate_s, "update_s": update_s}


def left_padded(prompts: list[list[int]], pad_id: int) -> tuple[Any, Any]:
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):], attn[b, width - len(p):] = torch.tensor(p), 1
    return ids, attn


def bare_decode(model: Any, ids: Any, attn: Any, tokens: int) -> tuple[Any, Any]:
    """(prompt + `tokens` greedy ids, their attention mask): a prefill, then one forward per token."""
    import torch

    from agent_r1.rollout.engine import cache_keyword, use_buffers

    kw, width = cache_keyword(), ids.shape[1]
    model.eval()
    with torch.no_grad():
        step_in, cache, sampled = ids, None, []
        for i in range(tokens):
            pos = (attn.cumsum(-1) - 1).clamp(min=0)[:, -step_in.shape[1]:]
            out = model(input_ids=step_in, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1,
                        **{kw: cache})
            cache = getattr(out, kw)
            if i == 0:
                use_buffers(cache, width + tokens)
            step_in = out.logits[:, -1].argmax(-1, keepdim=True)
            sampled.append(step_in)
            attn = torch.cat([attn, torch.ones_like(step_in)], dim=1)
    return torch.cat([ids, *sampled], dim=1), attn


def bare_update(model: Any, full: Any, attn: Any, tokens: int, micro: int, steps: int, advantages: Any, lr: float,
                max_grad_norm: float) -> None:
    """`steps` AdamW steps of a policy-gradient loss on the last `tokens` ids of every row, `micro`
    rows per forward/backward, the LM head applied to the completion positions only."""
    import torch

    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        for lo in range(0, len(full), micro):
            rows = slice(lo, lo + micro)
            hidden = model.model(input_ids=full[rows], attention_mask=attn[rows],
                                 position_ids=positions[rows]).last_hidden_state
            logits = model.lm_head(hidden[:, -tokens - 1:-1])  # the positions that predict the completion
            logp = torch.log_softmax(logits.float(), -1).gather(-1, full[rows, -tokens:, None]).squeeze(-1)
            loss = -(logp.mean(-1) * advantages[rows]).sum() / len(full)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
