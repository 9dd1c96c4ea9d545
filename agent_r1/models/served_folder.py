"""The model folder an engine with its own copy of the weights (vLLM) starts from: a plain
transformers folder of the policy as it is served.

A LoRA policy is written merged under the base model's config (saving the peft model itself would
write only the adapter, with no config.json, and vLLM could not start); the config declares the dtype
the run serves in (bf16 runs serve bfloat16), and the weights are stored in it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_model_folder(model: Any, tokenizer: Any, folder: Path, dtype: str) -> Path:
    """Writes config (declaring `dtype`), weights (HF names, in `dtype`, adapters merged), generation
    config and tokenizer of `model` into `folder`."""
    import torch
    from safetensors.torch import save_file

    from agent_r1.models.hf_weights import hf_state_dict
    from agent_r1.models.lora import has_adapters

    base = model.get_base_model() if has_adapters(model) else model
    weights = hf_state_dict(model, dtype=getattr(torch, dtype))
    base.config.save_pretrained(folder)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config["dtype"] = config["torch_dtype"] = dtype  # vLLM's dtype "auto" reads it; transformers 5 writes `dtype`
    config_path.write_text(json.dumps(config, indent=2))
    if getattr(base, "generation_config", None) is not None:
        base.generation_config.save_pretrained(folder)
    # tied embeddings: one tensor under two names (safetensors refuses shared memory); vLLM ties them
    # itself from the config
    if getattr(base.config, "tie_word_embeddings", False):
        weights.pop("lm_head.weight", None)
    save_file({k: v.detach().cpu().contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
    tokenizer.save_pretrained(folder)
    return folder
