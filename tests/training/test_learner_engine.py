"""One engine key (`rollout.engine`) for in-process runs and Ray workers: with Ray, the workers generate
with it, while a learner rank's trainer evaluates with the transformers engine over the policy it
trains, never a second copy of the weights (a vLLM engine) beside the learner. The classes are built in
this process (tests/integration covers the actors); vLLM itself is not needed: it is never built."""

from __future__ import annotations

import copy
from types import SimpleNamespace

from agent_r1.config import load_config
from agent_r1.rollout.engine import TransformersEngine
from tests.rollout_helpers import make_env_factory
from tests.training.test_trainer import SAMPLES


class _Index:
    def close(self) -> None:
        pass


def test_a_learner_rank_evaluates_with_the_transformers_engine_whatever_rollout_engine_says(tiny_model, tmp_path,
                                                                                            monkeypatch):
    from agent_r1.sampling import ENGINES
    from agent_r1.training.ray_actors import Learner

    def no_vllm(*a, **k):
        raise AssertionError("the learner built a vLLM engine")

    with ENGINES.scratch():
        ENGINES.register("vllm", no_vllm, replace=True)
        model, tok = tiny_model
        cfg = load_config(None, {"train.out_dir": str(tmp_path / "run"), "train.device": "cpu",
                                 "rollout.engine": "vllm", "ray.enabled": True})
        parts = SimpleNamespace(model=copy.deepcopy(model), tokenizer=tok, reference=None, latest=None, index_dir="",
                                train_samples=SAMPLES, eval_samples=SAMPLES[:2])
        run = SimpleNamespace(cfg=cfg, resume=False, parts=lambda: parts, open_index=lambda index_dir: _Index(),
                              env_factory=lambda retriever: make_env_factory("tag"))
        learner = Learner(run)
        assert isinstance(learner.trainer.engine, TransformersEngine)
        assert learner.trainer.engine.model is learner.trainer.model  # reads the weights it trains
