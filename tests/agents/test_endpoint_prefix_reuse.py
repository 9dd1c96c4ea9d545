"""Per-session prefix reuse: an agent re-sends its whole history on every call, and the endpoint's
engine (when it keeps prefixes, as TransformersEngine does) encodes only what the session added since
its last call, with the same sampled tokens and log-probs as a full prefill; a closed session's cache
is freed."""

from __future__ import annotations

import openai
import pytest
import torch

from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.rollout.engine import TransformersEngine
from tests.agents.test_endpoint import QUESTION, TEMPERATURE, policy  # noqa: F401  (the module's policy)

pytestmark = pytest.mark.usefixtures("one_thread")


class NoReuse(TransformersEngine):
    supports_prefix_reuse = False  # the same engine, every call prefilled whole


def _session(engine, tokenizer) -> tuple[list, dict]:
    """Three calls of one seeded session, each re-sending the history with the last reply in it."""
    with Endpoint(engine, tokenizer, EndpointConfig(temperature=TEMPERATURE, max_tokens=8,
                                                    max_total_tokens=400)) as ep:
        session = ep.open_session(seed=7)
        c = openai.OpenAI(base_url=ep.base_url, api_key=session, max_retries=0, timeout=60)
        messages = list(QUESTION)
        for turn in range(3):
            reply = c.chat.completions.create(model="policy", messages=messages).choices[0].message
            messages += [reply.model_dump(exclude_none=True), {"role": "user", "content": f"Go on ({turn})."}]
        records = ep.recorder.take(session)
        ep.close_session(session)
        return records, dict(engine.stats)


def test_a_sessions_later_calls_encode_only_what_it_added(policy):  # noqa: F811
    model, tokenizer = policy
    reused_engine = TransformersEngine(model, tokenizer)
    reused, stats = _session(reused_engine, tokenizer)
    full, full_stats = _session(NoReuse(model, tokenizer), tokenizer)
    assert len(reused) == len(full) == 3
    for a, b in zip(reused, full):  # the same trajectory either way
        assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids
        assert torch.allclose(torch.tensor(a.completion_logprobs), torch.tensor(b.completion_logprobs), atol=1e-5)
    assert full_stats["encoded_prompt_tokens"] == full_stats["prompt_tokens"]
    # calls 2 and 3 encoded their new messages only: the earlier ones came from the kept cache
    new_tokens = len(reused[0].prompt_ids) + sum(len(b.prompt_ids) - len(a.prompt_ids) - len(a.completion_ids) + 1
                                                 for a, b in zip(reused, reused[1:]))
    assert stats["encoded_prompt_tokens"] <= new_tokens < stats["prompt_tokens"]
    assert reused_engine._prefixes == {}  # the closed session's cache is gone
