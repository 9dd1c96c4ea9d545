"""Ray rollout workers sample in the learner's precision: a worker rolls out
shard 0 of an iteration exactly as the in-process trainer does (same seed, same tokens, same
log-probs), in fp32 and under the learner's bf16 autocast. Without the autocast a bf16 learner's
worker sampled from another distribution than the learner trains (max |delta log-prob| 0.014).

The worker is built in this process (its class, not a Ray actor): what it computes, not how Ray
places it, is the subject; tests/integration/test_ray_trainer.py covers the actors."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.training.ray_actors import RolloutWorker
from agent_r1.training.trainer import RLTrainer
from tests.rollout_helpers import make_env_factory
from tests.training.test_trainer import SAMPLES


class _Index:
    def close(self) -> None:
        pass


def _run(cfg):  # a RunHandle whose env is the tag env of the learner above (no index)
    return SimpleNamespace(cfg=cfg, resume=False, open_index=lambda index_dir: _Index(),
                           env_factory=lambda retriever: make_env_factory("tag"))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_worker_samples_like_the_learner(tiny_model, tmp_path, one_thread, precision):
    cfg = load_config(None, {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 4,
                             "rollout.n_samples": 2, "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 12,
                             "train.threads": 1, "train.precision": precision, "train.device": "cpu",
                             "rollout.engine": "transformers"})
    model, tok = tiny_model
    learner = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    samples = SAMPLES[:4]
    learner.sampler.next_batch = lambda n: samples  # the worker gets the same prompts
    expected = learner.rollout()
    worker = RolloutWorker(_run(cfg), "", (copy.deepcopy(learner.model), tok, 0), threads=1,
                           precision=learner.compute.precision)
    got = worker.rollout(samples, 0, 0, 0, []).trajectories
    assert [t.token_ids for t in got] == [t.token_ids for t in expected]
    diff = max(abs(a - b) for t, e in zip(got, expected) for a, b in zip(t.sampled_logprobs, e.sampled_logprobs))
    assert diff == 0.0, diff
