"""A byte-level BPE tokenizer trained locally with `tokenizers`, with the tool-format tags as
single special tokens (so generation can stop on a token id) and a ChatML chat template."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agent_r1.models.chat_template import CHATML_TEMPLATE
from agent_r1.registry import NoTraits, Registry

PAD_TOKEN = "<|endoftext|>"
BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
TAG_TOKENS = (
    "<search>", "</search>", "<information>", "</information>", "<answer>", "</answer>",
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
)
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, *TAG_TOKENS)

# Pre-tokenizers by name. BPE never merges across the pieces a pre-tokenizer cuts, so the split
# decides what a token can be.
#  - "bpe": plain byte-level BPE; frequent whole names become tokens, so an unseen name is cut into
#    rare leftover pieces ("Duba" -> "D", "uba") a tiny model has barely seen.
#  - "syllable": first cuts text into consonant-vowel chunks (an optional leading space, then
#    non-vowels, then vowels), so every invented name is a sequence of syllable tokens shared by
#    train and test names; copying an unseen name is then copying known tokens. English words
#    cost about 1.5x more tokens. Meant for small models on the synthetic world.
SYLLABLE_PATTERN = r"\s?[^aeiouAEIOU\s]*[aeiouAEIOU]+"


def _bpe_pre_tokenizer():
    from tokenizers import pre_tokenizers

    return pre_tokenizers.ByteLevel(add_prefix_space=False)


def _syllable_pre_tokenizer():
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SYLLABLE_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


#: model.tokenizer -> the pre-tokenizer (a factory) of a locally trained tokenizer
PRE_TOKENIZERS: Registry[Callable[[], Any], NoTraits] = Registry(
    "pre-tokenizer", key="model.tokenizer", where="agent_r1.models.tokenizer.PRE_TOKENIZERS")
PRE_TOKENIZERS.register("bpe", _bpe_pre_tokenizer)
PRE_TOKENIZERS.register("syllable", _syllable_pre_tokenizer)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1000, min_frequency: int = 2, split: str = "bpe"):
    """Trains a byte-level BPE on `texts` with the `split` pre-tokenizer (see PRE_TOKENIZERS);
    returns a `PreTrainedTokenizerFast`.

    Special tokens are given to the trainer only (not added afterwards), so their ids are
    0..len(SPECIAL_TOKENS)-1 and the vocabulary is contiguous; `check_contiguous` asserts it.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    PRE_TOKENIZERS.check(split)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = PRE_TOKENIZERS[split]()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        bos_token=BOS_TOKEN,
        additional_special_tokens=list(TAG_TOKENS),
    )
    fast.chat_template = CHATML_TEMPLATE
    check_contiguous(fast)
    return fast


def check_contiguous(tokenizer) -> None:
    """The model's embedding size comes from len(tokenizer); a gap in ids would overflow it."""
    ids = sorted(tokenizer.get_vocab().values())
    if ids != list(range(len(ids))) or len(tokenizer) != len(ids):
        raise ValueError(
            f"tokenizer ids are not contiguous (len={len(tokenizer)}, max id={ids[-1]}); "
            "special tokens must be passed to the trainer, not added twice"
        )
