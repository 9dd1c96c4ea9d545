"""uvicorn's h11 protocol with the bounds a server inside the trainer needs: connections and time.

Any local process may connect to the endpoint's port, key or no key, and uvicorn alone bounds neither:
a connection that never completes a request head has no timer (its keep-alive timer starts only after
a response, and the first byte of the next request cancels it), and `limit_concurrency` answers 503
to a request but never refuses or closes a connection. Idle sockets opened by another process then
held a file descriptor of the trainer each until it had none left for checkpoints and metrics.

Two bounds, both per connection, kept by this protocol:
- a head deadline: a connection with no request in progress (just opened, or between keep-alive
  requests) must deliver a complete request head within `head_timeout_s`, else it is closed. The
  deadline is absolute, so trickling one header byte at a time does not extend it;
- a connection cap: opening one more than `max_connections` closes the connection idle longest,
  preferring those that never sent a request; a connection with a request in progress is never
  closed for it (the newcomer is, when every other one is busy). A keyed agent's request therefore
  still gets through while the cap is full of idle sockets, and the trainer holds at most
  `max_connections` of them.
What bounds a request once its head is in: the body's size and read time (request_body.py), and
uvicorn's `limit_concurrency` (request tasks, those of callers that hung up included).

Why not a Unix socket in a private folder: agents reach the endpoint through a `base_url`, and the
frameworks that build their own client from one (LangGraph, the Agents SDK, plain `httpx`) speak TCP.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class BoundedH11Protocol(H11Protocol):
    max_connections = 256  # set per endpoint by bounded_protocol()
    head_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._served = False  # has answered a request: an agent's keep-alive connection, not a stray socket
        self._idle_since = self.loop.time()
        self._arm_head_timer()
        self._keep_cap()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._busy():  # the head is complete: the body's own bounds take over
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        self._served, self._idle_since = True, self.loop.time()
        self._arm_head_timer()  # armed first: the call below may start a pipelined request at once
        super().on_response_complete()
        if self._busy():
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _busy(self) -> bool:
        """A request is in progress on this connection (its head received, its response not finished)."""
        return self.cycle is not None and not self.cycle.response_complete

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if getattr(self, "_head_timer", None) is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._busy() and not self.transport.is_closing():
            self.transport.close()

    def _keep_cap(self) -> None:
        # closed transports stay in uvicorn's set until the loop reaps them: count the open ones
        live = [c for c in self.connections if not c.transport.is_closing()]
        if len(live) <= self.max_connections:
            return
        idle = [c for c in live if c is not self and isinstance(c, BoundedH11Protocol) and not c._busy()]
        victim: Any = min(idle, key=lambda c: (c._served, c._idle_since), default=self)
        victim.transport.close()


def bounded_protocol(max_connections: int, head_timeout_s: float) -> type[BoundedH11Protocol]:
    """The protocol class for one endpoint (uvicorn's `http=` takes a class, built with its config, whose
    EndpointConfig checked both bounds)."""
    return type("BoundedH11Protocol", (BoundedH11Protocol,),
                {"max_connections": max_connections, "head_timeout_s": float(head_timeout_s)})
