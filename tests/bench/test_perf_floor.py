"""benchmarks/perf_trl.py's floor does the work it claims: its bare decode yields the engine's greedy
tokens (padding, positions and the in-place cache are right), and its update trains the model."""

from __future__ import annotations

import copy

import pytest

from benchmarks import perf_trl

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def floor():
    return perf_trl


def _prompts(tok):
    texts = ["Where was Ada born?", "Which city is the capital of a country with a long name?", "Hi"]
    return [tok(t)["input_ids"] for t in texts]


def test_bare_decode_matches_the_engines_greedy_tokens(floor, tiny_model):
    from agent_r1.rollout.engine import SamplingParams, TransformersEngine

    model, tok = tiny_model
    prompts = _prompts(tok)
    ids, attn = floor.left_padded(prompts, tok.pad_token_id)
    full, mask = floor.bare_decode(model, ids, attn, 12)
    engine = TransformersEngine(model, tok, ignore_stops=True)
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=12, temperature=0.0))
    assert full.shape == (3, ids.shape[1] + 12) and int(mask.sum()) == sum(map(len, prompts)) + 3 * 12
    assert [row[-12:].tolist() for row in full] == [o.token_ids for o in outs]


def test_floor_side_trains_and_times_both_phases(floor, tiny_model):
    import torch

    model, tok = tiny_model
    fresh = copy.deepcopy(model)
    before = [p.detach().clone() for p in fresh.parameters()]
    torch.manual_seed(0)
    out = floor.floor_side(fresh, _prompts(tok), group=2, tokens=6, micro=4, steps=2, lr=1e-2,
                           pad_id=tok.pad_token_id, max_grad_norm=1.0)
    assert out["generate_s"] > 0 and out["update_s"] > 0
    assert out["seconds"] == pytest.approx(out["generate_s"] + out["update_s"])
    assert any(not torch.equal(a, b) for a, b in zip(before, fresh.parameters()))
