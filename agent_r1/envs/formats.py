"""Tool-call formats behind one interface: how actions are parsed and observations wrapped.

- `tag`: Search-R1 style `<search>q</search>` / `<information>..</information>` /
  `<answer>..</answer>`; observations are appended inline in the assistant turn. Any tool with
  one string parameter gets its own tag (`<calculator>2 + 3</calculator>`).
- `hermes`: Qwen/Hermes `<tool_call>{"name": .., "arguments": {..}}</tool_call>`; observations
  come back as a `tool` message, wrapped by the chat template, in `<tool_response>` tags.
Both end an episode with `<answer>..</answer>`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Protocol

from agent_r1.registry import NoTraits, Registry
from agent_r1.tools.runner import ToolCall


@dataclass
class ParsedAction:
    calls: list[ToolCall] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None  # set when the text holds neither a usable call nor an answer


class Observation(str):
    """Observation text that remembers which parts are tool output (data) and which are the
    format's own wrapper (`<information>`, `<tool_response>`).

    It is a `str` so the env contract (`StepOutput.observation: str`) and every consumer stay as
    they are; the codec reads `parts` to budget each result's content on its own (the wrapper is
    never cut) and to encode data without special-token parsing.
    """

    parts: tuple[tuple[str, bool], ...]  # (text, is_data) in order; "".join(texts) == self

    def __new__(cls, parts: list[tuple[str, bool]] | tuple[tuple[str, bool], ...]) -> "Observation":
        parts = tuple((str(t), bool(d)) for t, d in parts if t)
        obj = super().__new__(cls, "".join(t for t, _ in parts))
        obj.parts = parts
        return obj

    def __getnewargs__(self) -> tuple:  # type: ignore[override]  # pickle rebuilds from the parts
        return (self.parts,)


def wrap_each(results: list[str], head: str, tail: str, sep: str = "") -> Observation:
    """`head + r + tail` for each result, joined by `sep`, as an Observation."""
    parts: list[tuple[str, bool]] = []
    for i, r in enumerate(results):
        parts += [((sep if i else "") + head, False), (r, True), (tail, False)]
    return Observation(parts)


class ToolCallFormat(Protocol):
    name: str
    stop_strings: tuple[str, ...]
    inline_observations: bool

    def parse(self, text: str, max_calls: int) -> ParsedAction: ...

    def wrap_observation(self, results: list[str]) -> str: ...

    def instructions(self, tool_names: list[str]) -> str: ...


def _extract_answer(text: str) -> str | None:
    pairs = tagged_spans(text, ["answer"], limit=1)
    return pairs[0][1].strip() if pairs else None


def tagged_spans(text: str, names: list[str], limit: int | None = None) -> list[tuple[str, str]]:
    """(name, body) of each `<name>body</name>` in order, the first close tag ending a body.

    Same result as `re.findall(r"<(a|b)>(.*?)</\\1>", text, re.DOTALL)`, but in linear time: the
    regex rescans to the end of the text from every unclosed open tag, so a model output of
    thousands of unclosed tags took seconds to minutes; here a name with no close tag left is
    dropped after one scan.
    """
    found: list[tuple[str, str]] = []
    nxt = {n: -1 for n in names}  # cached position of each name's next open tag (-1: not looked up)
    live = list(dict.fromkeys(names))
    pos = 0
    while live and (limit is None or len(found) < limit):
        for n in live:
            if nxt[n] < pos:
                nxt[n] = text.find(f"<{n}>", pos)
        live = [n for n in live if nxt[n] >= 0]
        if not live:
            break
        name = min(live, key=lambda n: nxt[n])
        start = nxt[name] + len(name) + 2
        end = text.find(f"</{name}>", start)
        if end < 0:  # unclosed, and so is every later open tag of this name
            live.remove(name)
            continue
        found.append((name, text[start:end]))
        pos = end + len(name) + 3
    return found


def _guarded(parse_one):
    """Any exception from parsing one call becomes that call's error: a rollout never raises on
    what a model wrote (a 5,000-digit number hits Python's int-str limit as a plain ValueError)."""

    def wrapper(*args) -> ToolCall:
        try:
            return parse_one(*args)
        except Exception as exc:  # noqa: BLE001  (deliberately broad: see the docstring)
            return ToolCall("", {}, error=f"tool call could not be parsed ({type(exc).__name__}: {str(exc)[:80]})")

    return wrapper


def _cap(calls: list[ToolCall], max_calls: int) -> tuple[list[ToolCall], int]:
    return calls[:max_calls], max(0, len(calls) - max_calls)


#: format name -> class (`cls()`, or `cls.for_tools(tools)` for a run's tools); `env.format` chooses one
FORMATS: Registry[type, NoTraits] = Registry(
    "tool-call format", key="env.format", where="agent_r1.envs.formats.FORMATS")


@FORMATS.register("tag")
class TagFormat:
    """One tag per tool, `<name>input</name>`; the tag body is the tool's one string parameter.

    Built for a set of tools with `for_tools` (the default is search only, Search-R1 style).
    A tool with more than one required parameter cannot be written this way: use `hermes`.
    """

    name = "tag"
    inline_observations = True
    RESERVED = ("answer", "information", "think")

    def __init__(self, tools: dict[str, str] | None = None):
        self.tools = dict(tools) if tools is not None else {"search": "query"}  # tag -> argument name
        self.stop_strings = tuple(f"</{t}>" for t in self.tools) + ("</answer>",)

    @classmethod
    def for_tools(cls, tools: list) -> "TagFormat":
        return cls({t.name: tag_argument(t) for t in tools})

    def parse(self, text: str, max_calls: int) -> ParsedAction:
        answer = _extract_answer(text)
        if answer is not None:
            return ParsedAction(answer=answer)
        calls = [self._parse_call(tag, body) for tag, body in tagged_spans(text, list(self.tools))]
        calls, dropped = _cap(calls, max_calls)
        if not calls:
            unclosed = next((t for t in self.tools if f"<{t}>" in text), None)
            hint = f"unclosed <{unclosed}> tag" if unclosed else "no action found"
            return ParsedAction(error=f"{hint}: write {self._examples()} or <answer>answer</answer>")
        return ParsedAction(calls=calls, error=f"{dropped} extra call(s) ignored" if dropped else None)

    @_guarded
    def _parse_call(self, tag: str, body: str) -> ToolCall:
        body = body.strip()
        if not body:
            return ToolCall(tag, {}, error=f"empty {tag} {self.tools[tag]}")
        return ToolCall(tag, {self.tools[tag]: body})

    def _examples(self) -> str:
        return " or ".join(f"<{t}>{arg}</{t}>" for t, arg in self.tools.items()) or "<answer>answer</answer>"

    def wrap_observation(self, results: list[str]) -> Observation:
        return wrap_each(results, "<information>", "</information>")

    def instructions(self, tool_names: list[str]) -> str:
        if list(self.tools) == ["search"]:
            return ("Answer the question. To search, write <search>query</search> and read the "
                    "<information> that follows. Give the final answer as <answer>answer</answer>.")
        uses = "; ".join(f"<{t}>{arg}</{t}>" for t, arg in self.tools.items() if t in tool_names)
        return (f"Answer the question. To use a tool, write {uses}, and read the <information> that "
                "follows. Give the final answer as <answer>answer</answer>.")


def tag_argument(tool) -> str:
    """The one string parameter the tag body fills; a clear error when the tool has no such one."""
    if tool.name in TagFormat.RESERVED or not re.fullmatch(r"[A-Za-z_][\w.-]*", tool.name):
        raise ValueError(f"tool {tool.name!r} cannot be a tag in env.format=tag (reserved or not a tag "
                         "name); use env.format=hermes")
    props = tool.parameters.get("properties", {})
    required = list(tool.parameters.get("required", []))
    strings = [k for k, v in props.items() if v.get("type") == "string"]
    candidates = [k for k in strings if k in required] if required else strings
    if len(candidates) != 1 or any(r not in candidates for r in required):
        raise ValueError(f"tool {tool.name!r} takes parameters {sorted(props)} (required {required}); "
                         "env.format=tag passes the tag body as its one required string parameter. "
                         "Use env.format=hermes for tools with several parameters")
    return candidates[0]


class _NonFinite(ValueError):
    """NaN, Infinity or an overflowing float in model JSON (Python's reader accepts them)."""


def _refuse(token: str) -> float:
    raise _NonFinite(token)


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):  # 1e999 reads as inf
        raise _NonFinite(token[:40])
    return value


