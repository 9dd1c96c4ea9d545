"""Model-output fuzz through the rollout's own path (ToolEnv.plan -> ToolRunner -> finish, via
`step_many`, and the whole `run_rollout` loop with an engine that samples random token ids), for
both tool-call formats, with the real search (tantivy) and calculator tools.

Inputs: random bytes decoded with errors="replace" (what an engine's decode gives for invalid
UTF-8), 1 MB outputs, deeply nested and unclosed tags, JSON with wrong types, thousands of tool
calls in one turn. For each: the env never raises, at most `max_calls_per_turn` calls reach a
tool, the observation stays within the runner's size budget, and when nothing valid ran the
observation says what was wrong. tests/test_env.py holds the smaller per-failure-kind checks.

`fuzz_cases` and `check_step` are shared with benchmarks/reliability.py, which runs a fixed
number of cases and reports how many were tried.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_r1.data.corpus import make_document
from agent_r1.envs.base import StepOutput
from agent_r1.envs.formats import get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv, step_many
from agent_r1.retrieval.base import RetrievalConfig, open_retriever
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.tools.registry import create_tool
from agent_r1.tools.runner import ToolRunner

FORMATS = ("tag", "hermes")
MAX_CALLS = 4
MAX_RESULT_CHARS = 2_000
MB = 1 << 20
# what one step's observation may hold: at most MAX_CALLS clipped results plus one parse error
OBS_BUDGET = MAX_CALLS * (MAX_RESULT_CHARS + 600) + 600

DOCS = [
    ("Karivo", "Karivo is a river town famous for its glass bridges and its winter market."),
    ("Lumeno", "Lumeno is the capital of Vessa; the Lumeno observatory was built in 1821."),
    ("Orsk Tower", "The Orsk Tower stands 312 metres tall in the city of Karivo."),
    ("Vessa", "Vessa is a country of lakes. Its largest city is Lumeno."),
    ("Ada Brinn", "Ada Brinn was an engineer born in Lumeno who designed the Orsk Tower."),
]
TAG_PIECES = ["<search>", "</search>", "<calculator>", "</calculator>", "<answer>", "</answer>",
              "<tool_call>", "</tool_call>", "<information>", "<think>", "{", "}", "[", "]", '"', ":", ",",
              '"name"', '"arguments"', '"search"', '"calculator"', '"query"', '"expression"', "null", "1e999",
              "\\u0000", "\x00", "\ufffd", "Karivo", "2 ** 3", "__import__('os')", " "]


@dataclass
class CountingTool:
    """A real tool, counting how many calls reach it (to check the per-turn cap)."""

    isolate = False  # counts calls in the caller's process (an isolated tool runs in a worker)
    inner: Any
    executed: int = 0
    name: str = field(init=False)
    description: str = field(init=False)
    parameters: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.name, self.description, self.parameters = self.inner.name, self.inner.description, self.inner.parameters

    def call(self, arguments: dict[str, Any]):
        self.executed += 1
        return self.inner.call(arguments)

    def batch_call(self, arguments: list[dict[str, Any]]):
        self.executed += len(arguments)
        batch = getattr(self.inner, "batch_call", None)
        return batch(arguments) if callable(batch) else [self.inner.call(a) for a in arguments]


@dataclass
class FuzzWorld:
    """One env per format over shared real tools; `executed()` counts calls that reached a tool."""

    envs: dict[str, ToolEnv]
    tools: list[CountingTool]

    def executed(self) -> int:
        return sum(t.executed for t in self.tools)


def build_world(index_dir: Path) -> FuzzWorld:
    retriever = open_retriever(RetrievalConfig(backend="tantivy", index_dir=index_dir))
    retriever.index([make_document(t, x) for t, x in DOCS])
    tools = [CountingTool(create_tool("search", retriever=retriever, k=2)), CountingTool(create_tool("calculator"))]
    envs = {}
    for fmt in FORMATS:
        runner = ToolRunner(tools, timeout_s=30.0, max_result_chars=MAX_RESULT_CHARS)
        env = ToolEnv(runner, get_format(fmt, tools), EnvConfig(format=fmt, max_calls_per_turn=MAX_CALLS,
                                                                 tools=["search", "calculator"]), RewardConfig())
        env.reset({"id": "fuzz", "question": "Who designed the Orsk Tower?", "answers": ["Ada Brinn"],
                   "supporting_titles": ["Orsk Tower"]})
        envs[fmt] = env
    return FuzzWorld(envs, tools)


def check_step(world: FuzzWorld, fmt: str, text: str) -> StepOutput:
    """Steps the env of `fmt` on `text` the way the rollout does, asserting the invariants."""
    before = world.executed()
    out = step_many([world.envs[fmt]], [text])[0]  # raises only if the env does: the test fails
    ran = world.executed() - before
    assert ran <= MAX_CALLS, f"{ran} calls reached the tools in one turn (cap {MAX_CALLS})"
    if out.done:
        assert isinstance(out.answer, str) and out.observation is None
        return out
    obs = out.observation
    assert isinstance(obs, str) and obs, "a step that does not end the episode must say something"
    assert out.info["tool_calls"] <= MAX_CALLS
    assert len(obs) <= OBS_BUDGET, f"observation of {len(obs)} chars exceeds the budget {OBS_BUDGET}"
    if out.info["valid_tool_calls"] == 0:
        assert "Error" in obs, f"nothing ran but the observation does not say why: {obs[:200]!r}"
    return out


# ---------------------------------------------------------------------------- input generators
def _random_text(rng: random.Random, n: int) -> str:
    return rng.randbytes(n).decode("utf-8", errors="replace")


def _soup(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(TAG_PIECES) if rng.random() < 0.6 else _random_text(rng, rng.randint(1, 12))
                   for _ in range(n))


def _call(fmt: str, name: str, args: Any) -> str:
    if fmt == "hermes":
        return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"
    return f"<{name}>{args if isinstance(args, str) else json.dumps(args)}</{name}>"


WRONG_JSON = [  # hermes bodies of the wrong shape or types
    "null", "1", '"search"', "[]", '[{"name": "search"}]', "{}", '{"name": 1}', '{"name": null}',
    '{"name": ["search"]}', '{"name": {"x": 1}}', '{"name": "search", "arguments": null}',
    '{"name": "search", "arguments": []}', '{"name": "search", "arguments": 3}',
    '{"name": "search", "arguments": "not json"}', '{"name": "search", "arguments": "[1, 2]"}',
    '{"name": "search", "arguments": {"query": 3}}', '{"name": "search", "arguments": {"query": null}}',
    '{"name": "search", "arguments": {"query": ["a", "b"]}}', '{"name": "search", "arguments": {"query": {"q": 1}}}',
    '{"name": "search", "arguments": {"query": true}}', '{"name": "search", "arguments": {"query": ""}}',
    '{"name": "search", "arguments": {"query": NaN}}', '{"name": "search", "arguments": {"query": "x", "k": 99}}',
    '{"name": "search", "arguments": {"q": "Karivo"}}', '{"name": "calculator", "arguments": {"expression": 7}}',
    '{"name": "calculator", "arguments": {"expression": "__import__(\'os\').system(\'id\')"}}',
    '{"name": "search", "arguments": {"query": "' + "x" * 50_000 + '"}}',
    '{"name": "search", "arguments": {"query": ' + json.dumps(["y" * 100] * 2_000) + "}}",
    '{"name": "' + "n" * 20_000 + '", "arguments": {}}',
    '{"name": "search", "arguments": {"query": "a"}, "name": 5}', '{"name": "search" "arguments": {}}',
    '{"name": "search", "arguments": {"query": "\\ud800"}}', "\ufeff{}",
]


def fuzz_cases(seed: int, n: int, huge: bool = True) -> Iterator[tuple[str, str, str]]:
    """`n` (kind, format, text) cases, deterministically from `seed`; `huge` adds 1 MB outputs."""
    rng = random.Random(seed)
    fixed: list[tuple[str, str, str]] = []
    for fmt in FORMATS:
        depth = 20_000
        fixed += [
            ("nested", fmt, "<search>" * depth + "Karivo" + "</search>" * depth),
            ("nested", fmt, "<tool_call>" * depth + '{"name": "search"}' + "</tool_call>" * depth),
            ("nested", fmt, "<tool_call>" + "[" * depth + "]" * depth + "</tool_call>"),
            ("nested", fmt, '<tool_call>{"name": "search", "arguments": ' + '{"a": ' * depth + "1" + "}" * depth
             + "}</tool_call>"),
            ("nested", fmt, "<answer>" * depth),
            ("unclosed", fmt, "<search>Karivo"), ("unclosed", fmt, '<tool_call>{"name": "search", "arguments": {'),
            ("unclosed", fmt, "<answer>Ada Brinn"), ("unclosed", fmt, "<calculator>2 + 2"),
            ("unclosed", fmt, "</search></tool_call></answer>"),
            ("many_calls", fmt, _call(fmt, "search", {"query": "Karivo"} if fmt == "hermes" else "Karivo") * 5_000),
            ("many_calls", fmt, (_call(fmt, "calculator", {"expression": "1 + 1"} if fmt == "hermes" else "1 + 1")
                                 + _call(fmt, "nope", {})) * 2_000),
        ]
        fixed += [("wrong_json", fmt, f"<tool_call>{body}</tool_call>") for body in WRONG_JSON]
        if huge:
            fixed += [
                ("huge", fmt, _random_text(rng, MB)),
                ("huge", fmt, "x" * MB),
                ("huge", fmt, _call(fmt, "search", {"query": "Karivo " * (MB // 7)} if fmt == "hermes"
                                    else "Karivo " * (MB // 7))),
                ("huge", fmt, _call(fmt, "calculator", {"expression": "1+" * (MB // 2) + "1"} if fmt == "hermes"
                                    else "1+" * (MB // 2) + "1")),
                ("huge", fmt, "<tool_call>" + "{" * MB + "</tool_call>"),
                ("huge", fmt, "<answer>" + "a" * MB + "</answer>"),
            ]
    for case in fixed[:n]:
        yield case
    for _ in range(max(0, n - len(fixed))):
        fmt = rng.choice(FORMATS)
        kind = rng.choice(["random_bytes", "soup", "calls"])
        if kind == "random_bytes":
            yield kind, fmt, _random_text(rng, rng.randint(0, 4096))
        elif kind == "soup":
            yield kind, fmt, _soup(rng, rng.randint(1, 200))
        else:  # a run of calls with random names and argument values, some valid
            parts = []
            for _ in range(rng.randint(1, 12)):
                name = rng.choice(["search", "calculator", "nope", "", "answer"])
                value = rng.choice([_random_text(rng, rng.randint(0, 40)), "Karivo", "3 * 7", 3, None, [1], {}])
                args = {rng.choice(["query", "expression", "x"]): value}
                parts.append(_call(fmt, name, args if fmt == "hermes" else value if isinstance(value, str) else args))
            yield kind, fmt, "".join(parts)


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
    from agent_r1.rollout.loop import RolloutConfig, run_rollout

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
