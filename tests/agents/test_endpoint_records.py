"""What the endpoint records is what it returned: a stop string's tokens are neither returned nor
recorded (so the reply, sent back in the history, continues the same trajectory), and a call the agent
threw away and asked again is not trained on."""

from __future__ import annotations

import pytest

from agent_r1.agents.assemble import build_trajectories
from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.agents.records import CallRecord
from agent_r1.rollout.engine import GenerationOutput
from tests.agents.test_endpoint import QUESTION, TEMPERATURE, ScriptedEngine, client, policy  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


class Stopping(ScriptedEngine):
    """Writes its texts, the stop string included, and reports the stop (as vLLM's token ids do)."""

    def generate(self, prompts, params):
        self.prompts += prompts
        outs = []
        for _ in prompts:
            text = self.texts.pop(0)
            ids = self.codec.encode(text)
            stop = next((s for s in params.stop_strings if s in text), None)
            outs.append(GenerationOutput(ids, [-0.5] * len(ids), "stop", stop) if stop
                        else GenerationOutput(ids + [self.codec.eos_token_id], [-0.5] * (len(ids) + 1), "stop"))
        return outs


@pytest.mark.parametrize("stop", ["\nObservation:", "vation"])  # at a token boundary, and inside a token
def test_a_stop_strings_tokens_are_not_recorded_and_the_reply_continues_the_trajectory(policy, stop):
    _, tokenizer = policy
    engine = Stopping(tokenizer, ["Telumas.\nObservation: x", "Done."])
    with Endpoint(engine, tokenizer, EndpointConfig(temperature=TEMPERATURE, max_tokens=30)) as ep:
        session = ep.open_session()
        c = client(ep, session)
        first = c.chat.completions.create(model="policy", messages=QUESTION, stop=[stop], logprobs=True)
        reply = first.choices[0].message.content
        history = QUESTION + [{"role": "assistant", "content": reply}, {"role": "user", "content": "And then?"}]
        c.chat.completions.create(model="policy", messages=history, stop=[stop])
        records = ep.recorder.take(session)
    sampled = engine.codec.encode("Telumas.\nObservation: x")
    recorded = records[0].completion_ids
    assert recorded == sampled[:len(recorded)] and len(recorded) < len(sampled)
    assert tokenizer.decode(recorded) == reply and "Telumas.\nObservation: x".split(stop)[0].startswith(reply) and reply
    assert first.usage.completion_tokens == len(recorded) == len(records[0].completion_logprobs)
    assert "".join(t.token for t in first.choices[0].logprobs.content) == reply
    steps, stats = build_trajectories(records, "q0")
    assert stats.drift == 0 and len(steps) == 1 and len(steps[0].turns) == 2


def _call(prompt, completion):
    return CallRecord(prompt_ids=list(prompt), completion_ids=list(completion),
                      completion_logprobs=[-1.0] * len(completion), finish_reason="stop", messages=2, temperature=1.0)


P, OBS = [1, 2, 3], [7, 8]


def test_a_call_asked_again_with_the_same_prompt_is_abandoned_and_not_trained():
    # the agent rejected reply [10] and asked again; it continued from reply [11]
    records = [_call(P, [10]), _call(P, [11]), _call(P + [11] + OBS, [12])]
    steps, stats = build_trajectories(records, "q0")
    assert stats.abandoned == 1 and stats.drift == 0 and stats.calls == 3 and len(steps) == 1
    assert [t.action_ids for t in steps[0].turns] == [[11], [12]]


def test_of_calls_with_one_prompt_the_one_the_history_continues_is_kept():
    # the agent asked twice and went on with the first reply (say, a vote): the second is dropped
    records = [_call(P, [10]), _call(P, [11]), _call(P + [10] + OBS, [12])]
    steps, stats = build_trajectories(records, "q0")
    assert stats.abandoned == 1 and [t.action_ids for t in steps[0].turns] == [[10], [12]]


def test_a_retried_last_call_keeps_the_last_reply():
    steps, stats = build_trajectories([_call(P, [10]), _call(P, [11])], "q0")
    assert stats.abandoned == 1 and [[t.action_ids for t in s.turns] for s in steps] == [[[11]]]


def test_calls_with_different_prompts_are_all_kept():
    records = [_call(P, [10]), _call([1, 2, 4], [11]), _call(P + [10] + OBS, [12])]
    steps, stats = build_trajectories(records, "q0")
    assert stats.abandoned == 0 and sum(len(s.turns) for s in steps) == 3
