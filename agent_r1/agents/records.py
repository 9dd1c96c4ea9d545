"""What the endpoint saw and sampled, per session, token for token.

A session is one agent run (one sample). Every chat-completion call of that session appends one
`CallRecord`: the exact prompt ids the policy was conditioned on (the messages rendered with its chat
template), the ids it sampled and their log-probs. Nothing is decoded and re-tokenised, so the
trajectories built from the records (assemble.py) train on exactly what was sampled.

Agents call the endpoint from many threads at once (one server thread per request), so every access
goes through one lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CallRecord:
    """One chat-completion call."""

    prompt_ids: list[int]
    completion_ids: list[int]
    completion_logprobs: list[float]  # under the run's sampling distribution (its temperature)
    finish_reason: str  # "stop" | "length" | "tool_calls", as the response said
    messages: int  # how many messages the request rendered
    temperature: float  # the temperature the tokens were sampled at (the run's, not the request's)
    info: dict[str, Any] = field(default_factory=dict)  # e.g. the tool names called


class SessionError(KeyError):
    """A session key the recorder does not know (never opened, or already closed)."""


class Recorder:
    """Per-session lists of `CallRecord`s; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, list[CallRecord]] = {}

    def open(self, session: str) -> None:
        with self._lock:
            if session in self._calls:
                raise ValueError(f"session {session!r} is already open")
            self._calls[session] = []

    def close(self, session: str) -> list[CallRecord]:
        """Forgets the session; returns the calls not yet taken."""
        with self._lock:
            return self._calls.pop(session, [])

    def known(self, session: str) -> bool:
        with self._lock:
            return session in self._calls

    def add(self, session: str, record: CallRecord) -> None:
        with self._lock:
            if session not in self._calls:  # closed while its call was generating: the call is dropped
                raise SessionError(session)
            self._calls[session].append(record)

    def take(self, session: str) -> list[CallRecord]:
        """The session's calls so far, in the order they finished; the session keeps going, empty."""
        with self._lock:
            if session not in self._calls:
                raise SessionError(session)
            calls, self._calls[session] = self._calls[session], []
            return calls

    def sessions(self) -> list[str]:
        with self._lock:
            return list(self._calls)
