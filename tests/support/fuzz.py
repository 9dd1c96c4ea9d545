"""Fuzz inputs and invariants shared by benchmarks/reliability.py (a fixed number of cases, counted)
and the hypothesis tests (tests/reliability/test_fuzz_rollout.py, test_fuzz_parse.py).

- Model outputs through the rollout's own path (`step_many`): `build_world` (one env per format over
  a real tantivy search and the calculator, calls counted), `fuzz_cases` (random bytes, 1 MB outputs,
  nested and unclosed tags, JSON of wrong types, thousands of calls) and `check_step` (the env never
  raises, at most MAX_CALLS calls reach a tool, the observation stays in budget and says what was
  wrong).
- One call's parse: `parse_envs()` (an echo tool), `check_exception_becomes_error` (every exception
  type a parser can meet, injected where the ToolCall is made) and `check_hermes_json` (JSON of every
  type in every position) become that call's error observation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_r1.data.corpus import make_document
from agent_r1.envs import formats
from agent_r1.envs.base import StepOutput
from agent_r1.envs.formats import get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv, step_many
from agent_r1.retrieval.base import SearchConfig, open_retriever
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.tools.base import ToolResult
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
    retriever = open_retriever(SearchConfig(backend="tantivy", index_dir=str(index_dir)))
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


# ---------------------------------------------------------------------------- one call's parse
EXCEPTIONS = [ValueError, TypeError, OverflowError, RecursionError, MemoryError, KeyError, IndexError,
              AttributeError, UnicodeDecodeError, ZeroDivisionError, AssertionError, RuntimeError, LookupError,
              ArithmeticError, NotImplementedError, json.JSONDecodeError]


class Echo:
    name = "search"
    description = "Search."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def call(self, arguments):
        return ToolResult("Doc 1 (Karivo): found.", True, {"titles": ["Karivo"]})


def parse_env(fmt: str) -> ToolEnv:
    env = ToolEnv(ToolRunner([Echo()], timeout_s=5.0), get_format(fmt), EnvConfig(format=fmt), RewardConfig())
    env.reset({"id": "q", "question": "Where?", "answers": ["x"]})
    return env


def parse_envs() -> dict[str, ToolEnv]:
    """One echo env per format; they fork tool workers: close each `env.runner` when done."""
    return {fmt: parse_env(fmt) for fmt in ("tag", "hermes")}


def _instance(exc_type: type) -> BaseException:
    if exc_type is UnicodeDecodeError:
        return UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    if exc_type is json.JSONDecodeError:
        return json.JSONDecodeError("Expecting value", "x", 0)
    return exc_type("injected")


def check_exception_becomes_error(envs: dict[str, ToolEnv], exc_type: type, fmt: str, n: int) -> None:
    """Building a parsed call raises `exc_type` (injected where the real ToolCall is made, in both
    formats): each call gets an error, the step says so, nothing escapes."""
    real = formats.ToolCall
    raised = _instance(exc_type)

    def exploding(name, arguments, error=None):
        if error is None:
            raise raised
        return real(name, arguments, error)

    call = '<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>' if fmt == "hermes" \
        else "<search>a</search>"
    formats.ToolCall = exploding
    try:
        out = envs[fmt].step(call * n)
    finally:
        formats.ToolCall = real
    assert not out.done and out.info["tool_calls"] == n and out.info["valid_tool_calls"] == 0
    assert out.observation.count("Error") >= n and exc_type.__name__ in out.observation


def check_hermes_json(envs: dict[str, ToolEnv], name: str, args: str, as_string: bool, pad: str) -> None:
    """Names and arguments of every JSON type, huge and non-finite numbers, as objects or strings."""
    arguments = json.dumps(args) if as_string else args
    text = f"<tool_call>{pad}{{\"name\": {name}, \"arguments\": {arguments}}}{pad}</tool_call>"
    out = envs["hermes"].step(text)  # raises only if the env does: the check fails
    assert not out.done and out.observation
    parsed = get_format("hermes").parse(text, 4)
    for call in parsed.calls:
        if call.error is None:  # what reaches a tool is a string name and an object of finite values
            assert isinstance(call.name, str) and isinstance(call.arguments, dict)
            assert "NaN" not in json.dumps(call.arguments) and "Infinity" not in json.dumps(call.arguments)
    if out.info["valid_tool_calls"] == 0:
        assert "Error" in out.observation
