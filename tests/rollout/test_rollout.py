"""Rollout invariants on a real (tiny, random) transformers model.

A random model rarely writes a valid call, so most actions get an error observation: that still
exercises every observation and glue span, which is what the mask invariants are about.
"""

from __future__ import annotations

import pytest
import torch

from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import RolloutConfig
from agent_r1.trajectory import collate
from tests.rollout_helpers import EchoSearch, RecordingEngine, make_env_factory

SAMPLES = [
    {"id": "q1", "question": "Where was Karivo born?", "answers": ["Telumas"]},
    {"id": "q2", "question": "In which country was Bamena born?", "answers": ["Orvania"]},
]


def _rollout(tiny_model, fmt="tag", cfg=None, tool=None, reward=None, seed=0):
    model, tok = tiny_model
    engine = RecordingEngine(model, tok)
    cfg = cfg or RolloutConfig(max_turns=3, max_tokens_per_turn=12, max_observation_tokens=20,
                               max_total_tokens=400, n_samples=2)
    trajs = run_rollout(engine, ChatCodec(tok), make_env_factory(fmt, tool, reward), SAMPLES, cfg,
                        reward or RewardConfig(), seed=seed)
    return engine, trajs


@pytest.mark.parametrize("fmt", ["tag", "hermes"])
def test_trained_tokens_equal_sampled_tokens(tiny_model, fmt):
    engine, trajs = _rollout(tiny_model, fmt)
    _, tok = tiny_model
    batch = collate(trajs, tok.pad_token_id)
    trained = [batch["input_ids"][i][batch["action_mask"][i].bool()].tolist() for i in range(len(trajs))]
    per_traj = [[i for t in tr.turns for i in t.action_ids] for tr in trajs]
    assert trained == per_traj
    # every sampled sequence the engine returned appears, in order, in exactly one trajectory
    flat_sampled = sorted(map(tuple, engine.sampled))
    flat_turns = sorted(tuple(t.action_ids) for tr in trajs for t in tr.turns)
    assert flat_sampled == flat_turns
    assert sum(len(s) for s in engine.sampled) == int(batch["action_mask"].sum())


@pytest.mark.parametrize("fmt", ["tag", "hermes"])
def test_mask_zero_on_prompt_observation_and_glue(tiny_model, fmt):
    _, trajs = _rollout(tiny_model, fmt)
    _, tok = tiny_model
    multi_turn = [t for t in trajs if len(t.turns) > 1]
    assert multi_turn, "expected error observations to continue the episode"
    im_start = tok.convert_tokens_to_ids("<|im_start|>")
    for traj in trajs:
        ids, mask = traj.token_ids, traj.action_mask
        assert len(ids) == len(mask)
        assert not any(mask[: len(traj.prompt_ids)])
        pos = len(traj.prompt_ids)
        for turn in traj.turns:
            assert mask[pos: pos + len(turn.action_ids)] == [1] * len(turn.action_ids)
            pos += len(turn.action_ids)
            assert mask[pos: pos + len(turn.observation_ids)] == [0] * len(turn.observation_ids)
            pos += len(turn.observation_ids)
        if fmt == "hermes":
            # role headers of the observation turns are glue, never trained on
            headers = [i for i, t in enumerate(ids) if t == im_start and i >= len(traj.prompt_ids)]
            sampled_headers = {i for i in headers if mask[i]}
            glue_headers = [i for i in headers if not mask[i]]
            assert len(glue_headers) >= 2 * (len(traj.turns) - 1) - len(sampled_headers)
    if fmt == "hermes":
        obs = next(t for tr in multi_turn for t in tr.turns if t.observation_ids)
        text = tok.decode(obs.observation_ids)
        assert "<|im_start|>user" in text and text.endswith("<|im_start|>assistant\n")


def test_outcome_reward_never_sees_tool_output(tiny_model):
    # the tool hands the gold answer to the model; a model that does not write it scores 0
    reward = RewardConfig(metric="substring")
    _, trajs = _rollout(tiny_model, "tag", tool=EchoSearch("Telumas Orvania"), reward=reward)
    for traj in trajs:
        own_text = " ".join(t.action_text for t in traj.turns)
        if "Telumas" not in own_text and "Orvania" not in own_text:
            assert traj.outcome_reward == 0.0


def test_reward_from_model_answer_only():
    from agent_r1.rewards.scoring import outcome_reward

    cfg = RewardConfig(metric="em", format_penalty=-0.5)
    assert outcome_reward("Telumas", ["Telumas"], cfg) == 1.0
    assert outcome_reward(None, ["Telumas"], cfg) == -0.5


def test_budget_max_turns_recorded(tiny_model):
    cfg = RolloutConfig(max_turns=2, max_tokens_per_turn=6, max_observation_tokens=10, max_total_tokens=1000)
    _, trajs = _rollout(tiny_model, "tag", cfg)
    for traj in trajs:
        assert traj.stop_reason in {"answer", "max_turns"}
        assert len(traj.turns) <= 2
    assert any(t.stop_reason == "max_turns" for t in trajs)
    assert any(turn.truncated for t in trajs for turn in t.turns)  # 6 tokens rarely reach a stop


