"""The engine's preallocated KV buffers (BufferLayer) hold exactly what concatenation would:
layer operations match a DynamicLayer, and generation is bit-for-bit the same with and without them
(rows dropped as they finish, prefixes reused across calls)."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicLayer

from agent_r1.rollout import engine as engine_mod
from agent_r1.rollout.engine import SamplingParams, TransformersEngine, buffer_layer_class

pytestmark = pytest.mark.usefixtures("one_thread")


def test_buffer_layer_matches_concatenation():
    g = torch.Generator().manual_seed(0)
    kv = lambda b, n: (torch.randn(b, 2, n, 4, generator=g), torch.randn(b, 2, n, 4, generator=g))  # noqa: E731
    k0, v0 = kv(5, 3)
    plain = DynamicLayer()
    plain.update(k0, v0)
    buf = buffer_layer_class().holding(k0, v0, capacity=4)  # room for 1 more: the second update must grow
    for b, n in ((5, 1), (5, 2)):
        k, v = kv(b, n)
        for layer in (plain, buf):
            out = layer.update(k, v)
        assert all(torch.equal(a, c) for a, c in zip(out, (plain.keys, plain.values)))
    keep = torch.tensor([0, 2, 4])
    plain.batch_select_indices(keep)
    buf.batch_select_indices(keep)
    k, v = kv(3, 1)
    plain.update(k, v)
    buf.update(k, v)
    assert buf.get_seq_length() == plain.get_seq_length() == 7
    assert torch.equal(buf.keys, plain.keys) and torch.equal(buf.values, plain.values)


@pytest.mark.parametrize("budgets", [[9] * 6, [1, 4, 9, 2, 7, 5]])
def test_generation_is_identical_without_buffers(tiny_model, monkeypatch, budgets):
    model, tok = tiny_model
    texts = ["Where was Karivo born?", "Who founded", "The city of", "Bamena", "A river flows", "In the year"]
    prompts = [tok.encode(t) for t in texts]
    params = SamplingParams(max_new_tokens=budgets, seed=7)

    def two_calls():  # the second call extends each row's first prompt + output: prefix reuse
        eng = TransformersEngine(model, tok)
        keys = list(range(len(prompts)))
        first = eng.generate(prompts, params, prefix_keys=keys)
        longer = [p + o.token_ids + tok.encode(" then") for p, o in zip(prompts, first)]
        second = eng.generate(longer, params, prefix_keys=keys)
        assert eng.stats["encoded_prompt_tokens"] < eng.stats["prompt_tokens"]  # the prefixes were reused
        return first + second

    with_buffers = two_calls()
    monkeypatch.setattr(engine_mod, "use_buffers", lambda cache, capacity: True)  # concatenation only
    without = two_calls()
    assert [o.token_ids for o in with_buffers] == [o.token_ids for o in without]
    assert [o.logprobs for o in with_buffers] == [o.logprobs for o in without]
    assert [len(o.token_ids) for o in with_buffers[:6]] == budgets  # no stops given: every budget used