def _loads(text: str):
    return json.loads(text, parse_constant=_refuse, parse_float=_finite)


@FORMATS.register("hermes")
class HermesFormat:
    name = "hermes"
    stop_strings = ("</tool_call>", "</answer>")
    inline_observations = False

    def parse(self, text: str, max_calls: int) -> ParsedAction:
        answer = _extract_answer(text)
        if answer is not None:
            return ParsedAction(answer=answer)
        calls = [self._parse_call(body) for body in (b for _, b in tagged_spans(text, ["tool_call"]))]
        calls, dropped = _cap(calls, max_calls)
        if not calls:
            hint = "unclosed <tool_call> tag" if "<tool_call>" in text else "no action found"
            return ParsedAction(error=f'{hint}: write <tool_call>{{"name": ..., "arguments": {{...}}}}'
                                      "</tool_call> or <answer>answer</answer>")
        return ParsedAction(calls=calls, error=f"{dropped} extra call(s) ignored" if dropped else None)

    @staticmethod
    @_guarded
    def _parse_call(body: str) -> ToolCall:
        # the body may carry the newlines Qwen2.5 writes around the JSON; json ignores them
        try:
            obj = _loads(body)
        except _NonFinite as exc:
            return ToolCall("", {}, error=f"tool call holds a non-finite number ({exc}); write finite numbers")
        except (json.JSONDecodeError, RecursionError) as exc:
            return ToolCall("", {}, error=f"tool call is not valid JSON ({exc.__class__.__name__}: {str(exc)[:80]})")
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return ToolCall("", {}, error='tool call must be a JSON object with a string "name"')
        args = obj.get("arguments", {})
        if isinstance(args, str):  # some models emit arguments as a JSON string
            try:
                args = _loads(args)
            except _NonFinite as exc:
                return ToolCall(obj["name"], {}, error=f'"arguments" holds a non-finite number ({exc})')
            except (json.JSONDecodeError, RecursionError):
                return ToolCall(obj["name"], {}, error='"arguments" is a string that is not valid JSON')
        if not isinstance(args, dict):
            return ToolCall(obj["name"], {}, error='"arguments" must be a JSON object')
        return ToolCall(obj["name"], args)

    def wrap_observation(self, results: list[str]) -> Observation:
        return wrap_each(results, "<tool_response>\n", "\n</tool_response>", sep="\n")

    @classmethod
    def for_tools(cls, tools: list) -> "HermesFormat":
        return cls()

    def instructions(self, tool_names: list[str]) -> str:
        return ("Answer the question. You may call the tools listed above inside <tool_call></tool_call> "
                "tags. Give the final answer as <answer>answer</answer>.")


def get_format(name: str, tools: list | None = None) -> ToolCallFormat:
    """The format `name`; with `tools`, one that can write calls to each of them."""
    cls = FORMATS[name]
    return cls() if tools is None else cls.for_tools(tools)
