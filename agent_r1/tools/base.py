"""The Tool contract: a name, a description, a JSON-schema for arguments, and `call`.

A tool never raises into the rollout: `ToolRunner` (see runner.py) validates arguments,
enforces the timeout and turns every failure into a `ToolResult(success=False)` whose text
tells the model what went wrong.

Two optional class attributes tell the runner how to run a tool (they are not Protocol members,
so a tool without them still is a `Tool`):
- `isolate` (default True): run calls in a worker process that is killed when a call times out.
  Set it False only for tools whose work is bounded by their own limits and that must share this
  process's objects (search: its retriever; the calculator: bounded inputs). A worker holds a
  copy of the tool made when it started, so changes a call makes to the tool stay in the worker.
- `max_consecutive_timeouts` (default none): that many timed-out round-trips in a row stop the run
  with `ServiceTimeoutError`, for tools that front a service which may hang (search).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agent_r1.retrieval.errors import ServiceUnavailableError


@dataclass
class ToolResult:
    """What a tool returns: `text` is shown to the model; `success` is False on any failure.

    `metadata` carries machine-readable facts for rewards and metrics (e.g. retrieved titles).
    """

    text: str
    success: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)


class ServiceTimeoutError(ServiceUnavailableError):
    """The service behind a tool hangs: its calls kept timing out (see `max_consecutive_timeouts`).
    Handled like a dead service: the run stops, resumable, with this message."""


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]  # a JSON schema of the `arguments` object

    def call(self, arguments: dict[str, Any]) -> ToolResult: ...

    def batch_call(self, arguments: list[dict[str, Any]]) -> list[ToolResult]:
        """Optional batched form (one retriever round-trip per turn); see ToolRunner."""
        ...


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The OpenAI/Hermes function description that chat templates list in the prompt."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }
