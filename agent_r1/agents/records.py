"""What the endpoint saw and sampled, per session, token for token.

A session is one agent run (one sample). Every chat-completion call of that session appends one
`CallRecord`: the exact prompt ids the policy was conditioned on (the messages rendered with its chat
template), the ids it sampled and their log-probs. Nothing is decoded and re-tokenised, so the
trajectories built from the records (assemble.py) train on exactly what was sampled. A session opened
with a seed also counts its seeded calls here, so the k-th call's seed (endpoint.py) lives and dies with
the session's records; so do the replies it was given (replies.py), which stay after `take`.

Agents call the endpoint from many threads at once (one server thread per request), so every access
goes through one lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from agent_r1.agents.replies import Replies, ReplyKey


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


@dataclass
class _Session:
    """One open session: its calls not yet taken; with a seed, how many of its calls have drawn one."""

    calls: list[CallRecord] = field(default_factory=list)
    seed: int | None = None
    seeded: int = 0  # the index the next seeded call gets
    replies: Replies = field(default_factory=Replies)


class Recorder:
    """Per-session lists of `CallRecord`s and call counters; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}

    def open(self, session: str, seed: int | None = None) -> None:
        with self._lock:
            if session in self._sessions:
                raise ValueError(f"session {session!r} is already open")
            self._sessions[session] = _Session(seed=seed)

    def close(self, session: str) -> list[CallRecord]:
        """Forgets the session; returns the calls not yet taken."""
        with self._lock:
            state = self._sessions.pop(session, None)
            return state.calls if state is not None else []

    def known(self, session: str) -> bool:
        with self._lock:
            return session in self._sessions

    def next_call(self, session: str) -> tuple[int, int] | None:
        """(the session's seed, the index of this call among its seeded calls: 0, 1, ...), counting the
        call; None for a session opened without a seed, or one not open (closed while it was called)."""
        with self._lock:
            state = self._sessions.get(session)
            if state is None or state.seed is None:
                return None
            state.seeded += 1
            return state.seed, state.seeded - 1

    def add(self, session: str, record: CallRecord, reply: ReplyKey | None = None) -> None:
        """Records the call; with `reply` (the key of the message returned for it), remembers that the
        message was sampled as the record's completion ids."""
        with self._lock:
            if session not in self._sessions:  # closed while its call was generating: the call is dropped
                raise SessionError(session)
            state = self._sessions[session]
            state.calls.append(record)
            if reply is not None:
                state.replies.add(reply, record.messages, record.completion_ids)

    def sampled(self, session: str, messages: list[dict[str, Any]]) -> dict[int, tuple[int, ...]]:
        """Message index -> sampled ids, for the assistant messages equal to a reply the session was
        given (replies.py); empty for a session not open."""
        with self._lock:
            state = self._sessions.get(session)
            return state.replies.sampled(messages) if state is not None else {}

    def take(self, session: str) -> list[CallRecord]:
        """The session's calls so far, in the order they finished; the session keeps going, empty."""
        with self._lock:
            if session not in self._sessions:
                raise SessionError(session)
            state = self._sessions[session]
            calls, state.calls = state.calls, []
            return calls
