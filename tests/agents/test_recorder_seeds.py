"""The recorder owns a session's seed with its records (agents/records.py `Recorder.next_call`): the
endpoint seeds a session's k-th call from (seed, k), so k counts from 0 per session and the count ends
with the session."""

from __future__ import annotations

from agent_r1.agents.records import Recorder


def test_each_seeded_session_counts_its_own_calls_from_zero():
    r = Recorder()
    r.open("a", seed=5)
    r.open("b", seed=9)
    r.open("plain")
    assert [r.next_call("a"), r.next_call("a"), r.next_call("b"), r.next_call("a")] == [(5, 0), (5, 1), (9, 0), (5, 2)]
    assert r.next_call("plain") is None and r.next_call("plain") is None  # unseeded: nothing to count


def test_a_closed_session_draws_no_seed_and_a_reopened_one_counts_again():
    r = Recorder()
    r.open("a", seed=5)
    r.next_call("a")
    r.close("a")
    assert r.next_call("a") is None and r.next_call("never opened") is None
    r.open("a", seed=5)
    assert r.next_call("a") == (5, 0)
