"""`close_all` (agent_r1/closing.py), how the trainer, a Ray rollout worker, the eval harness and a run end
what their engine, env factory and retriever hold open: in the order given, skipping what has nothing to
close, and letting an error through (it stops the closing, as the plain calls it replaced did)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent_r1.closing import close_all


def test_closes_each_in_order_and_skips_what_has_no_close():
    closed = []
    engine = SimpleNamespace(close=lambda: closed.append("engine"))
    make_env = lambda sample: None  # noqa: E731  a factory without MCP servers: no close attribute
    retriever = SimpleNamespace(close=lambda: closed.append("retriever"))
    close_all(engine, None, make_env, SimpleNamespace(close="not callable"), retriever)
    assert closed == ["engine", "retriever"]


def test_an_error_stops_the_closing_and_is_raised():
    def broken():
        raise OSError("engine core gone")

    closed = []
    with pytest.raises(OSError, match="engine core gone"):
        close_all(SimpleNamespace(close=broken), SimpleNamespace(close=lambda: closed.append("after")))
    assert closed == []
