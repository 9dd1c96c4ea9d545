"""The trainer's forward passes and where their tensors live: device, precision (bf16 autocast),
micro-batches, memory-bounded per-token log-probs over large vocabularies, and the critic.

Alignment: position t of every output describes token t (predicted from the logits at t-1);
position 0 is 0. This matches `collate`, so one action mask serves every term.

The trainer calls this module and nothing else for these concerns, so the RL code reads the same
on a laptop CPU and on a GPU.

Log-probs: a `[rows, tokens, vocab]` float32 logits tensor for Qwen2.5's 151,936-token vocabulary
is 40 GB at 64 x 1,024 tokens. `token_logprobs` runs the decoder once, then applies the output
head to `chunk` positions at a time, only at the positions asked for (the action tokens), takes
`logit[token] - logsumexp(logits)` in float32, and under autograd recomputes each chunk's logits
in backward (activation checkpointing of the head) so only the hidden states are kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from agent_r1.config import PRECISIONS  # the names the config accepts (defined there, checked here too)
from agent_r1.precision import resolve_precision


def resolve_device(name: str) -> torch.device:
    """`train.device`: auto | cpu | cuda | cuda:N (auto = CUDA when visible)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise ValueError(f"train.device={name!r} but no CUDA device is visible to torch "
                             f"(torch {torch.__version__}); set train.device: cpu or auto")
        index = int(name[5:]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"train.device={name!r} but only {torch.cuda.device_count()} CUDA device(s) are visible")
        return torch.device(name)
    raise ValueError(f"train.device={name!r}; choose auto, cpu, cuda or cuda:N")


