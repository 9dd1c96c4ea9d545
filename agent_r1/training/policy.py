"""Forward passes the trainer needs: per-token log-probs and entropy, and a critic.

Alignment: position t of every output describes token t (predicted from the logits at t-1);
position 0 is 0. This matches `collate`, so one action mask serves every term.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from agent_r1.algos import entropy_from_logits


def token_logprobs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, with_entropy: bool = False,
    entropy_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """input_ids, attention_mask `[B, T]` -> (log-probs `[B, T]`, entropy `[B, T]` or None).

    `entropy_grad=False` computes the entropy as a metric only (no autograd graph over the
    vocabulary-wide softmax it needs), for losses without an entropy bonus.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask.long()).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    pad = torch.zeros_like(logp[:, :1])
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = torch.cat([pad, entropy_from_logits(logits)], dim=1)
    return torch.cat([pad, logp], dim=1), entropy


class ValueModel(nn.Module):
    """A critic: the policy's transformer body (a copy) with a scalar head per token.

    The value at position t estimates the return from the state after token t-1 (the state
    in which token t is chosen), aligned with the log-prob convention above.
    """

    def __init__(self, policy: Any):
        super().__init__()
        import copy

        self.body = copy.deepcopy(policy.model)  # the decoder stack of a *ForCausalLM
        self.head = nn.Linear(policy.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask.long()).last_hidden_state
        values = self.head(hidden).squeeze(-1)[:, :-1]
        return torch.cat([torch.zeros_like(values[:, :1]), values], dim=1)
