"""LoRA through peft: the `model.lora` config, adapters on a policy, the reference policy as the
same weights with the adapters switched off, adapter checkpoints and a merged export. Loading an
adapter folder is `models/build.py`'s `load_model`, which loads the base first.

The reference is the base with adapters disabled (as TRL and verl do with `ref_in_actor`), so a
LoRA run holds one copy of the base weights. An adapter folder is what `save_pretrained` writes
for a peft model (adapter_config.json + adapter weights) plus the tokenizer; its
`base_model_name_or_path` names the base folder or hub id it loads on top of.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LoraConfig:
    """`model.lora`: r = 0 trains every weight (full fine-tuning); r > 0 trains adapters only."""
    r: int = 0
    alpha: float = 16.0  # the update is scaled by alpha / r
    dropout: float = 0.0
    target_modules: tuple[str, ...] = DEFAULT_TARGETS  # names of linear layers (the last part of the path)

    def __post_init__(self) -> None:
        if self.r < 0:  # alpha and dropout are checked with the config (schema.LIMITS)
            raise ValueError(f"model.lora.r={self.r} must be >= 0 (0 = full fine-tuning)")
        if self.r > 0 and not self.target_modules:
            raise ValueError("model.lora.target_modules is empty; name the linear layers to adapt, "
                             f"e.g. {list(DEFAULT_TARGETS)}")

    @property
    def enabled(self) -> bool:
        return self.r > 0


def linear_layer_names(model: Any) -> list[str]:
    """The distinct last path components of the model's linear layers (what target_modules names)."""
    import torch

    return sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules()
                   if name and isinstance(m, torch.nn.Linear)})


def apply_lora(model: Any, cfg: LoraConfig, base: str | Path | None = None) -> Any:
    """`model` with trainable LoRA adapters on `cfg.target_modules` and every base weight frozen;
    unchanged when `cfg.r` is 0. `base` (a folder or hub id) is recorded in the adapter config so
    an adapter checkpoint knows what to load under it; default: where the model was loaded from."""
    if not cfg.enabled:
        return model
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    names = linear_layer_names(model)
    missing = [t for t in cfg.target_modules if t not in names]
    if missing:
        raise ValueError(f"model.lora.target_modules: {type(model).__name__} has no linear layer named "
                         f"{missing}; its linear layers are {names}")
    peft_cfg = PeftLoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                              target_modules=list(cfg.target_modules), bias="none", task_type="CAUSAL_LM")
    wrapped = get_peft_model(model, peft_cfg)
    if base is not None:
        set_adapter_base(wrapped, base)
    return wrapped


def has_adapters(model: Any) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


@contextmanager
def reference_context(model: Any) -> Iterator[Any]:
    """Inside, `model` computes the reference policy: the base weights, adapters off."""
    if not has_adapters(model):
        # a silent no-op would make the trained policy its own reference (KL always 0)
        raise TypeError(f"reference_context needs a model with LoRA adapters (model.lora.r > 0), got "
                        f"{type(model).__name__}; with full fine-tuning the reference is a separate copy")
    with model.disable_adapter():
        yield model


def set_adapter_base(model: Any, base: str | Path) -> None:
    """Records the base an adapter loads on; a local folder is stored as an absolute path."""
    path = Path(base)
    model.peft_config[model.active_adapter].base_model_name_or_path = (
        str(path.resolve()) if path.exists() else str(base))


def save_adapter(model: Any, tokenizer: Any, out_dir: str | Path) -> Path:
    """Writes the adapter weights, its config (naming the base) and the tokenizer."""
    if not has_adapters(model):
        raise TypeError(f"save_adapter needs a model with LoRA adapters, got {type(model).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def is_adapter_folder(path: str | Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(path: str | Path) -> str:
    return json.loads((Path(path) / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path") or ""


def merged(model: Any) -> Any:
    """A plain transformers model with the adapters folded into the base weights."""
    return model.merge_and_unload() if has_adapters(model) else model
