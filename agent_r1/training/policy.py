"""Forward passes the trainer needs: per-token log-probs and entropy, and a critic.

Alignment: position t of every output describes token t (predicted from the logits at t-1);
position 0 is 0. This matches `collate`, so one action mask serves every term.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from agent_r1.training.compute import token_logprobs

__all__ = ["ValueModel", "has_dropout", "token_logprobs"]


def has_dropout(model: Any) -> bool:
    """Whether a forward in train mode can differ from one in eval mode: a dropout module with
    p > 0 (LoRA's `lora_dropout`, a model's own), or a model that drops out functionally (attention
    dropout read from an attribute or its config, as transformers' attention layers do)."""
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0:
            return True
        if float(getattr(m, "attention_dropout", 0.0) or 0.0) > 0:
            return True
    config = getattr(model, "config", None)
    fields = config.to_dict() if hasattr(config, "to_dict") else {}
    return any(k.endswith(("dropout", "pdrop")) and isinstance(v, (int, float)) and v > 0 for k, v in fields.items())


class ValueModel(nn.Module):
    """A critic: the policy's decoder stack (a copy) with a scalar head per token.

    The value at position t estimates the return from the state after token t-1 (the state
    in which token t is chosen), aligned with the log-prob convention above.
    """

    def __init__(self, policy: Any):
        super().__init__()
        import copy

        # A separate value model, as verl, OpenRLHF and TRL have: with LoRA, a copy of the decoder
        # whose base stays frozen and whose adapter (a copy of the policy's) trains, so the critic
        # adds one frozen base copy and no optimiser state for it. Sharing the policy's base between
        # two adapters would save that copy but makes every forward switch peft's active adapter.
        from agent_r1.models.lora import has_adapters

        self.body = copy.deepcopy(policy.get_decoder())
        if not has_adapters(policy):
            self.body.requires_grad_(True)
        # trainable, so float32 whatever the body's dtype (AdamW steps on bf16 weights lose updates);
        # the hidden states are cast to it (under bf16 autocast the matmul still runs in bf16)
        self.head = nn.Linear(policy.config.hidden_size, 1, dtype=torch.float32)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask.long()).last_hidden_state
        values = self.head(hidden.to(self.head.weight.dtype)).squeeze(-1)[:, :-1].float()
        return torch.cat([torch.zeros_like(values[:, :1]), values], dim=1)
