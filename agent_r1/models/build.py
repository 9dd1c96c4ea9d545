"""Build, save and load causal LMs without a hub: a small Llama/Qwen2-style model from a
config, or any local folder / hub id through the same `load_model` call."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_r1.models.lora import ADAPTER_CONFIG, LoraConfig, adapter_base, is_adapter_folder, set_adapter_base
from agent_r1.registry import NoTraits, Registry


@dataclass
class ModelConfig:
    name_or_path: str = ""  # a local folder or hub id; empty = build a small model locally
    arch: str = "llama"  # llama | qwen2 (for locally built models)
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    max_position_embeddings: int = 1024
    vocab_size: int = 1000  # tokenizer vocabulary to train when building locally
    tokenizer: str = "bpe"  # pre-tokenizer of a locally trained tokenizer: bpe | syllable (models/tokenizer.py)
    # chat template of a locally built model (models/chat_template.py CHAT_TEMPLATES): chatml, or qwen2.5,
    # which renders an assistant message's tool_calls, so an openai_agent's re-sent history is what it sampled
    chat_template: str = "chatml"
    tie_word_embeddings: bool = True
    dtype: str = "float32"
    lora: LoraConfig = field(default_factory=LoraConfig)  # r = 0: full fine-tuning (models/lora.py)
    gradient_checkpointing: bool = False  # recompute activations in backward (non-reentrant)


#: model.arch -> the (config class, model class) names in transformers that a locally built model uses
ARCHS: Registry[tuple[str, str], NoTraits] = Registry(
    "model architecture", key="model.arch", where="agent_r1.models.build.ARCHS")
ARCHS.register("llama", ("LlamaConfig", "LlamaForCausalLM"))
ARCHS.register("qwen2", ("Qwen2Config", "Qwen2ForCausalLM"))


def build_model(config: ModelConfig, tokenizer: Any, seed: int = 0):
    """A randomly initialised causal LM sized by `config`, with vocab = len(tokenizer)."""
    import torch
    import transformers

    ARCHS.check(config.arch)
    cfg_cls, model_cls = (getattr(transformers, n) for n in ARCHS[config.arch])
    hf_config = cfg_cls(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=config.tie_word_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(seed)
    return model_cls(hf_config)


def load_model(name_or_path: str | Path, dtype: str = "float32"):
    """Loads (model, tokenizer) from a local folder or hub id; a missing folder is a clear error.
    A LoRA adapter folder (models/lora.py) loads its base, then the adapters on top, trainable."""
    if is_adapter_folder(Path(name_or_path)):
        return load_adapter_model(name_or_path, dtype=dtype)
    return _load_base(name_or_path, dtype), _load_tokenizer(name_or_path)


def _load_base(name_or_path: str | Path, dtype: str):
    import torch
    from transformers import AutoModelForCausalLM

    path = Path(name_or_path)
    if not path.exists() and (str(name_or_path).startswith((".", "/")) or path.suffix):
        raise FileNotFoundError(
            f"model folder {str(name_or_path)!r} does not exist; build one with `agent-r1 build-model "
            "--like qwen2.5 --out DIR` or set model.name_or_path to a hub id"
        )
    return AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=getattr(torch, dtype))


def _load_tokenizer(name_or_path: str | Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_adapter_model(path: str | Path, base: str | Path | None = None, dtype: str = "float32",
                       trainable: bool = True) -> tuple[Any, Any]:
    """(peft model, tokenizer) from an adapter folder (models/lora.py) over `base` (default: the one
    it records)."""
    from peft import PeftModel

    path = Path(path)
    base = str(base or adapter_base(path))
    if not base:
        raise FileNotFoundError(f"adapter folder {str(path)!r} does not name its base model "
                                f"(base_model_name_or_path in {ADAPTER_CONFIG} is empty); pass the base folder")
    if Path(base).is_absolute() and not Path(base).exists():
        raise FileNotFoundError(f"adapter folder {str(path)!r} was trained on {base!r}, which does not exist "
                                "here; pass the base model folder (e.g. `agent-r1 export --base DIR`)")
    model = _load_base(base, dtype)
    # the run's tokenizer where it was saved with the adapters, else the base's: one load either way
    # (a 151,936-token vocabulary takes seconds to load)
    tokenizer = _load_tokenizer(path if (path / "tokenizer_config.json").exists() else base)
    peft_model = PeftModel.from_pretrained(model, str(path), is_trainable=trainable)
    set_adapter_base(peft_model, base)
    return peft_model, tokenizer


def save_model(model: Any, tokenizer: Any, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_local_model(texts: list[str], config: ModelConfig, seed: int = 0):
    """Trains a tokenizer on `texts` (plus the chat and tool-format glue) and builds a model."""
    from agent_r1.models.chat_template import CHAT_TEMPLATES, template_texts
    from agent_r1.models.tokenizer import train_tokenizer

    CHAT_TEMPLATES.check(config.chat_template)
    glue = [
        "<|im_start|>system\n<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n",
        "Answer the question. To search, write <search>query</search> and read the <information> "
        "that follows. Give the final answer as <answer>answer</answer>. Doc 1 (Title): No results. Error:",
        '<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call><tool_response>\n</tool_response>',
    ] + template_texts(config.chat_template)  # the template's own prose, so its prompts stay short
    tokenizer = train_tokenizer(list(texts) + glue * 20, vocab_size=config.vocab_size, split=config.tokenizer)
    tokenizer.chat_template = CHAT_TEMPLATES[config.chat_template]
    return build_model(config, tokenizer, seed=seed), tokenizer
