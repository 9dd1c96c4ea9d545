"""Trajectories from recorded calls: exact prefix extension continues a trajectory, anything else is a new
step sharing the outcome; and the render the endpoint relies on for an assistant turn of tool calls only."""

from __future__ import annotations

import copy

import pytest

from agent_r1.agents.assemble import assign_outcome, build_trajectories
from agent_r1.agents.records import CallRecord, Recorder, SessionError
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.rollout.chat import ChatCodec
from agent_r1.trajectory import collate


def rec(prompt, completion, finish="stop", calls=()):
    return CallRecord(list(prompt), list(completion), [-0.1 * (i + 1) for i in range(len(completion))], finish,
                      messages=1, temperature=1.0, info={"tool_calls": list(calls)})


def test_exact_extension_continues_and_the_tokens_between_are_masked():
    records = [rec([1, 2, 3], [10, 11], "tool_calls", ["search"]), rec([1, 2, 3, 10, 11, 50, 51], [12, 13]),
               rec([1, 2, 3, 10, 11, 50, 51, 12, 13, 60], [14], "length")]
    (traj,), stats = build_trajectories(records, "s1", sample={"id": "s1"})
    assert (stats.calls, stats.steps, stats.drift, stats.length_cut) == (3, 1, 0, 1)
    assert traj.token_ids == [1, 2, 3, 10, 11, 50, 51, 12, 13, 60, 14]
    assert traj.action_mask == [0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 1]
    assert traj.sampled_logprobs[3:5] == pytest.approx([-0.1, -0.2]) and traj.sampled_logprobs[5] == 0.0
    assert [t.observation_ids for t in traj.turns] == [[50, 51], [60], []]
    assert traj.turns[0].tool_calls == 1 and traj.turns[2].truncated and traj.sample == {"id": "s1"}
    batch = collate([traj], pad_token_id=0)  # the trainer's batch holds it as it would a built-in rollout
    assert batch["action_mask"][0].tolist() == [float(m) for m in traj.action_mask]


@pytest.mark.parametrize("second_prompt", [
    [1, 2, 3, 10, 99, 50],  # the sampled completion re-tokenised differently
    [1, 2, 4, 10, 11, 50],  # an earlier message edited
    [1, 2, 3, 10],  # history cut short (a summarising harness)
])
def test_a_prompt_that_does_not_extend_starts_a_new_step_sharing_the_outcome(second_prompt):
    records = [rec([1, 2, 3], [10, 11]), rec(second_prompt, [12]), rec(second_prompt + [12, 70], [13])]
    steps, stats = build_trajectories(records, "s1")
    assert (stats.calls, stats.steps, stats.drift) == (3, 2, 1)
    assert steps[0].token_ids == [1, 2, 3, 10, 11] and steps[1].prompt_ids == second_prompt
    assert len(steps[1].turns) == 2  # the call after the split continues the new step
    assert stats.metrics()["agent/drift"] == 1.0
    assign_outcome(steps, 1.0, answer="Telumas")
    # every step carries the reward at its own last trained token
    assert [s.token_rewards[-1] for s in steps] == [1.0, 1.0] and {s.answer for s in steps} == {"Telumas"}


def test_a_record_whose_ids_and_logprobs_disagree_is_refused():
    bad = CallRecord([1], [2, 3], [-0.1], "stop", 1, 1.0)
    with pytest.raises(ValueError, match="2 completion ids and 1 log-probs"):
        build_trajectories([bad], "s1")
    assert build_trajectories([], "s1")[0] == []


def test_the_recorder_hands_calls_over_once_and_refuses_unknown_sessions():
    r = Recorder()
    r.open("a")
    with pytest.raises(ValueError, match="already open"):
        r.open("a")
    r.add("a", rec([1], [2]))
    assert len(r.take("a")) == 1 and r.take("a") == []
    r.close("a")
    with pytest.raises(SessionError):
        r.add("a", rec([1], [2]))


def test_an_assistant_turn_of_tool_calls_only_renders_as_the_template_does(tiny_model):
    # the codec puts each content in a slot; an empty one must stay empty, since Qwen2.5's template
    # writes "\n" + content only for a non-empty content (a slot made it write a stray newline, and a
    # tool-call round trip through the endpoint never continued its trajectory)
    tokenizer = copy.deepcopy(tiny_model[1])
    tokenizer.chat_template = QWEN25_TEMPLATE
    messages = [{"role": "user", "content": "Where was Karivo born?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "search", "arguments": {"query": "Karivo"}}}]},
                {"role": "tool", "content": "Telumas."}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>assistant\n<tool_call>" in rendered
    assert tokenizer.decode(ChatCodec(tokenizer).prompt_ids(messages)) == rendered


def test_the_endpoint_of_a_run_samples_as_its_rollout_section_says():
    from agent_r1.agents.endpoint import EndpointConfig
    from agent_r1.sampling import RolloutConfig

    cfg = EndpointConfig.from_rollout(RolloutConfig(temperature=0.6, max_tokens_per_turn=20, max_total_tokens=300))
    assert (cfg.temperature, cfg.max_tokens, cfg.max_total_tokens, cfg.host) == (0.6, 20, 300, "127.0.0.1")
    with pytest.raises(ValueError, match="top_p"):  # a truncated distribution is not trainable
        EndpointConfig.from_rollout(RolloutConfig(top_p=0.9))
