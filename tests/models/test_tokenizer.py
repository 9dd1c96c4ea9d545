"""The locally trained tokenizers: contiguous ids, lossless round trips, and the syllable split
that keeps every invented name a sequence of shared syllable tokens."""

from __future__ import annotations

import pytest

from agent_r1.data.synthetic import SyntheticConfig, generate_world
from agent_r1.data.synthetic_names import split_name
from agent_r1.models.tokenizer import SPECIAL_TOKENS, train_tokenizer


@pytest.fixture(scope="module")
def world():
    return generate_world(SyntheticConfig(seed=0, n_people=120))


def _texts(world):
    return [d.text for d in world.documents] + [q.question for q in world.splits["train"]]


@pytest.mark.parametrize("split", ["bpe", "syllable"])
def test_round_trip_and_special_tokens(world, split):
    tok = train_tokenizer(_texts(world), vocab_size=500, split=split)
    for text in ["Where was Duba born? <search> Duba</search>", "Doc 1 (Rera): Rera is a city in Rido.\n",
                 "In 1996, x = 3 * (4 + 5)!", "naïve café 東京"]:
        assert tok.decode(tok.encode(text)) == text
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    assert ids == list(range(len(SPECIAL_TOKENS)))
    assert tok.convert_ids_to_tokens(tok.encode("<search>")) == ["<search>"]


def test_syllable_split_makes_test_names_sequences_of_train_syllable_tokens(world):
    tok = train_tokenizer(_texts(world), vocab_size=500, split="syllable")
    train_tokens = {t for q in world.splits["train"] for t in tok.tokenize(q.question)}
    test_people = {n for n, row in world.people.items() if row["split"] == "test"}
    assert test_people
    for name in test_people:
        pieces = tok.tokenize(" " + name)
        # one token per syllable, the first carrying the space marker
        assert [p.lstrip("Ġ") for p in pieces] == split_name(name), (name, pieces)
        assert set(pieces) <= train_tokens, f"{name}: {pieces} holds a token no train question has"


def test_plain_bpe_merges_across_syllables(world):
    """Why the syllable split exists: plain BPE cuts names at arbitrary places."""
    tok = train_tokenizer(_texts(world), vocab_size=500, split="bpe")
    names = [n for n, row in world.people.items() if row["split"] == "test"]
    assert any([p.lstrip("Ġ") for p in tok.tokenize(" " + n)] != split_name(n) for n in names)


def test_unknown_split_names_the_choices():
    with pytest.raises(ValueError, match="model.tokenizer='words'.*bpe.*syllable"):
        train_tokenizer(["a b c"], split="words")
