"""The Tool contract: a name, a description, a JSON-schema for arguments, and `call`.

A tool never raises into the rollout: `ToolRunner` (see runner.py) validates arguments,
enforces the timeout and turns every failure into a `ToolResult(success=False)` whose text
tells the model what went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class ToolResult:
    """What a tool returns: `text` is shown to the model; `success` is False on any failure.

    `metadata` carries machine-readable facts for rewards and metrics (e.g. retrieved titles).
    """

    text: str
    success: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)


class ServiceUnavailableError(RuntimeError):
    """The service behind a tool (e.g. the Elasticsearch server) is down after the tool's own
    retries. Unlike any other tool failure this is not the model's doing, so `ToolRunner` lets
    it through: the run stops with this message (its last checkpoint intact, `--resume` continues)
    instead of training on error observations."""


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
