"""One way to end what an owner holds open, for the owners' own `close` methods: a generation engine
(vLLM's engine-core process), an env factory (its MCP servers' connections), a retriever.

Not every such part has anything to end (the transformers engine, a factory without MCP servers), so
the owner closes whatever has a `close` rather than asking each part's kind. It sits at the bottom of
the layers so the env factory's users, the trainer and the Ray actors all close the same way."""

from __future__ import annotations

from typing import Any


def close_all(*owners: Any) -> None:
    """Calls `close()` on each of `owners` that has one, in the order given; None, or an object with no
    callable `close`, is skipped. An error is not swallowed: it stops the closing where it is raised, as
    the plain calls it replaces did."""
    for owner in owners:
        close = getattr(owner, "close", None)
        if callable(close):
            close()
