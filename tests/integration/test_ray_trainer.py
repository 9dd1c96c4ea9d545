"""The Ray backend against the in-process reference: same trajectories and losses with one
worker, every prompt exactly once with two, a worker killed mid-iteration is restarted and its
shard rolled out again, and engine selection without vLLM or a GPU.

One local Ray session (127.0.0.1, token auth off, temp dir in the project) serves the module.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest
import torch

from agent_r1.config import RayConfig, load_config
from tests.precision_modes import FP32

ITERATIONS = 2


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Data and index built once (synthetic world, tantivy) for every run in this module."""
    from agent_r1.runs.run import Run

    root = tmp_path_factory.mktemp("ray_world")
    Run(_cfg(root, "prep")).index_dir
    return root


def _cfg(root, name, **over):
    base = {"data.dir": str(root / "data"), "search.index_dir": str(root / "index"), "data.n_people": 60,
            "train.runs_dir": str(root / "runs"),  # its digest cache too: never the repository's runs/
            "model.hidden_size": 32, "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64,
            "model.vocab_size": 300, "train.prompts_per_iter": 4, "rollout.n_samples": 2, "rollout.max_turns": 2,
            "rollout.max_tokens_per_turn": 6, "train.eval_every": 0, "train.eval_size": 4, "train.threads": 1,
            "train.iterations": ITERATIONS, "train.checkpoint_every": ITERATIONS,
            "algo.adv_estimator": "gae", "algo.kl_coef": 0.01, "train.out_dir": str(root / name),
            "ray.cpus_per_worker": 1, "ray.learner_cpus": 1,
            # exact comparisons with in-process runs: fp32 in the actors too, whatever the CPU
            **FP32}
    base.update(over)
    return load_config(None, base)


def _ids(trajs):
    return [(t.sample_id, t.token_ids, [lp for turn in t.turns for lp in turn.action_logprobs]) for t in trajs]


def _ray_run(cfg, after_submit=None, checkpoint=False):
    from agent_r1.runs.run import Run
    from agent_r1.training.ray_trainer import RayTrainer

    with RayTrainer(Run(cfg).spec(), after_submit=after_submit) as trainer:
        pids = trainer.worker_pids()
        steps = []
        for _ in range(ITERATIONS):
            steps.append((trainer.train_step(), trainer.last_trajectories))
        path = trainer.save() if checkpoint else None
        return steps, pids, trainer.worker_pids(), trainer.worker_failures, path


@pytest.fixture(scope="module")
def two_worker_run(ray_session, world):
    return _ray_run(_cfg(world, "two", **{"ray.num_workers": 2}), checkpoint=True)


def test_one_worker_equals_in_process(ray_session, world):
    from agent_r1.runs.run import Run
    from agent_r1.training.trainer import RLTrainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the learner and the worker: same reductions, same floats
    try:
        cfg = _cfg(world, "inproc")
        with Run(cfg) as run:
            parts = run.parts()
            trainer = RLTrainer(cfg, parts.model, parts.tokenizer, run.env_factory, parts.train_samples,
                                parts.eval_samples, reference=parts.reference)
            reference = [(trainer.train_step(), trainer.last_trajectories) for _ in range(ITERATIONS)]
    finally:
        torch.set_num_threads(threads)
    steps, *_ = _ray_run(_cfg(world, "one", **{"ray.enabled": True, "ray.num_workers": 1}))
    for (m_ref, t_ref), (m_ray, t_ray) in zip(reference, steps):
        assert _ids(t_ray) == _ids(t_ref)  # same prompts, same sampled tokens, same log-probs
        for key in ("policy_loss", "value_loss", "kl", "grad_norm", "reward_mean"):
            assert m_ray[key] == pytest.approx(m_ref[key], abs=1e-6), key
        assert m_ray["ray/workers"] == 1.0


def test_two_workers_roll_out_every_prompt_once(two_worker_run, world):
    from agent_r1.runs.run import Run
    from agent_r1.training.trainer import PromptSampler

    steps, pids, _, failures, _ = two_worker_run
    assert len(set(pids)) == 2 and failures == 0
    cfg = _cfg(world, "two")
    sampler = PromptSampler(Run(cfg).samples("train"), cfg.seed)
    for metrics, trajs in steps:
        prompts = [s["id"] for s in sampler.next_batch(cfg.train.prompts_per_iter)]
        assert [t.sample_id for t in trajs][::cfg.rollout.n_samples] == [str(p) for p in prompts]  # prompt order
        assert Counter(t.sample_id for t in trajs) == {str(p): cfg.rollout.n_samples for p in prompts}
        assert metrics["ray/workers"] == 2.0 and metrics["policy_loss"] == metrics["policy_loss"]


