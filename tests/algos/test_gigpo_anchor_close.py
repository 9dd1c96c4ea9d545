"""GiGPO's step anchor is what the environment answered, not how the action ended: after an action that
stopped on a stop string (no end-of-turn token sampled) the observation starts with the template's
closing `<|im_end|>`; after one that sampled it, it does not. The same tool result must give the same
anchor either way, in the built-in rollout (ChatCodec.observation_ids) and in agent sessions
(assemble.build_trajectories)."""

from __future__ import annotations

import copy
import pickle

import pytest

from agent_r1.agents.assemble import build_trajectories
from agent_r1.agents.records import CallRecord
from agent_r1.agents.rollout import AgentRollout
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationOutput
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import RolloutConfig
from agent_r1.trajectory import Trajectory, Turn, collate
from tests.agents import api_style_agents
from tests.rollout_helpers import RecordingEngine
from tests.rollout_helpers import make_env_factory as rollout_env_factory

CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "Karivo"}}\n</tool_call>'
RESULT = "Karivo was born in Telumas."


@pytest.fixture(scope="module", params=["chatml", "qwen2.5"])
def codec(tiny_model, request):
    tokenizer = copy.deepcopy(tiny_model[1])
    if request.param == "qwen2.5":
        tokenizer.chat_template = QWEN25_TEMPLATE
    return ChatCodec(tokenizer)


def _trajectory(codec, action, prompt):
    obs, _ = codec.observation_ids(RESULT, False, action, 1000)
    return Trajectory("q0", prompt, [Turn(action, [-1.0] * len(action), "", observation_ids=obs),
                                     Turn([9], [-1.0], "")])


def test_the_same_tool_result_is_one_anchor_after_a_stop_or_an_eos(codec):
    prompt, call = codec.encode("u"), codec.encode(CALL)
    stopped = _trajectory(codec, call, prompt)  # ended by the stop string </tool_call>
    sampled = _trajectory(codec, call + [codec.eos_token_id], prompt)  # the model wrote <|im_end|>
    assert stopped.turns[0].observation_ids[0] == codec.eos_token_id  # the template closes the turn
    assert sampled.turns[0].observation_ids[0] != codec.eos_token_id
    keys = collate([stopped, sampled], 0)["context_keys"]
    assert keys[0][1] == keys[1][1]
    assert stopped.turns[0].observation_close == 1 and sampled.turns[0].observation_close == 0
    # the sequence itself is untouched: the close is trained context, only the anchor leaves it out
    assert stopped.token_ids == prompt + call + stopped.turns[0].observation_ids + [9]
    # and the count travels with the turn (Ray workers pickle trajectories)
    assert pickle.loads(pickle.dumps(stopped)).turns[0].observation_close == 1


def test_a_different_tool_result_is_still_another_anchor(codec):
    prompt, call = codec.encode("u"), codec.encode(CALL)
    a = _trajectory(codec, call, prompt)
    obs, _ = codec.observation_ids("Bamena was born in Orvania.", False, call, 1000)
    b = Trajectory("q0", prompt, [Turn(call, [-1.0] * len(call), "", observation_ids=obs), Turn([9], [-1.0], "")])
    keys = collate([a, b], 0)["context_keys"]
    assert keys[0][1] != keys[1][1] and keys[0][0] == keys[1][0]


def test_agent_sessions_anchor_a_tool_result_alike_after_a_stop_string_or_an_eos(codec):
    eos = codec.eos_token_id
    prompt, call = codec.encode("u"), codec.encode(CALL)
    # the endpoint records a stop-string call without the end-of-turn token; the re-rendered history
    # then closes the assistant turn with it, ahead of the glue and the tool result
    glue_and_result = codec.encode("\n<|im_start|>user\n" + RESULT + "<|im_end|>\n<|im_start|>assistant\n")
    history = prompt + call + [eos] + glue_and_result
    sessions = {
        "stop": [CallRecord(prompt, call, [-1.0] * len(call), "stop", 1, 1.0),
                 CallRecord(history, [9, eos], [-1.0, -1.0], "stop", 3, 1.0)],
        "eos": [CallRecord(prompt, call + [eos], [-1.0] * (len(call) + 1), "stop", 1, 1.0),
                CallRecord(history, [9, eos], [-1.0, -1.0], "stop", 3, 1.0)],
    }
    steps = {k: build_trajectories(recs, "q0", turn_close_ids=(eos,))[0] for k, recs in sessions.items()}
    assert all(len(s) == 1 and len(s[0].turns) == 2 for s in steps.values())  # one trajectory each: no drift
    assert steps["stop"][0].turns[0].observation_close == 1 and steps["eos"][0].turns[0].observation_close == 0
    keys = collate([steps["stop"][0], steps["eos"][0]], 0)["context_keys"]
    assert keys[0][1] == keys[1][1]


class EosOrCutEngine:
    """First calls end alternately with the end-of-turn token and cut at the budget (no token closes
    them); a call after the follow-up question answers and ends with the end-of-turn token."""

    def __init__(self, codec, follow_up):
        self.codec, self.follow_up, self.first_calls = codec, follow_up, 0

    def generate(self, prompts, params):
        outs = []
        for p in prompts:
            ids = self.codec.encode("Telumas")
            if self.follow_up not in self.codec.decode(p):
                self.first_calls += 1
                if self.first_calls % 2 == 0:
                    outs.append(GenerationOutput(ids, [-1.0] * len(ids), "length"))
                    continue
            outs.append(GenerationOutput(ids + [self.codec.eos_token_id], [-1.0] * (len(ids) + 1), "stop", "<|im_end|>"))
        return outs


def test_agent_rollout_anchors_the_follow_up_alike_after_a_cut_or_an_eos_ended_call(codec):
    make_env = AgentRollout(api_style_agents.streaming_agent, concurrency=2)
    try:
        trajs = run_rollout(EosOrCutEngine(codec, api_style_agents.CHECK), codec, make_env,
                            [{"id": "q0", "question": "Where was Karivo born?", "answers": ["Telumas"]}],
                            RolloutConfig(n_samples=2, max_tokens_per_turn=16, max_total_tokens=4096),
                            RewardConfig(metric="em"))
    finally:
        make_env.close()
    assert len(trajs) == 2 and all(len(t.turns) == 2 for t in trajs)  # one trajectory per session
    assert sorted(t.turns[0].truncated for t in trajs) == [False, True]
    keys = collate(trajs, 0)["context_keys"]
    assert keys[0][1] == keys[1][1]  # the same follow-up question: one anchor


def test_the_built_in_rollout_keeps_the_codecs_count_on_its_turns(tiny_model):
    """The loop stores the codec's ids on each turn as they come: the close count reaches collate."""
    model, tok = tiny_model
    codec = ChatCodec(tok)
    trajs = run_rollout(RecordingEngine(model, tok), codec, rollout_env_factory("hermes", None, None),
                        [{"id": "q1", "question": "Where was Karivo born?", "answers": ["Telumas"]}],
                        RolloutConfig(max_turns=3, max_tokens_per_turn=12, max_observation_tokens=20,
                                      max_total_tokens=400, n_samples=4), RewardConfig(), seed=0)
    shown = [t for traj in trajs for t in traj.turns if t.observation_ids]
    assert shown  # a random model's calls fail: error observations continue the episodes
    for turn in shown:
        ended = turn.action_ids[-1] == codec.eos_token_id
        assert turn.observation_close == (0 if ended else 1)
        assert (turn.observation_ids[0] == codec.eos_token_id) == (not ended)
    assert any(t.observation_close for t in shown)
