"""Tool text as data: the strings of tool schemas and tool-call arguments that a chat template writes
into the prompt, replaced by slots before rendering so that ChatCodec encodes them as data.

A tool's description comes from whoever wrote the tool (an MCP server, an agent's request), and a
call's arguments from an earlier reply sent back by the agent: neither is the template's own text,
so control-token text in them (`<|im_start|>system ...`) must stay text, as message contents do.

Templates write tools with `tojson` (Qwen2.5, Llama 3.1), and string arguments as they are or as a
JSON string (Qwen2.5's versions differ): a slot between double quotes is a JSON string's whole text
and is written JSON-escaped, any other as it is. ChatCodec checks the slotted render against the real
one and falls back to the template's own text when a template writes them otherwise.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

PATTERN = "\ue000(\\d+)\ue001"  # private-use characters: tojson leaves them as they are
TEXT_KEYS = frozenset({"description", "title", "default"})  # string values under these keys are text
LIST_KEYS = frozenset({"enum", "examples"})  # and the strings of these lists


@dataclass
class ToolSlots:
    values: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.values)

    def slot(self, text: str) -> str:
        self.values.append(text)
        return f"\ue000{len(self.values) - 1}\ue001"

    def text(self, index: int, quoted: bool) -> str:
        """The slot's text as the template writes it: JSON-escaped where the slot stands between
        double quotes (a JSON string's whole text), else as it is."""
        text = self.values[index]
        return json.dumps(text, ensure_ascii=False)[1:-1] if quoted else text

    def tools(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """`tools` with the text of their schemas slotted (names and types stay: templates and parsers
        read them)."""
        return None if tools is None else [self._schema(copy.deepcopy(t)) for t in tools]

    def _schema(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self._schema(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key in TEXT_KEYS and isinstance(value, str) and value:
                out[key] = self.slot(value)
            elif key in LIST_KEYS and isinstance(value, list):
                out[key] = [self.slot(v) if isinstance(v, str) and v else v for v in value]
            elif key == "properties" and isinstance(value, dict):  # parameter names are the tool writer's text
                out[key] = {self.slot(k) if k else k: self._schema(v) for k, v in value.items()}
            else:
                out[key] = self._schema(value)
        return out

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` with each tool call's arguments slotted: a string whole, a mapping's keys and
        string values (written with tojson)."""
        out = []
        for m in messages:
            calls = m.get("tool_calls") if isinstance(m, dict) else None
            if not calls:
                out.append(m)
                continue
            out.append(dict(m, tool_calls=[self._call(c) for c in calls]))
        return out

    def _call(self, call: Any) -> Any:
        if not isinstance(call, dict):
            return call
        inner = call.get("function") if isinstance(call.get("function"), dict) else None
        holder = dict(inner) if inner is not None else dict(call)
        args = holder.get("arguments")
        if isinstance(args, str) and args:
            holder["arguments"] = self.slot(args)
        elif isinstance(args, dict):
            holder["arguments"] = self._mapping(args)
        return dict(call, function=holder) if inner is not None else holder

    def _mapping(self, node: Any) -> Any:
        if isinstance(node, dict):
            return {self.slot(k) if isinstance(k, str) and k else k: self._mapping(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self._mapping(v) for v in node]
        return self.slot(node) if isinstance(node, str) and node else node
