"""Everything that opens an env closes it: `agent-r1 eval`'s agent mode runs an env of MCP tools alone
(no index, no search) and ends its servers, and so do a Ray rollout worker's and a trainer's close.
The MCP server is tests/tools/test_mcp.py's, written with the official SDK and run over stdio."""

from __future__ import annotations

import copy
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("mcp")

from agent_r1.config import load_config  # noqa: E402
from agent_r1.envs.factory import make_env_factory  # noqa: E402
from agent_r1.rollout.engine import GenerationOutput  # noqa: E402
from tests.tools.test_mcp import own_script, server_pids  # noqa: E402,F401  (own_script: a fixture)

SAMPLE = {"id": "m1", "question": "Where did Ada live?", "answers": ["London"]}
CALL = '<tool_call>{"name": "lookup", "arguments": {"name": "Ada"}}</tool_call>'


def mcp_config(script, **extra):
    return load_config(overrides={"env.format": "hermes", "env.tools": ["lookup"],
                                  "env.mcp_servers": [{"name": "kb", "command": sys.executable,
                                                       "args": [str(script)]}], **extra})


class Scripted:
    """An engine that answers each turn with the next scripted action (the same for every prompt)."""

    def __init__(self, tok, actions):
        self.tok, self.actions, self.turn = tok, actions, 0

    def generate(self, prompts, params):
        ids = self.tok.encode(self.actions[min(self.turn, len(self.actions) - 1)], add_special_tokens=False)
        self.turn += 1
        return [GenerationOutput(list(ids), [0.0] * len(ids), "stop") for _ in prompts]


def test_agent_mode_evaluates_an_env_of_mcp_tools_without_an_index_and_ends_its_server(own_script, tiny_model):
    from agent_r1.evaluation.harness import evaluate_datasets
    from agent_r1.rollout.chat import ChatCodec

    _, tok = tiny_model
    cfg = mcp_config(own_script)
    report = evaluate_datasets(Scripted(tok, [CALL, "<answer>London</answer>"]), ChatCodec(tok), cfg,
                               {"kb": [SAMPLE]}, ["agent"], retriever=None, keep_trajectories=True)
    (traj,) = report["trajectories"]["agent"]["kb"]
    assert "London" in traj.turns[0].observation_text and traj.answer == "London"
    assert report["results"]["agent"]["kb"]["em"] == pytest.approx(100.0)
    assert server_pids(own_script) == []  # the eval's env was closed with its server


def test_a_mode_that_searches_still_asks_for_an_index(own_script, tiny_model):
    from agent_r1.evaluation.harness import evaluate_datasets

    cfg = load_config(overrides={"env.tools": ["search"]})
    with pytest.raises(ValueError, match="mode 'agent' needs a retriever: pass --index DIR"):
        evaluate_datasets(None, None, cfg, {"kb": [SAMPLE]}, ["agent"])
    with pytest.raises(ValueError, match="mode 'rag' needs a retriever"):
        evaluate_datasets(None, None, mcp_config(own_script), {"kb": [SAMPLE]}, ["rag"])
    assert server_pids(own_script) == []  # refused before any server started


def test_a_rollout_workers_close_ends_its_mcp_servers(own_script, tiny_model, tmp_path):
    """The worker class in this process (tests/integration covers the actors): RayTrainer.close asks each
    worker to close before killing it, since a stdio server is the worker's child process."""
    from agent_r1.training.ray_actors import RolloutWorker

    model, tok = tiny_model
    cfg = mcp_config(own_script, **{"train.out_dir": str(tmp_path / "run"), "train.device": "cpu"})
    run = SimpleNamespace(cfg=cfg, resume=False, open_index=lambda index_dir: SimpleNamespace(close=lambda: None),
                          env_factory=lambda retriever: make_env_factory(cfg, retriever))
    worker = RolloutWorker(run, "", (copy.deepcopy(model), tok, 0), threads=1)
    assert len(server_pids(own_script)) == 1
    worker.close()
    assert server_pids(own_script) == []


def test_a_trainers_close_ends_its_env(tiny_model, tmp_path):
    from agent_r1.training.trainer import RLTrainer
    from tests.rollout_helpers import make_env_factory as tag_env_factory
    from tests.training.test_trainer import SAMPLES

    model, tok = tiny_model
    make_env = tag_env_factory("tag")
    closed = []
    make_env.close = lambda: closed.append(1)
    cfg = load_config(None, {"train.out_dir": str(tmp_path / "run"), "train.device": "cpu"})
    trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env, SAMPLES)
    trainer.close()
    assert closed == [1]
