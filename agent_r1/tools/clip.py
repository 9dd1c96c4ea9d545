"""What a tool's result may bring back: text cut to the runner's max_result_chars and made valid Unicode,
metadata cut to a few levels of a few items (a tool once sent 200 MB of metadata and 2M titles)."""

from __future__ import annotations

import json
from typing import Any

from agent_r1.tools.base import ToolResult

# a tool's metadata (titles for the process reward, timings) crosses the pipe and lands in step infos
# and traces: each list keeps its first items, each text its first characters, nesting a few levels
_META_ITEMS, _META_CHARS, _META_DEPTH = 100, 300, 4


def _clip_meta(value: Any, depth: int = 0) -> tuple[Any, bool]:
    """`value` cut to the limits above, and whether anything was cut."""
    if isinstance(value, str):
        return (value[:_META_CHARS], True) if len(value) > _META_CHARS else (value, False)
    if value is None or isinstance(value, (bool, int, float)):
        return value, False
    if depth >= _META_DEPTH:
        return None, True
    if isinstance(value, dict):
        items = list(value.items())
        out, cut = {}, len(items) > _META_ITEMS
        for k, v in items[:_META_ITEMS]:
            out[str(k)[:_META_CHARS]], c = _clip_meta(v, depth + 1)
            cut = cut or c
        return out, cut
    if isinstance(value, (list, tuple)):
        pairs = [_clip_meta(v, depth + 1) for v in list(value)[:_META_ITEMS]]
        return [v for v, _ in pairs], len(value) > _META_ITEMS or any(c for _, c in pairs)
    return _clip_meta(str(value), depth)


def clip_result(result: Any, max_chars: int) -> ToolResult:
    """A result as the parent may take it: text and metadata clipped (a tool once sent 200 MB of
    metadata), text valid Unicode (a lone surrogate would crash the tokenizer)."""
    if not isinstance(result, ToolResult):
        result = ToolResult(text=json.dumps(result) if not isinstance(result, str) else result)
    text = result.text if isinstance(result.text, str) else str(result.text)
    if len(text) > max_chars:
        text = text[:max_chars] + " ...[truncated]"
        result.metadata = {**(result.metadata if isinstance(result.metadata, dict) else {}), "clipped": True}
    result.text = text.encode("utf-8", "replace").decode("utf-8")
    meta, cut = _clip_meta(result.metadata if isinstance(result.metadata, dict) else {"value": result.metadata})
    result.metadata = {**meta, "clipped": True} if cut else meta
    return result
