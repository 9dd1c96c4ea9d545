"""TransformersEngine(ignore_stops=True), the benchmarks' equal-work switch: every row samples
exactly its budget from the same distribution; the default still ends rows at stops."""

from __future__ import annotations

import pytest

from agent_r1.rollout.engine import SamplingParams, TransformersEngine

pytestmark = pytest.mark.usefixtures("one_thread")


def test_ignore_stops_samples_the_whole_budget(tiny_model):
    model, tok = tiny_model
    prompts = [tok.encode("Where was Karivo born?"), tok.encode("Who founded")]
    every_id = tuple(range(len(tok)))  # any sampled token is a stop id; "e" is in most token texts
    params = SamplingParams(max_new_tokens=[7, 5], stop_token_ids=every_id, stop_strings=("e",), seed=3)
    stopped = TransformersEngine(model, tok).generate(prompts, params)
    full = TransformersEngine(model, tok, ignore_stops=True).generate(prompts, params)
    assert [len(o.token_ids) for o in stopped] == [1, 1]
    assert all(o.finish_reason == "stop" for o in stopped)
    assert [len(o.token_ids) for o in full] == [7, 5]
    assert all(o.finish_reason == "length" and o.stop is None for o in full)
    # the same seed and distribution: the first sampled token and its log-prob agree
    for a, b in zip(stopped, full):
        assert a.token_ids[0] == b.token_ids[0]
        assert a.logprobs[0] == pytest.approx(b.logprobs[0], abs=1e-6)