@dataclass
class Compute:
    """The run's device and precision; `micro_batch_size` rows go through one forward/backward."""

    device: torch.device
    precision: str = "fp32"  # resolved: fp32 | bf16 (`train.precision: auto` is resolved in from_config)
    micro_batch_size: int = 0  # 0 = the whole mini-batch at once
    temperature: float = 1.0  # the sampling temperature every trainer log-prob divides by
    logit_chunk: int = 1024  # positions per output-head chunk

    @classmethod
    def from_config(cls, cfg: Any) -> Compute:
        t = cfg.train
        if t.precision not in PRECISIONS:
            raise ValueError(f"train.precision={t.precision!r}; choose one of {list(PRECISIONS)}")
        device = resolve_device(t.device)
        return cls(device=device, precision=resolve_precision(t.precision, device), micro_batch_size=t.micro_batch_size,
                   temperature=logprob_temperature(cfg.rollout.temperature), logit_chunk=t.logit_chunk)

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 compute over float32 master weights (CPU and CUDA); a no-op in fp32."""
        if self.precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def to_device(self, mb: dict[str, Any]) -> dict[str, Any]:
        return {k: v.to(self.device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in mb.items()}

    def micro_batches(self, batch: dict[str, Any],
                      rows: torch.Tensor | None = None) -> Iterator[tuple[torch.Tensor, dict[str, Any]]]:
        """(row indices, micro-batch): the 2-D tensors of `batch` (rows `rows`, default all),
        `micro_batch_size` rows at a time, on the device and cut to their longest row (padding
        columns never reach the model)."""
        n = batch["input_ids"].shape[0]
        rows = torch.arange(n) if rows is None else rows
        if len(rows) == 0:  # every row skipped (algo.skip_zero_advantage): no micro-batch at all
            return
        size = self.micro_batch_size or len(rows)
        for start in range(0, len(rows), size):
            idx = rows[start:start + size]
            width = int(batch["attention_mask"][idx].sum(-1).max().item()) if len(idx) else 0
            width = max(width, 2)
            mb = {k: v[idx, :width] for k, v in batch.items() if isinstance(v, torch.Tensor) and v.dim() == 2}
            yield idx, self.to_device(mb)


def micro_batch_count(compute: Compute, rows: int) -> int:
    """How many micro-batches `Compute.micro_batches` yields for `rows` rows."""
    if rows == 0:
        return 0
    size = compute.micro_batch_size or rows
    return -(-rows // size)


def pad_micro_batch(compute: Compute, batch: dict[str, Any]) -> dict[str, Any]:
    """A micro-batch that trains nothing: batch row 0's first two tokens, every mask and value 0
    but one log-prob position, so a forward reaches the output head and a backward of `0 * logp`
    passes through every layer. Learner ranks with less work run these, so every rank enters the
    same FSDP collectives (an all-gather per forward, a reduce-scatter per backward)."""
    mb = {k: torch.zeros_like(v[:1, :2]) for k, v in batch.items() if isinstance(v, torch.Tensor) and v.dim() == 2}
    mb["input_ids"] = batch["input_ids"][:1, :2].clone()
    mb["attention_mask"] = torch.ones_like(mb["attention_mask"])
    mb["logp_mask"] = torch.tensor([[0.0, 1.0]], dtype=mb["attention_mask"].dtype)
    return compute.to_device(mb)


def place_policy(model: Any, compute: Compute, gradient_checkpointing: bool = False) -> Any:
    """Moves the policy to the device once; trainable weights become float32 master weights (AdamW
    steps on bf16 weights lose updates smaller than bf16's resolution: 1e-6 steps change nothing)."""
    for p in model.parameters():
        if p.requires_grad and p.dtype in (torch.bfloat16, torch.float16):
            p.data = p.data.float()
    model.to(compute.device)
    if gradient_checkpointing:
        # non-reentrant: the reentrant variant gives no gradients when the inputs need none (LoRA)
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if hasattr(model, "enable_input_require_grads"):  # frozen embeddings (LoRA) still pass gradients on
            model.enable_input_require_grads()
    return model


def master_dtype(policy: Any) -> torch.dtype:
    """The dtype the policy's trainable weights are kept in (float32 masters after `place_policy`)."""
    return next((p.dtype for p in policy.parameters() if p.requires_grad), torch.float32)


def place_frozen(model: Any, compute: Compute, dtype: torch.dtype = torch.float32) -> Any:
    """A frozen copy (the full fine-tune's KL reference) on the device, in `dtype`: the policy's
    master dtype. Both then run the same arithmetic under the same autocast, so at step 0 the KL is
    exactly 0; a bf16 copy would skip autocast's float32 norms and softmax and pull the policy
    toward a rounded model (mean |delta log-prob| 0.017 on a 12-layer Qwen2-like model). That costs
    the reference's memory twice over in bf16 runs; LoRA runs have no copy at all."""
    model.eval().requires_grad_(False)
    return model.to(device=compute.device, dtype=dtype)


def logprob_temperature(temperature: float) -> float:
    """The temperature of the distribution the engine sampled from (greedy reports T = 1)."""
    return temperature if temperature > 0 else 1.0


def _head_chunk(head: Any, hidden: torch.Tensor, targets: torch.Tensor, temperature: float,
                entropy: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs, entropy) of one chunk of positions. `entropy`: None (zeros), "grad" (in the
    graph, for an entropy bonus) or "metric" (from the same logits, outside the graph)."""
    logits = head(hidden)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets[:, None]).squeeze(-1) - lse
    if entropy is None:
        return logp, torch.zeros_like(logp)
    with torch.set_grad_enabled(entropy == "grad" and torch.is_grad_enabled()):
        p = torch.softmax(logits, dim=-1)
        return logp, lse - (p * logits).sum(-1)


def token_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0,
                   positions: torch.Tensor | None = None, with_entropy: bool = False, entropy_grad: bool = True,
                   chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor | None]:
    """input_ids, attention_mask `[B, T]` -> (log-probs `[B, T]`, entropy `[B, T]` or None), both float32.

    Position t holds the log-prob of token t under `softmax(logits[t-1] / temperature)`; position 0
    and every position outside `positions` (a 0/1 `[B, T]` mask; default: every real token) are 0.
    `entropy_grad=False` computes the entropy as a metric only (no graph over the vocabulary).
    """
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    hidden = decoder(input_ids=input_ids, attention_mask=attention_mask.long()).last_hidden_state
    want = (attention_mask if positions is None else positions)[:, 1:] > 0
    rows, cols = want.nonzero(as_tuple=True)
    h = hidden[:, :-1][rows, cols]  # [N, H]: only the positions whose log-prob is wanted
    targets = input_ids[:, 1:][rows, cols]
    grad = torch.is_grad_enabled()
    mode = ("grad" if entropy_grad else "metric") if with_entropy else None
    logps, ents = [], []
    for s in range(0, h.shape[0], chunk):
        hs, ts = h[s:s + chunk], targets[s:s + chunk]
        if grad:  # keep only the chunk's hidden states; logits are recomputed in backward
            lp, en = checkpoint(_head_chunk, head, hs, ts, temperature, mode, use_reentrant=False)
        else:
            lp, en = _head_chunk(head, hs, ts, temperature, mode)
        logps.append(lp)
        ents.append(en)
    dtype = logps[0].dtype if logps else torch.float32  # float32, or float64 for a float64 model
    out = torch.zeros(input_ids.shape, dtype=dtype, device=input_ids.device)
    flat_lp = torch.cat(logps) if logps else out.new_zeros(0)
    logp = out.index_put((rows, cols + 1), flat_lp)
    entropy = None
    if with_entropy:
        flat_en = torch.cat(ents) if ents else out.new_zeros(0)
        entropy = out.index_put((rows, cols + 1), flat_en)
    return logp, entropy


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
