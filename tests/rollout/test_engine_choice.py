"""The engine side that needs no vLLM: choosing an engine by config, the model folder an engine with its
own weights is built from (LoRA merged, the run's dtype), and refusing temperature-1 log-probs at
another temperature. vLLM itself runs in tests_vllm/ (in .venv-vllm)."""

from __future__ import annotations

import json

import pytest
import torch

from agent_r1.rollout.engine import SamplingParams, TransformersEngine
from tests.pipeline_helpers import lora_policy
from tests.qwen_helpers import qwen_dir  # noqa: F401  (a session fixture)


@pytest.fixture(scope="module")
def qwen(qwen_dir):  # noqa: F811
    from agent_r1.models.build import load_model

    return load_model(qwen_dir, "float32")


def test_a_lora_policy_is_written_as_a_full_model_folder_with_the_adapters_merged(qwen, tmp_path):
    """Before: `from_model` saved the peft model, which writes only the adapter (no config.json):
    vLLM could not start on a LoRA run."""
    from transformers import AutoModelForCausalLM

    from agent_r1.models.served_folder import write_model_folder

    model, tokenizer = qwen
    peft_model = lora_policy(model)
    folder = write_model_folder(peft_model, tokenizer, tmp_path / "served", "float32")
    assert (folder / "config.json").exists() and not (folder / "adapter_config.json").exists()
    served = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    ids = torch.tensor([[151644, 872, 198, 9707, 11, 1879, 0]])
    with torch.no_grad():
        want = peft_model(input_ids=ids).logits
        got = served(input_ids=ids).logits
        base = model(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(got, base, atol=1e-3)  # the adapters are in it
    # the policy itself is untouched (merged beside it, not into it)
    assert any("lora_A" in n for n, _ in peft_model.named_parameters())


def test_a_bf16_run_writes_the_engine_folder_in_bf16(qwen, tmp_path):
    """Before: the folder handed to vLLM said float32 whatever train.precision was."""
    from safetensors import safe_open

    from agent_r1.models.served_folder import write_model_folder

    model, tokenizer = qwen
    folder = write_model_folder(model, tokenizer, tmp_path / "served", "bfloat16")
    config = json.loads((folder / "config.json").read_text())
    assert config["dtype"] == "bfloat16"
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}


def test_engine_options_follow_the_run(qwen):
    from agent_r1.config import load_config
    from agent_r1.rollout.engines import options_from_config

    cfg = load_config(overrides={"train.precision": "bf16", "rollout.max_total_tokens": 512,
                                 "rollout.vllm.kv_cache_gib": 2})
    opts = options_from_config(cfg, "cpu")
    assert (opts.dtype, opts.max_model_len, opts.vllm.kv_cache_gib, opts.device) == ("bfloat16", 512, 2.0, "cpu")
    with pytest.raises(ValueError, match="rollout.engine"):
        load_config(overrides={"rollout.engine": "tgi"})
    with pytest.raises(ValueError, match="kv_cache_gib"):
        load_config(overrides={"rollout.vllm.kv_cache_gib": 0})


def test_rollout_engine_chooses_the_in_process_engine_from_the_registry(qwen, monkeypatch):
    from agent_r1.rollout import engines, vllm_engine
    from agent_r1.sampling import ENGINES

    model, tokenizer = qwen
    assert isinstance(engines.build_engine("transformers", model, tokenizer), TransformersEngine)
    chosen = []

    def fake(model, tokenizer, options):
        chosen.append(options)
        return "a vllm engine"

    with ENGINES.scratch():
        ENGINES.register("vllm", fake, replace=True)
        assert engines.build_engine("vllm", model, tokenizer) == "a vllm engine" and len(chosen) == 1
        monkeypatch.setattr(vllm_engine, "vllm_available", lambda: True)
        monkeypatch.setattr(vllm_engine, "cuda_available", lambda: True)
        assert engines.build_engine("auto", model, tokenizer) == "a vllm engine"  # "auto" looks up the same registry
    assert ENGINES["vllm"] is not fake and len(chosen) == 2  # the real builder is back after the block
    with pytest.raises(ValueError, match=r"unknown generation engine 'tgi'; known: \['auto', 'transformers', 'vllm'"):
        engines.build_engine("tgi", model, tokenizer)


def test_an_engine_without_processed_logprobs_refuses_a_temperature_other_than_1():
    """Before: `processed_logprobs` was set and never read, so an older vLLM silently returned
    temperature-1 log-probs at T=0.7 (every importance ratio off)."""
    from agent_r1.rollout.vllm_engine import VLLMEngine

    engine = VLLMEngine.__new__(VLLMEngine)  # what __init__ leaves after its fallback, without a vLLM
    engine.processed_logprobs = False
    with pytest.raises(RuntimeError, match="logprobs_mode"):
        engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=2, temperature=0.7))


def test_engine_weights_sync_only_engines_holding_their_own_copy(qwen):
    from agent_r1.rollout.engines import EngineWeights

    model, tokenizer = qwen

    class Own:
        holds_own_weights = True
        synced: list = []

        def sync_weights(self, m):
            self.synced.append(m)

    own = EngineWeights(Own(), model)
    assert own.current().synced == [model]  # stale at start: weights loaded after building must reach it
    own.current()
    assert len(Own.synced) == 1
    own.mark_stale()
    own.current()
    assert len(Own.synced) == 2 and own.metrics()["rollout/weight_syncs"] == 2.0
    shared = EngineWeights(TransformersEngine(model, tokenizer), model)
    shared.mark_stale()
    assert not shared.stale and shared.metrics() == {}
