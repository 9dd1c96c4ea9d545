"""`close_actors` (agent_r1/training/ray_actors.py), which the Ray trainer closes its rollout workers with
and the learner group its ranks: every actor is asked to close, and every one is killed even when a close
fails, since a dead actor cannot answer and closing must not hide the error that got us there."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from agent_r1.training.ray_actors import close_actors  # noqa: E402


class _Method:
    def __init__(self, actor: "_Actor"):
        self.actor = actor

    def remote(self) -> str:
        self.actor.calls.append("close")
        return self.actor.name


class _Actor:
    def __init__(self, name: str):
        self.name, self.calls = name, []
        self.close = _Method(self)


def test_every_actor_is_closed_then_killed(monkeypatch):
    waited, killed = [], []
    monkeypatch.setattr(ray, "get", lambda refs, timeout=None: waited.append((refs, timeout)))
    monkeypatch.setattr(ray, "kill", killed.append)
    actors = [_Actor("a"), _Actor("b")]
    close_actors(actors)
    assert [a.calls for a in actors] == [["close"], ["close"]]
    assert waited == [(["a", "b"], 30)] and killed == actors


def test_a_failed_close_still_kills_every_actor(monkeypatch):
    def dead(refs, timeout=None):
        raise RuntimeError("the actor died")

    killed = []
    monkeypatch.setattr(ray, "get", dead)
    monkeypatch.setattr(ray, "kill", killed.append)
    actors = [_Actor("a"), _Actor("b")]
    close_actors(actors, timeout_s=1)
    assert killed == actors


def test_no_actors_waits_on_nothing(monkeypatch):
    monkeypatch.setattr(ray, "get", lambda *a, **k: pytest.fail("nothing to wait on"))
    close_actors([])
