"""Third-party tools through Python entry points: no fork needed.

A package declares, in its pyproject.toml,

    [project.entry-points."agent_r1.tools"]
    weather = "my_package.tools:weather"

where the object is a Tool class, a factory returning a Tool, or a Tool instance (e.g. a
function decorated with `@tool(register=False)`). Discovery only reads the installed packages'
metadata; a plugin's module is imported the first time its tool is created, so a broken plugin
breaks only the runs that use it, with an error naming the plugin and its package.
"""

from __future__ import annotations

import warnings
from importlib import metadata
from typing import Any

from agent_r1.registry import Registry
from agent_r1.registry import entry_point_origin as _origin
from agent_r1.tools.base import Tool

ENTRY_POINT_GROUP = "agent_r1.tools"


def discover_tool_plugins() -> dict[str, metadata.EntryPoint]:
    """{tool name: entry point} for every installed package's `agent_r1.tools` entry point."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found and found[ep.name].value != ep.value:
            warnings.warn(f"tool plugin {ep.name!r} is declared twice ({_origin(found[ep.name])} and "
                          f"{_origin(ep)}); using the first", stacklevel=2)
            continue
        found.setdefault(ep.name, ep)
    return found


def register_tool_plugins(factories: Registry[Any, Any]) -> list[str]:
    """Adds a lazy entry to `factories` (the tool registry) for each plugin whose name is not taken;
    returns the names added. The registry is passed in so that this module never imports it (the
    registry calls this on a lookup miss).

    A name that a built-in or an already registered tool holds keeps that tool (with a warning).
    """
    added = []
    for name, ep in discover_tool_plugins().items():
        current = factories.get(name)
        if current is None:
            factories.register(name, PluginToolFactory(ep))
            added.append(name)
        elif not (isinstance(current, PluginToolFactory) and current.entry_point.value == ep.value):
            warnings.warn(f"tool plugin {name!r} from {_origin(ep)} is ignored: the name is already "
                          f"registered by {current!r}", stacklevel=2)
    return added


class PluginToolFactory:
    """Imports the entry point's object on first use, then builds the tool from it."""

    def __init__(self, entry_point: metadata.EntryPoint):
        self.entry_point = entry_point
        self._target: Any = None

    def __call__(self, **kwargs: Any) -> Tool:
        if self._target is None:
            try:
                self._target = self.entry_point.load()
            except Exception as exc:
                raise ImportError(f"tool plugin {self.entry_point.name!r} ({_origin(self.entry_point)}) failed to "
                                  f"load: {type(exc).__name__}: {exc}. Check that its package is installed in "
                                  "this environment and imports on its own") from exc
        target = self._target
        made = target(**kwargs) if isinstance(target, type) or not _is_tool(target) else target
        if not _is_tool(made):
            raise TypeError(f"tool plugin {self.entry_point.name!r} ({_origin(self.entry_point)}) gave "
                            f"{type(made).__name__}, not a Tool (it needs name, description, parameters, call)")
        if kwargs and made is target:
            raise TypeError(f"tool plugin {self.entry_point.name!r} is a ready tool instance and takes no "
                            f"options, got {sorted(kwargs)}")
        return made

    def __repr__(self) -> str:
        return f"plugin {_origin(self.entry_point)}"


def _is_tool(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("name", "description", "parameters")) and callable(getattr(obj, "call", None))
