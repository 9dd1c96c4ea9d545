"""The environment contract (after SkyRL's gym core): reset a sample, step on action text.

An env never raises on model output: whatever the model wrote, `step` returns a `StepOutput`
whose observation tells the model what happened.

Besides `AgentEnv`, the rollout (rollout/loop.py) reads from each env:
- `fmt`: the run's tool-call format (`envs.formats.get_format(cfg.env.format)`): generation stops on
  its closing tags, and it says how observations join the chat;
- `tool_schemas` (optional): the tools the chat template lists in the prompt;
- `reward_config` (optional): the sample's own reward settings (default: the run's `reward`).
An env with `plan`/`finish` (ToolEnv) has its tool calls batched across the turn; any other is stepped
with `step`. Envs are chosen by `env.kind` from the registry in envs/factory.py (`ENVS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class StepOutput:
    """`observation` is text to append for the model (None when the episode is done).

    `reward` is the process reward of this step (placed at the action's last token);
    `answer` is the final answer text extracted from the model's own action, if any.
    """

    observation: str | None
    reward: float
    done: bool
    answer: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class AgentEnv(Protocol):
    def reset(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        """Returns the initial chat messages (system + user) for this sample."""
        ...

    def step(self, action_text: str) -> StepOutput: ...

    def close(self) -> None: ...
