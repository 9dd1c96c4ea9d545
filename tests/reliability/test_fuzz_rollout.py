"""Model-output fuzz through the rollout's own path (ToolEnv.plan -> ToolRunner -> finish, via
`step_many`, and the whole `run_rollout` loop with an engine that samples random token ids), for
both tool-call formats, with the real search (tantivy) and calculator tools.

Inputs: random bytes decoded with errors="replace" (what an engine's decode gives for invalid
UTF-8), 1 MB outputs, deeply nested and unclosed tags, JSON with wrong types, thousands of tool
calls in one turn. For each: the env never raises, at most `max_calls_per_turn` calls reach a
tool, the observation stays within the runner's size budget, and when nothing valid ran the
observation says what was wrong. tests/envs/test_env.py holds the smaller per-failure-kind checks.

`fuzz_cases`, `check_step` and the world live in tests/support/fuzz.py, shared with
benchmarks/reliability.py, which runs a fixed number of cases and reports how many were tried.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_r1.envs.tool_env import ToolEnv
from agent_r1.rewards.scoring import RewardConfig
from tests.support.fuzz import (
    DOCS,
    FORMATS,
    MAX_CALLS,
    MB,
    WRONG_JSON,
    FuzzWorld,
    _call,
    _random_text,
    build_world,
    check_step,
    fuzz_cases,
)


# ---------------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def world(tmp_path_factory) -> FuzzWorld:
    return build_world(tmp_path_factory.mktemp("fuzz-index"))


def test_fixed_fuzz_cases_never_raise_and_budgets_hold(world):
    kinds: dict[str, int] = {}
    for kind, fmt, text in fuzz_cases(seed=0, n=600):
        check_step(world, fmt, text)
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds["huge"] == 12 and kinds["many_calls"] == 4 and kinds["wrong_json"] == 2 * len(WRONG_JSON)


@pytest.mark.parametrize("fmt", FORMATS)
def test_thousands_of_calls_run_at_most_the_cap(world, fmt):
    before = world.executed()
    out = check_step(world, fmt, _call(fmt, "search", {"query": "Karivo"} if fmt == "hermes" else "Karivo") * 3_000)
    assert world.executed() - before == MAX_CALLS == out.info["valid_tool_calls"]
    assert f"{3_000 - MAX_CALLS} extra call(s) ignored" in out.observation


@pytest.mark.parametrize("fmt", FORMATS)
def test_what_was_wrong_is_said(world, fmt):
    said = {
        "<search>Karivo": "unclosed <search>" if fmt == "tag" else "no action found",
        "<tool_call>{": "unclosed <tool_call>" if fmt == "hermes" else "no action found",
        _random_text(random.Random(1), 300).replace("<", ""): "no action found",
    }
    if fmt == "hermes":
        said.update({
            "<tool_call>" + "[" * 50_000 + "</tool_call>": "not valid JSON",
            '<tool_call>{"name": 3}</tool_call>': 'string "name"',
            '<tool_call>{"name": "search", "arguments": [1]}</tool_call>': '"arguments" must be a JSON object',
            '<tool_call>{"name": "search", "arguments": {"query": 3}}</tool_call>': "invalid arguments for 'search'",
            '<tool_call>{"name": "calculator", "arguments": {"expression": "__import__(\'os\')"}}</tool_call>':
                "function calls are not allowed",
        })
    else:
        said.update({"<search>   </search>": "empty search query", "<calculator>().__class__</calculator>": "Error"})
    for text, expected in said.items():
        out = check_step(world, fmt, text)
        assert expected in out.observation, (text[:60], out.observation[:300])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=3000), fmt=st.sampled_from(FORMATS),
       wrap=st.sampled_from(["", "<search>{}</search>", "<tool_call>{}</tool_call>", "<calculator>{}</calculator>",
                             '<tool_call>{{"name": "search", "arguments": {{"query": "{}"}}}}</tool_call>']))
def test_random_bytes_as_decoded_by_the_engine(world, raw, fmt, wrap):
    text = raw.decode("utf-8", errors="replace")
    check_step(world, fmt, wrap.format(text) if wrap else text)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_json | st.sampled_from(["search", "calculator"]), args=_json, as_string=st.booleans(),
       n=st.integers(1, 8))
def test_hermes_json_with_wrong_types(world, name, args, as_string, n):
    call = {"name": name, "arguments": json.dumps(args) if as_string else args}
    check_step(world, "hermes", f"<tool_call>{json.dumps(call)}</tool_call>" * n)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(["<search>", "</search>", "<calculator>", "</calculator>", "<answer>",
                                       "</answer>", "<search", "search>", "x", " ", "\n"]), max_size=40))
def test_linear_tag_scan_matches_the_regex(parts):
    """formats.tagged_spans replaced a quadratic regex; it must find exactly what the regex did."""
    import re

    from agent_r1.envs.formats import tagged_spans

    text = "".join(parts)
    assert tagged_spans(text, ["search", "calculator"]) == re.findall(
        r"<(search|calculator)>(.*?)</\1>", text, re.DOTALL)
    m = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
    assert tagged_spans(text, ["answer"], limit=1) == ([("answer", m.group(1))] if m else [])


def test_unclosed_tags_are_parsed_in_linear_time(world):
    """20,000 unclosed tags (160 kB) took ~17 s with the old regex parser."""
    import time

    for fmt in FORMATS:
        for tag in ("answer", "search", "tool_call", "calculator"):
            start = time.perf_counter()
            check_step(world, fmt, f"<{tag}>" * 20_000)
            assert time.perf_counter() - start < 2.0, (fmt, tag)


# ---------------------------------------------------------------------------- the whole rollout loop
@pytest.fixture(scope="module")
def tokenizer():
    from agent_r1.models.tokenizer import train_tokenizer

    texts = [f"{t}: {x}" for t, x in DOCS] * 4 + ["Who designed the Orsk Tower? 2 + 2 = 4"]
    return train_tokenizer(texts, vocab_size=300, min_frequency=1)


class RandomIdEngine:
    """A GenerationEngine that samples token ids uniformly, tag tokens included (a model gone wild),
    and obeys the per-prompt budget and stop ids as a real engine does."""

    def __init__(self, vocab_size: int, seed: int, tag_ids: list[int], tag_rate: float = 0.2):
        self.vocab_size = vocab_size
        self.rng = random.Random(seed)
        self.tag_ids, self.tag_rate = tag_ids, tag_rate

    def generate(self, prompts, params):
        from agent_r1.rollout.engine import GenerationOutput

        budgets = params.max_new_tokens
        if not isinstance(budgets, list):
            budgets = [budgets] * len(prompts)
        outs = []
        for budget in budgets:
            ids: list[int] = []
            reason = "length"
            for _ in range(budget):
                tag = self.rng.random() < self.tag_rate
                ids.append(self.rng.choice(self.tag_ids) if tag else self.rng.randrange(self.vocab_size))
                if ids[-1] in params.stop_token_ids:
                    reason = "stop"
                    break
            outs.append(GenerationOutput(ids, [-1.0] * len(ids), reason))
        return outs


@pytest.mark.parametrize("fmt", FORMATS)
def test_rollout_loop_with_random_token_ids_keeps_budgets(world, tokenizer, fmt):
    from agent_r1.models.tokenizer import TAG_TOKENS
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.loop import run_rollout
    from agent_r1.sampling import RolloutConfig

    codec = ChatCodec(tokenizer)
    env = world.envs[fmt]
    config = RolloutConfig(max_turns=4, max_tokens_per_turn=40, max_observation_tokens=24, max_total_tokens=1200,
                           n_samples=8)
    glue = len(codec.encode(codec.glue_before)) + len(codec.encode(codec.glue_after))
    make_env = lambda sample: ToolEnv(env.runner, env.fmt, env.config, env.reward_config)  # noqa: E731
    samples = [{"id": f"s{i}", "question": "Who designed the Orsk Tower?", "answers": ["Ada Brinn"]} for i in range(4)]
    tag_ids = [tokenizer.convert_tokens_to_ids(t) for t in TAG_TOKENS]
    trajs = run_rollout(RandomIdEngine(len(tokenizer), 7, tag_ids), codec, make_env, samples, config, RewardConfig(),
                        seed=0)
    assert len(trajs) == 32
    for traj in trajs:
        assert len(traj.token_ids) <= config.max_total_tokens
        assert 1 <= len(traj.turns) <= config.max_turns
        assert traj.stop_reason in ("answer", "max_turns", "max_total_tokens")
        for turn in traj.turns:
            assert len(turn.action_ids) <= config.max_tokens_per_turn
            assert turn.tool_calls <= MAX_CALLS
            assert len(turn.observation_ids) <= config.max_observation_tokens + (0 if fmt == "tag" else glue)
    assert sum(turn.tool_calls for traj in trajs for turn in traj.turns) > 0  # calls were made, and capped
    assert any(traj.stop_reason == "answer" for traj in trajs)


@pytest.mark.parametrize("inline", [True, False])
def test_observation_ids_of_huge_observations_respect_max_tokens(tokenizer, inline):
    from agent_r1.rollout.chat import ChatCodec

    codec = ChatCodec(tokenizer)
    glue = 0 if inline else len(codec.encode(codec.glue_before)) + len(codec.encode(codec.glue_after))
    rng = random.Random(3)
    observations = ["Doc 1 (Karivo): " + "glass bridges " * (MB // 14),  # 1 MB
                    _random_text(rng, MB // 8),  # random bytes as decoded, replacement characters included
                    "<tool_response>\n" + "\ufffd" * 50_000 + "\n</tool_response>", "short", ""]
    for observation in observations:
        n_tokens = len(codec.encode(observation))
        for max_tokens in (1, 96):
            ids, truncated = codec.observation_ids(observation, inline, [codec.eos_token_id], max_tokens)
            assert len(ids) <= max_tokens + glue
            assert all(0 <= i < len(tokenizer) for i in ids)
            if inline:
                assert truncated == (n_tokens > max_tokens)
        if len(observation) > 1000:
            assert truncated
