"""Tool registry: tools are added by name (a class or a factory), never by if/elif chains."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_r1.tools.base import Tool

ToolFactory = Callable[..., Tool]
TOOL_FACTORIES: dict[str, ToolFactory] = {}


def register_tool(name: str) -> Callable[[ToolFactory], ToolFactory]:
    """Decorator: `@register_tool("search") class SearchTool: ...` (or a factory function)."""

    def wrap(factory: ToolFactory) -> ToolFactory:
        if name in TOOL_FACTORIES and TOOL_FACTORIES[name] is not factory:
            raise ValueError(f"tool {name!r} is already registered by {TOOL_FACTORIES[name]!r}")
        TOOL_FACTORIES[name] = factory
        return factory

    return wrap


def create_tool(name: str, **kwargs: Any) -> Tool:
    if name not in TOOL_FACTORIES:
        known = ", ".join(sorted(TOOL_FACTORIES)) or "none"
        raise ValueError(f"unknown tool {name!r}; registered tools: {known}")
    return TOOL_FACTORIES[name](**kwargs)
