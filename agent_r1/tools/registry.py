"""Tool registry: tools are added by name (a class or a factory), never by if/elif chains.

Three ways in, one lookup (`create_tool`):
- built-in tools (search, calculator), registered when their module is imported;
- `@register_tool("name")` on a class or factory, or `@tool` on a typed function (function_tool.py);
- third-party packages, through the `agent_r1.tools` entry-point group (plugins.py), loaded
  only when a tool of that name is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from agent_r1.registry import NoTraits, Registry
from agent_r1.tools.base import Tool

ToolFactory = Callable[..., Tool]
#: tool name -> factory (a Tool class or a function returning a Tool); `env.tools` names them
TOOL_FACTORIES: Registry[ToolFactory, NoTraits] = Registry(
    "tool", key="env.tools", where="agent_r1.tools.registry.TOOL_FACTORIES")
BUILTIN_TOOL_MODULES = ("agent_r1.tools.search", "agent_r1.tools.calculator")


def register_tool(name: str) -> Callable[[ToolFactory], ToolFactory]:
    """Decorator: `@register_tool("search") class SearchTool: ...` (or a factory function); the same
    as `@TOOL_FACTORIES.register("search")`."""
    return TOOL_FACTORIES.register(name)


def load_builtin_tools() -> None:
    for module in BUILTIN_TOOL_MODULES:
        importlib.import_module(module)


def available_tools() -> list[str]:
    """Every tool name `create_tool` accepts: built-in, registered, and entry-point plugins."""
    from agent_r1.tools.plugins import discover_tool_plugins

    load_builtin_tools()
    return sorted(set(TOOL_FACTORIES) | set(discover_tool_plugins()))


def get_tool_factory(name: str) -> ToolFactory:
    """The factory registered under `name`, importing built-ins and entry-point plugins on demand."""
    if name not in TOOL_FACTORIES:
        load_builtin_tools()
    if name not in TOOL_FACTORIES:
        from agent_r1.tools.plugins import register_tool_plugins

        register_tool_plugins(TOOL_FACTORIES)
    if name not in TOOL_FACTORIES:
        known = ", ".join(available_tools()) or "none"
        raise ValueError(f"unknown tool {name!r}; registered tools: {known}. Register one with @tool, "
                         "@register_tool, or an 'agent_r1.tools' entry point (docs/extending.md)")
    return TOOL_FACTORIES[name]


def create_tool(name: str, **kwargs: Any) -> Tool:
    tool = get_tool_factory(name)(**kwargs)
    if getattr(tool, "name", None) != name:
        raise ValueError(f"tool registered as {name!r} calls itself {getattr(tool, 'name', None)!r}; "
                         "the registry name and the tool's `name` must be the same")
    return tool
