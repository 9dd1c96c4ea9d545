"""The whole pipeline on a hub-style Qwen2.5 stand-in (real 151,936-token vocabulary, its chat
template, native hermes tool calls), through the CLI as a user runs it: SFT, RL with LoRA + bf16 +
micro-batches, evaluation of the checkpoint, and a merged export that transformers loads."""

from __future__ import annotations

import json

import pytest
import torch

from agent_r1.cli import main
from tests.pipeline_helpers import write_micro_params
from tests.qwen_helpers import qwen_dir  # noqa: F401  (a session fixture)


@pytest.mark.slow
def test_sft_rl_lora_bf16_eval_export_on_a_qwen_folder(qwen_dir, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    params = write_micro_params(tmp_path / "params.yaml", root=tmp_path)
    common = ["--params", str(params), "--set", f"model.name_or_path={qwen_dir}", "--set", "env.format=hermes",
              "--set", "sft.steps=2", "--set", "sft.batch_size=4", "--set", "train.device=cpu",
              "--set", "train.eval_every=0", "--set", "train.eval_size=2", "--set", "train.prompts_per_iter=2"]
    assert main(["sft", *common]) == 0
    sft_model = tmp_path / "runs" / "sft" / "model"
    assert (sft_model / "tokenizer.json").exists()
    assert main(["train", *common, "--set", "model.lora.r=4", "--set", "train.precision=bf16",
                 "--set", "train.micro_batch_size=2", "--set", "algo.kl_coef=0.01",
                 "--set", "algo.skip_zero_advantage=false",  # a KL loss term: zero-advantage rows have gradients
                 "--set", "rollout.temperature=0.7"]) == 0
    run = tmp_path / "runs" / "default"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in metrics if m.get("step", 0) > 0]
    assert len(trained) == 2 and all("rollout/logprob_diff_max" in m for m in trained)
    latest = run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()
    assert (latest / "adapter_config.json").exists()  # a LoRA checkpoint holds the adapter, not the base
    report = tmp_path / "eval.json"
    assert main(["eval", "--model", str(latest), "--mode", "agent", "--params", str(params),
                 "--set", "env.format=hermes", "--questions", str(tmp_path / "data" / "synthetic" / "test.jsonl"),
                 "-n", "2", "--device", "cpu", "--json", str(report)]) == 0
    assert report.exists()
    merged = tmp_path / "merged"
    assert main(["export", "--merge", "--checkpoint", str(run / "checkpoints"), "--out", str(merged)]) == 0
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(merged))
    assert model.config.vocab_size == 151_936
    assert torch.isfinite(model(input_ids=torch.tensor([[151644, 872, 198]])).logits).all()
