"""Hypothesis fuzz of one call's parse (issue 15.2): every exception type a parser can meet, and JSON
values of every type in every position, become that call's error observation; nothing escapes the env.

The shapes that used to escape: numbers over Python's 4,300-digit int-str limit (a plain ValueError),
the same inside an "arguments" string, a nested "arguments" string (RecursionError), non-finite numbers.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_r1.envs import formats
from agent_r1.envs.formats import get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.tools.base import ToolResult
from agent_r1.tools.runner import ToolRunner

EXCEPTIONS = [ValueError, TypeError, OverflowError, RecursionError, MemoryError, KeyError, IndexError,
              AttributeError, UnicodeDecodeError, ZeroDivisionError, AssertionError, RuntimeError, LookupError,
              ArithmeticError, NotImplementedError, json.JSONDecodeError]


class Echo:
    name = "search"
    description = "Search."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def call(self, arguments):
        return ToolResult("Doc 1 (Karivo): found.", True, {"titles": ["Karivo"]})


def _env(fmt: str) -> ToolEnv:
    env = ToolEnv(ToolRunner([Echo()], timeout_s=5.0), get_format(fmt), EnvConfig(format=fmt), RewardConfig())
    env.reset({"id": "q", "question": "Where?", "answers": ["x"]})
    return env


ENVS = {fmt: _env(fmt) for fmt in ("tag", "hermes")}


def _instance(exc_type: type) -> BaseException:
    if exc_type is UnicodeDecodeError:
        return UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    if exc_type is json.JSONDecodeError:
        return json.JSONDecodeError("Expecting value", "x", 0)
    return exc_type("injected")


@settings(max_examples=60, deadline=None)
@given(exc_type=st.sampled_from(EXCEPTIONS), fmt=st.sampled_from(["tag", "hermes"]), n=st.integers(1, 3))
def test_any_exception_from_one_call_becomes_its_error(exc_type, fmt, n):
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
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(formats, "ToolCall", exploding)
        out = ENVS[fmt].step(call * n)
    assert not out.done and out.info["tool_calls"] == n and out.info["valid_tool_calls"] == 0
    assert out.observation.count("Error") >= n and exc_type.__name__ in out.observation


_scalar = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=12))
_json_text = st.recursive(
    _scalar.map(lambda v: json.dumps(v)) | st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "9" * 4400,
                                                           "-" + "9" * 4400, "[" * 3000 + "]" * 3000]),
    lambda inner: st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
    | st.dictionaries(st.sampled_from(["query", "name", "arguments", "k"]), inner, max_size=3).map(
        lambda d: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in d.items()) + "}"),
    max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(name=_json_text | st.just('"search"'), args=_json_text, as_string=st.booleans(),
       pad=st.sampled_from(["", "\n", " \n\t"]))
def test_hermes_json_of_every_type_in_every_position(name, args, as_string, pad):
    """Names and arguments of every JSON type, huge and non-finite numbers, as objects or strings."""
    arguments = json.dumps(args) if as_string else args
    text = f"<tool_call>{pad}{{\"name\": {name}, \"arguments\": {arguments}}}{pad}</tool_call>"
    out = ENVS["hermes"].step(text)  # raises only if the env does: the test fails
    assert not out.done and out.observation
    parsed = get_format("hermes").parse(text, 4)
    for call in parsed.calls:
        if call.error is None:  # what reaches a tool is a string name and an object of finite values
            assert isinstance(call.name, str) and isinstance(call.arguments, dict)
            assert "NaN" not in json.dumps(call.arguments) and "Infinity" not in json.dumps(call.arguments)
    if out.info["valid_tool_calls"] == 0:
        assert "Error" in out.observation


@pytest.mark.parametrize("digits", [4300, 4301, 100_000])
def test_huge_integers_in_a_string_of_arguments(digits):
    text = "<tool_call>" + json.dumps({"name": "search", "arguments": '{"query": ' + "7" * digits + "}"}) + "</tool_call>"
    out = ENVS["hermes"].step(text)
    assert "Error" in out.observation and out.info["valid_tool_calls"] == 0
