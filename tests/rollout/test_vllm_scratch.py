"""What a vLLM engine writes outside the run folder (the model folder it serves from, the weights
file of each sync) never outlives it: a failed start removes the folder, and the files of a process
that died without cleaning up (`kill -9` mid-sync) are swept when the next engine starts.

Runs in the main venv, where vLLM is not installed: there the engine's start fails at the import,
which is itself the failed-start case."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    """tempfile's folder is this test's own (what mkdtemp / mkstemp use by default)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_failed_engine_start_leaves_no_model_folder(temp_root, tiny_model):
    from agent_r1.rollout import vllm_engine

    if vllm_engine.vllm_available():  # the vLLM venv: make the start fail where it would load the model
        pytest.fail("this test runs in the main venv, where vLLM is not installed")
    model, tokenizer = tiny_model
    with pytest.raises(ImportError):
        vllm_engine.VLLMEngine.from_model(model, tokenizer)
    assert list(temp_root.iterdir()) == []


def test_files_of_dead_processes_are_swept_and_live_ones_kept(tmp_path):
    from agent_r1.rollout.vllm_scratch import scratch_prefix, sweep_stale

    dead, alive = _dead_pid(), os.getpid()
    shm, tmp = tmp_path / "shm", tmp_path / "tmp"
    shm.mkdir(), tmp.mkdir()
    stale_file = shm / f"{scratch_prefix('weights', dead)}abc.safetensors"
    stale_folder = tmp / f"{scratch_prefix('vllm', dead)}xyz"
    live_file = shm / f"{scratch_prefix('weights', alive)}def.safetensors"
    other = shm / "someone-elses-file"
    stale_file.write_bytes(b"x" * 1024)
    stale_folder.mkdir()
    (stale_folder / "model.safetensors").write_bytes(b"y")
    live_file.write_bytes(b"z")
    other.write_bytes(b"w")
    removed = sweep_stale([shm, tmp])
    assert sorted(p.name for p in removed) == sorted([stale_file.name, stale_folder.name])
    assert not stale_file.exists() and not stale_folder.exists()
    assert live_file.exists() and other.exists()  # a live process's sync, and what is not ours


def test_the_names_written_carry_the_writers_pid():
    from agent_r1.rollout.vllm_scratch import owner_pid, scratch_prefix

    assert owner_pid(f"{scratch_prefix('weights')}k3j2.safetensors") == os.getpid()
    assert owner_pid("agent-r1-weights-notapid-x") is None and owner_pid("unrelated") is None
    # a writer in another pid namespace (another container on the same /dev/shm): not ours to judge
    assert owner_pid(f"agent-r1-weights-{_dead_pid()}@1-x.safetensors") is None