def test_budget_max_total_tokens_holds(tiny_model):
    _, tok = tiny_model
    probe = RolloutConfig(max_turns=1, max_tokens_per_turn=1)
    lengths = [len(t.prompt_ids) for t in _rollout(tiny_model, "hermes", probe)[1]]
    budget = max(lengths) + 60
    cfg = RolloutConfig(max_turns=10, max_tokens_per_turn=16, max_observation_tokens=30, max_total_tokens=budget)
    _, trajs = _rollout(tiny_model, "hermes", cfg)
    for traj in trajs:
        assert len(traj.token_ids) <= budget
    assert any(t.stop_reason == "max_total_tokens" for t in trajs)
    # a prompt longer than the whole budget ends at once, with the reason recorded
    tight = RolloutConfig(max_turns=2, max_total_tokens=min(lengths))
    _, trajs = _rollout(tiny_model, "hermes", tight)
    assert all(t.stop_reason == "prompt_too_long" and not t.turns for t in trajs)


def test_budget_observation_tokens_truncated(tiny_model):
    cfg = RolloutConfig(max_turns=3, max_tokens_per_turn=8, max_observation_tokens=5, max_total_tokens=1000)
    huge = EchoSearch("word " * 5000)
    model, tok = tiny_model
    from agent_r1.envs.tool_env import ToolEnv

    # drive the env with a well-formed action so the huge tool output is produced for sure
    env = make_env_factory("tag", huge)(SAMPLES[0])
    env.reset(SAMPLES[0])
    step = env.step("<search>Karivo</search>")
    assert isinstance(env, ToolEnv) and len(step.observation) > 20000 - 100
    ids, truncated = ChatCodec(tok).observation_ids(step.observation, True, [], 5)
    assert truncated and len(ids) == 5
    _, trajs = _rollout(tiny_model, "tag", cfg, tool=huge)
    for traj in trajs:
        for turn in traj.turns:
            assert len(turn.observation_ids) <= 5


def test_rollout_is_reproducible_with_seed(tiny_model):
    _, a = _rollout(tiny_model, "tag", seed=3)
    _, b = _rollout(tiny_model, "tag", seed=3)
    assert [t.token_ids for t in a] == [t.token_ids for t in b]


def test_engine_logprobs_match_model_forward(tiny_model):
    """Sampled log-probs (temperature 1) equal a fresh forward pass over the full sequence."""
    model, tok = tiny_model
    _, trajs = _rollout(tiny_model, "hermes")
    batch = collate(trajs, tok.pad_token_id)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"].long()).logits
    logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, batch["input_ids"][:, 1:, None]).squeeze(-1)
    mask = batch["action_mask"][:, 1:].bool()
    assert torch.allclose(logp[mask], batch["sampled_logprobs"][:, 1:][mask], atol=1e-4)


QWEN_STYLE_TOOL_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' %}"
    "{% if loop.index0 == 0 or messages[loop.index0 - 1]['role'] != 'tool' %}{{ '<|im_start|>user' }}{% endif %}"
    "{{ '\\n<tool_response>\\n' }}{{ message['content'] }}{{ '\\n</tool_response>' }}"
    "{% if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_template_that_wraps_tool_responses_is_not_doubled(tiny_model):
    """With a Qwen2.5-style template (it wraps tool messages itself) the glue comes from it."""
    import copy

    _, tok = tiny_model
    tok = copy.deepcopy(tok)
    tok.chat_template = QWEN_STYLE_TOOL_TEMPLATE
    codec = ChatCodec(tok)
    assert codec.template_wraps_tool
    obs = "<tool_response>\nDoc 1 (A): a\n</tool_response>\n<tool_response>\nDoc 1 (B): b\n</tool_response>"
    ids, _ = codec.observation_ids(obs, False, [], 200)
    text = tok.decode(ids)
    assert text.count("<tool_response>") == 2 and text.count("</tool_response>") == 2
    assert text.startswith("<|im_end|>\n<|im_start|>user\n<tool_response>\nDoc 1 (A)")
    assert text.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_engine_stops_on_multi_token_stop_strings(tiny_model):
    from agent_r1.rollout.engine import SamplingParams, TransformersEngine

    model, tok = tiny_model
    engine = TransformersEngine(model, tok)
    prompt = ChatCodec(tok).prompt_ids([{"role": "user", "content": "Where was Karivo born?"}])
    outs = engine.generate([prompt] * 8, SamplingParams(max_new_tokens=20, stop_strings=("a",), seed=0))
    stopped = [o for o in outs if o.finish_reason == "stop"]
    assert stopped, "a one-letter stop string should end some samples"
    for o in outs:
        assert "a" not in tok.decode(o.token_ids[:-1])  # never generated past a stop
        assert (o.finish_reason == "stop") == ("a" in tok.decode(o.token_ids))
        assert len(o.token_ids) == len(o.logprobs) <= 20
