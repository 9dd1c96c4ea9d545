"""`rollout.vllm.engine_core`: where a vLLM engine's core runs, resolved and applied without vLLM (the
vLLM tests build a real engine with it: tests_vllm/test_vllm_engine.py)."""

from __future__ import annotations

import os

import pytest

from agent_r1.config import load_config
from agent_r1.rollout import vllm_engine
from agent_r1.sampling import VLLMOptions

KEY = "VLLM_ENABLE_V1_MULTIPROCESSING"


@pytest.mark.parametrize("cpu_build,expected", [(True, "inline"), (False, "process")])
def test_auto_keeps_the_core_inline_on_the_cpu_build_only(monkeypatch, cpu_build, expected):
    monkeypatch.setattr(vllm_engine, "vllm_cpu_build", lambda: cpu_build)
    assert vllm_engine.engine_core_mode(VLLMOptions()) == expected
    for mode in ("inline", "process"):  # asked for: taken as it is
        assert vllm_engine.engine_core_mode(VLLMOptions(engine_core=mode)) == mode


@pytest.mark.parametrize("before", [None, "1"])
def test_the_setting_vllm_reads_is_set_for_the_build_and_restored(monkeypatch, before):
    if before is None:
        monkeypatch.delenv(KEY, raising=False)
    else:
        monkeypatch.setenv(KEY, before)
    for mode, inside in (("inline", "0"), ("process", "1")):
        with vllm_engine._engine_core_env(mode):
            assert os.environ[KEY] == inside
        assert os.environ.get(KEY) == before
    with pytest.raises(RuntimeError), vllm_engine._engine_core_env("inline"):
        raise RuntimeError("a failed engine start")
    assert os.environ.get(KEY) == before


def test_torchs_set_num_threads_survives_an_engine_build(monkeypatch):
    """vLLM's CPU worker swaps torch.set_num_threads for a no-op in its process; built inline, that
    process is the trainer's, so the build puts torch's own back."""
    import torch

    own = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", own)  # restored after the test whatever happens
    with vllm_engine._engine_core_env("inline"):
        torch.set_num_threads = lambda n: None  # what the CPU worker does
    assert torch.set_num_threads is own


def test_an_unknown_engine_core_is_refused_naming_the_key():
    assert load_config(None, {"rollout.vllm.engine_core": "inline"}).rollout.vllm.engine_core == "inline"
    with pytest.raises(ValueError, match=r"rollout\.vllm\.engine_core='threads'.*auto, inline, process"):
        load_config(None, {"rollout.vllm.engine_core": "threads"})
