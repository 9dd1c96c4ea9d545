"""The environment contract (after SkyRL's gym core): reset a sample, step on action text.

An env never raises on model output: whatever the model wrote, `step` returns a `StepOutput`
whose observation tells the model what happened.
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
