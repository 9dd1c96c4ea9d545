"""Tool-call formats behind one interface: how actions are parsed and observations wrapped.

- `tag`: Search-R1 style `<search>q</search>` / `<information>..</information>` /
  `<answer>..</answer>`; observations are appended inline in the assistant turn.
- `hermes`: Qwen/Hermes `<tool_call>{"name": .., "arguments": {..}}</tool_call>`; observations
  come back as a `tool` message, wrapped by the chat template, in `<tool_response>` tags.
Both end an episode with `<answer>..</answer>`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from agent_r1.tools.runner import ToolCall

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


@dataclass
class ParsedAction:
    calls: list[ToolCall] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None  # set when the text holds neither a usable call nor an answer


class ToolCallFormat(Protocol):
    name: str
    stop_strings: tuple[str, ...]
    inline_observations: bool

    def parse(self, text: str, max_calls: int) -> ParsedAction: ...

    def wrap_observation(self, results: list[str]) -> str: ...

    def instructions(self, tool_names: list[str]) -> str: ...


def _extract_answer(text: str) -> str | None:
    m = _ANSWER.search(text)
    return m.group(1).strip() if m else None


def _cap(calls: list[ToolCall], max_calls: int) -> tuple[list[ToolCall], int]:
    return calls[:max_calls], max(0, len(calls) - max_calls)


class TagFormat:
    name = "tag"
    stop_strings = ("</search>", "</answer>")
    inline_observations = True
    _SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)

    def parse(self, text: str, max_calls: int) -> ParsedAction:
        answer = _extract_answer(text)
        if answer is not None:
            return ParsedAction(answer=answer)
        queries = [q.strip() for q in self._SEARCH.findall(text)]
        calls = [
            ToolCall("search", {"query": q}) if q else ToolCall("search", {}, error="empty search query")
            for q in queries
        ]
        calls, dropped = _cap(calls, max_calls)
        if not calls:
            hint = "unclosed <search> tag" if "<search>" in text else "no action found"
            return ParsedAction(error=f"{hint}: write <search>query</search> or <answer>answer</answer>")
        return ParsedAction(calls=calls, error=f"{dropped} extra call(s) ignored" if dropped else None)

    def wrap_observation(self, results: list[str]) -> str:
        return "".join(f"<information>{r}</information>" for r in results)

    def instructions(self, tool_names: list[str]) -> str:
        return ("Answer the question. To search, write <search>query</search> and read the "
                "<information> that follows. Give the final answer as <answer>answer</answer>.")


class HermesFormat:
    name = "hermes"
    stop_strings = ("</tool_call>", "</answer>")
    inline_observations = False
    _CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    def parse(self, text: str, max_calls: int) -> ParsedAction:
        answer = _extract_answer(text)
        if answer is not None:
            return ParsedAction(answer=answer)
        calls = [self._parse_call(body) for body in self._CALL.findall(text)]
        calls, dropped = _cap(calls, max_calls)
        if not calls:
            hint = "unclosed <tool_call> tag" if "<tool_call>" in text else "no action found"
            return ParsedAction(error=f'{hint}: write <tool_call>{{"name": ..., "arguments": {{...}}}}'
                                      "</tool_call> or <answer>answer</answer>")
        return ParsedAction(calls=calls, error=f"{dropped} extra call(s) ignored" if dropped else None)

    @staticmethod
    def _parse_call(body: str) -> ToolCall:
        try:
            obj = json.loads(body)
        except (json.JSONDecodeError, RecursionError) as exc:
            return ToolCall("", {}, error=f"tool call is not valid JSON ({exc.__class__.__name__}: {str(exc)[:80]})")
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return ToolCall("", {}, error='tool call must be a JSON object with a string "name"')
        args = obj.get("arguments", {})
        if isinstance(args, str):  # some models emit arguments as a JSON string
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return ToolCall(obj["name"], {}, error='"arguments" is a string that is not valid JSON')
        if not isinstance(args, dict):
            return ToolCall(obj["name"], {}, error='"arguments" must be a JSON object')
        return ToolCall(obj["name"], args)

    def wrap_observation(self, results: list[str]) -> str:
        return "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in results)

    def instructions(self, tool_names: list[str]) -> str:
        return ("Answer the question. You may call the tools listed above inside <tool_call></tool_call> "
                "tags. Give the final answer as <answer>answer</answer>.")


FORMATS: dict[str, type] = {"tag": TagFormat, "hermes": HermesFormat}


def get_format(name: str) -> ToolCallFormat:
    if name not in FORMATS:
        raise ValueError(f"unknown tool-call format {name!r}; choose one of {sorted(FORMATS)}")
    return FORMATS[name]()
