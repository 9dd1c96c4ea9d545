"""A policy's weights as a plain transformers model names them: what an engine holding its own copy
of the model (vLLM) loads.

A LoRA policy (a peft model) is served merged: each adapted linear layer's weight is its frozen base
weight plus the adapter's delta (`get_delta_weight`, alpha / r included), under the base model's
parameter names. The merge is computed beside the model, never in it: peft's merge_adapter /
unmerge_adapter would add and subtract the delta in the trained weights, and the subtraction does not
give back the same floats.
"""

from __future__ import annotations

from typing import Any

PEFT_PREFIX = "base_model.model."


def hf_state_dict(model: Any, dtype: Any = None) -> dict[str, Any]:
    """{HF parameter name: detached tensor} of `model`, adapters merged; cast to `dtype` if given."""
    from agent_r1.models.lora import has_adapters

    weights = _merged(model) if has_adapters(model) else {k: v.detach() for k, v in model.state_dict().items()}
    if dtype is not None:
        weights = {k: v.to(dtype) for k, v in weights.items()}
    return weights


def _merged(model: Any) -> dict[str, Any]:
    import torch
    from peft.tuners.lora import LoraLayer

    adapter = model.active_adapter
    out: dict[str, Any] = {}
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, LoraLayer) and adapter in module.lora_A:
                base = module.get_base_layer()
                key = _hf_name(name) + ".weight"
                out[key] = base.weight.detach() + module.get_delta_weight(adapter).to(base.weight.dtype)
                if getattr(base, "bias", None) is not None:
                    out[_hf_name(name) + ".bias"] = base.bias.detach()
        for name, tensor in model.state_dict().items():
            if "lora_" in name:  # adapter matrices: already folded into their layer's weight
                continue
            key = _hf_name(name.replace(".base_layer.", "."))
            out.setdefault(key, tensor.detach())
    return out


def _hf_name(peft_name: str) -> str:
    return peft_name[len(PEFT_PREFIX):] if peft_name.startswith(PEFT_PREFIX) else peft_name
