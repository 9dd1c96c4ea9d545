"""The run's MCP tools, handed to an agent function (`env.mcp_servers` under `env.kind: openai_agent`).

An agent with a parameter named `tools` gets them, by keyword:

    def agent(client, sample, tools):
        reply = client.chat.completions.create(model="policy", messages=[...], tools=tools.schemas)
        for call in reply.choices[0].message.tool_calls or []:
            text = tools.call(call.function.name, call.function.arguments)   # the result, as text
        ...

`tools.schemas` are the servers' tools as OpenAI function tools (to pass as `tools=`), `tools.call(name,
arguments)` runs one call on its server within the server's timeout and returns the result's text. As in
the built-in env, a call never raises into the agent: an unknown tool, arguments that are not a JSON
object, a server's error or a timeout come back as text saying so (the policy sees what went wrong).
The connections are the run's: opened when the env factory is built, closed with it.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from agent_r1.tools.base import Tool, tool_schema


class AgentTools:
    """The tools an agent may call, by name; see the module docstring."""

    def __init__(self, tools: list[Tool]):
        self._tools = {t.name: t for t in tools}

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return [tool_schema(t) for t in self._tools.values()]

    def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> str:
        """The text of one call's result; `arguments` as the model wrote them (a JSON string) or a dict."""
        tool = self._tools.get(name)
        if tool is None:
            return f"Error: unknown tool {name!r}; the tools are {self.names}"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError as err:
                return f"Error: the arguments of {name!r} are not JSON ({err.msg}); write a JSON object"
        if not isinstance(arguments, dict):
            return f"Error: the arguments of {name!r} must be a JSON object, got {type(arguments).__name__}"
        return tool.call(arguments).text


def takes_tools(agent: Callable[..., Any]) -> bool:
    """Whether `agent` has a parameter named `tools` (passed by keyword), or takes `**kwargs`."""
    try:
        params = inspect.signature(agent).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "tools" and p.kind is not p.POSITIONAL_ONLY or p.kind is p.VAR_KEYWORD for p in params)