def test_killed_worker_is_restarted_and_its_shard_rolled_out_again(ray_session, world, two_worker_run):
    from agent_r1.training import checkpoint as ckpt

    state: dict = {}

    def kill_worker_0(iteration: int) -> None:
        if iteration == 1:  # the second iteration: the worker has weights to lose
            os.kill(state["pid"], signal.SIGKILL)

    from agent_r1.runs.run import Run
    from agent_r1.training.ray_trainer import RayTrainer

    cfg = _cfg(world, "fault", **{"ray.num_workers": 2})
    with RayTrainer(Run(cfg).spec(), after_submit=kill_worker_0) as trainer:
        state["pid"] = trainer.worker_pids()[0]
        steps = [(trainer.train_step(), trainer.last_trajectories) for _ in range(ITERATIONS)]
        path = trainer.save()
        after = trainer.worker_pids()
        failures = trainer.worker_failures
    assert failures == 1 and after[0] != state["pid"]  # restarted: a new process
    clean_steps, *_, clean_path = two_worker_run
    for (m_fault, t_fault), (m_clean, t_clean) in zip(steps, clean_steps):
        # the re-rolled shard used the same seed: nothing lost, nothing twice, same update
        assert _ids(t_fault) == _ids(t_clean)
        assert m_fault["policy_loss"] == pytest.approx(m_clean["policy_loss"], abs=1e-6)
    assert steps[-1][0]["ray/worker_failures"] == 1.0
    fault_state, clean_state = ckpt.load_state(path), ckpt.load_state(clean_path)
    assert fault_state["iteration"] == clean_state["iteration"] == ITERATIONS
    assert fault_state["sampler"] == clean_state["sampler"]  # no prompt drawn twice
    assert ckpt.latest_checkpoint(path.parent) == path


def test_run_train_dispatches_to_ray(ray_session, world):
    from agent_r1.runs.run import run_train
    from agent_r1.tracking.metrics import read_metrics

    cfg = _cfg(world, "cli", **{"ray.enabled": True, "train.iterations": 1, "train.checkpoint_every": 1})
    result = run_train(cfg)
    assert result["iterations"] == 1 and "eval/em" in result["final"]
    steps = [m["step"] for m in read_metrics(world / "cli" / "metrics.jsonl")]
    assert steps == [0, 1]
    assert (world / "cli" / "checkpoints" / "iter_000001" / "state.pt").exists()
    import ray

    assert ray.is_initialized()  # a Ray it did not start is left running


def test_local_ray_stays_inside_the_project(ray_session, tmp_path, monkeypatch):
    from pathlib import Path

    from agent_r1.training.ray_trainer import ray_temp_dir, split_shards

    session = Path(ray_session._private.worker._global_node.get_session_dir_path())
    assert session.parent == Path(ray_temp_dir(RayConfig()))  # <project>/.ray (or the short /tmp fallback)
    # token auth on, the token private and inside the project's Ray folder (agent_r1/training/ray_auth.py)
    assert os.environ.get("RAY_AUTH_MODE") == "token"
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
    assert token.parent == session.parent and token.stat().st_mode & 0o077 == 0
    monkeypatch.chdir(tmp_path)
    temp = ray_temp_dir(RayConfig())
    assert temp == str(tmp_path / ".ray") or (len(str(tmp_path / ".ray")) > 40 and temp.startswith("/tmp/agent-r1-ray-"))
    assert ray_temp_dir(RayConfig(temp_dir="/tmp/x")) == "/tmp/x"
    assert [len(s) for s in split_shards(list(range(5)), 3)] == [2, 2, 1]
    assert sum(split_shards(list(range(2)), 3), []) == [0, 1]


def test_engine_selection_without_vllm_or_gpu(tiny_model, monkeypatch):
    from agent_r1.rollout import vllm_engine
    from agent_r1.rollout.engine import TransformersEngine
    from agent_r1.rollout.engines import build_engine

    model, tok = tiny_model
    monkeypatch.setattr(vllm_engine, "cuda_available", lambda: False)
    assert isinstance(build_engine("auto", model, tok), TransformersEngine)
    assert isinstance(build_engine("transformers", model, tok), TransformersEngine)
    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: False)
    with pytest.raises(ImportError, match="agent-r1\\[gpu\\]"):
        build_engine("vllm", model, tok)
    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: True)
    assert isinstance(build_engine("auto", model, tok), TransformersEngine)  # vLLM without a GPU: not chosen
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        build_engine("vllm", model, tok)
    with pytest.raises(ValueError, match="unknown"):
        build_engine("tgi", model, tok)


def test_ray_config_from_params():
    from pathlib import Path

    cfg = load_config(Path(__file__).resolve().parents[2] / "params.yaml")
    assert cfg.ray.enabled is False and cfg.ray.address == ""
    with pytest.raises(ValueError, match="rollout.engine"):  # one engine key for in-process and Ray runs
        load_config(None, {"rollout.engine": "tgi"})
    with pytest.raises(ValueError, match="num_workers"):
        load_config(None, {"ray.num_workers": 0})


def test_resume_with_nothing_to_resume_fails_in_the_driver_before_ray(tmp_path, monkeypatch):
    """The clean NoCheckpointError, not the same text wrapped in a Ray actor error minutes later."""
    from agent_r1.runs.run import run_train
    from agent_r1.training import ray_trainer
    from agent_r1.training.checkpoint import NoCheckpointError

    monkeypatch.setattr(ray_trainer, "init_ray", lambda rc: pytest.fail("Ray was started before the resume check"))
    (tmp_path / "run").mkdir()
    # data and index where a premature build would show (it once built a default world there)
    cfg = load_config(None, {"ray.enabled": True, "train.out_dir": str(tmp_path / "run"),
                             "data.dir": str(tmp_path / "data"), "search.index_dir": str(tmp_path / "index")})
    with pytest.raises(NoCheckpointError, match=r"nothing to resume in train.out_dir=.*run: .*no checkpoints/ folder"):
        run_train(cfg, resume=True)
    assert not (tmp_path / "data").exists() and not (tmp_path / "index").exists()  # checked before anything is built
