"""Hypothesis fuzz of one call's parse: every exception type a parser can meet, and JSON
values of every type in every position, become that call's error observation; nothing escapes the env.

The shapes that used to escape: numbers over Python's 4,300-digit int-str limit (a plain ValueError),
the same inside an "arguments" string, a nested "arguments" string (RecursionError), non-finite numbers.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fuzz import EXCEPTIONS, check_exception_becomes_error, check_hermes_json, parse_envs

ENVS = parse_envs()


@settings(max_examples=60, deadline=None)
@given(exc_type=st.sampled_from(EXCEPTIONS), fmt=st.sampled_from(["tag", "hermes"]), n=st.integers(1, 3))
def test_any_exception_from_one_call_becomes_its_error(exc_type, fmt, n):
    """Building a parsed call raises `exc_type` (injected where the real ToolCall is made, in both
    formats): each call gets an error, the step says so, nothing escapes."""
    check_exception_becomes_error(ENVS, exc_type, fmt, n)


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
    check_hermes_json(ENVS, name, args, as_string, pad)


@pytest.mark.parametrize("digits", [4300, 4301, 100_000])
def test_huge_integers_in_a_string_of_arguments(digits):
    text = "<tool_call>" + json.dumps({"name": "search", "arguments": '{"query": ' + "7" * digits + "}"}) + "</tool_call>"
    out = ENVS["hermes"].step(text)
    assert "Error" in out.observation and out.info["valid_tool_calls"] == 0
