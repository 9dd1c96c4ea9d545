"""`env.kind: openai_agent` in a Ray rollout worker: the worker's rollout runs the agent through its own
endpoint and, seeded like the in-process trainer (shard 0 of iteration 0), samples exactly what the
trainer samples; closing the worker stops its endpoint. The worker class runs in this process (what it
computes is the subject; tests/integration covers the actors with the built-in env)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from agent_r1.config import load_config
from agent_r1.envs.factory import make_env_factory
from agent_r1.training.ray_actors import RolloutWorker
from agent_r1.training.trainer import RLTrainer
from tests.agents.test_endpoint_seed import policy  # noqa: F401  (the tiny model with a tool-call template)

pytestmark = pytest.mark.usefixtures("one_thread")

SAMPLES = [{"id": "q0", "question": "Where was Karivo born?", "answers": ["x"]},
           {"id": "q1", "question": "Where was Bamena born?", "answers": ["y"]}]


def test_a_rollout_worker_runs_the_agent_as_the_in_process_trainer_does(policy, tmp_path):  # noqa: F811
    model, tok = policy
    cfg = load_config(None, {"env.kind": "openai_agent", "env.agent": "tests.agents.test_endpoint_seed:ask_twice",
                             "train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 2,
                             "rollout.n_samples": 2, "rollout.max_tokens_per_turn": 6,
                             "rollout.max_total_tokens": 400, "train.threads": 1, "train.precision": "fp32",
                             "train.device": "cpu"})
    learner = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory(cfg, None), SAMPLES)
    learner.sampler.next_batch = lambda n: SAMPLES
    run = SimpleNamespace(cfg=cfg, resume=False, open_index=lambda index_dir: SimpleNamespace(close=lambda: None),
                          env_factory=lambda retriever: make_env_factory(cfg, retriever))
    worker = RolloutWorker(run, "", (copy.deepcopy(learner.model), tok, 0), threads=1,
                           precision=learner.compute.precision)
    try:
        expected = learner.rollout()
        got = worker.rollout(SAMPLES, 0, 0, 0, []).trajectories
    finally:
        worker.close()
        learner.close()
    assert len(got) >= 4 and {t.stop_reason for t in got} <= {"agent", "agent_error"}
    assert [t.token_ids for t in got] == [t.token_ids for t in expected]
    assert [t.session_id for t in got] == [t.session_id for t in expected]
    assert worker.make_env.endpoint is None and learner.make_env.endpoint is None  # stopped by close
