"""ChatCodec encodes from several threads at once (the endpoint's HTTP threads, the rollout threads),
and a fast tokenizer keeps whether special-token text is parsed as one flag on the shared Rust
tokenizer, set per call: trusted and data encodes on the same tokenizer, even through two codecs,
must each give exactly what they give alone."""

from __future__ import annotations

import copy
import sys
import threading

import pytest

from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.rollout.chat import ChatCodec

TEXT = '<tool_call>\n{"name": "search", "arguments": {"query": "Karivo"}}\n</tool_call><|im_end|>'
ROUNDS = 1500


@pytest.fixture
def fast_switching():
    """Threads switch as often as they can, so an unguarded flag is flipped between set and use
    within a few hundred calls rather than once in a while."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_trusted_and_data_encodes_from_several_threads_equal_the_single_threaded_ones(tiny_model, fast_switching):
    tok = copy.deepcopy(tiny_model[1])
    tok.chat_template = QWEN25_TEMPLATE
    first, second = ChatCodec(tok), ChatCodec(tok)  # e.g. the engine's codec and the endpoint's
    trusted, data = first.encode(TEXT), first.encode_data(TEXT)
    assert trusted != data  # the flag matters for this text, so a flipped one shows
    wrong: list[tuple[str, list[int]]] = []

    def hammer(name, encode, want):
        for _ in range(ROUNDS):
            got = encode(TEXT)
            if got != want:
                wrong.append((name, got))

    threads = [threading.Thread(target=hammer, args=args) for args in [
        ("trusted", first.encode, trusted), ("data", first.encode_data, data),
        ("trusted, other codec", second.encode, trusted), ("data, other codec", second.encode_data, data)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, f"{len(wrong)} of {4 * ROUNDS} encodes saw the other kind's flag, e.g. {wrong[0]}"
