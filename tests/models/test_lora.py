"""LoRA through peft (model.lora): adapters only are trainable, the reference is the base with
adapters off, adapter checkpoints reload, a merged export loads in transformers and matches."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.models.lora import LoraConfig, apply_lora, reference_context

TARGETS = ("q_proj", "v_proj", "down_proj")


def _adapted(tiny_model, r: int = 4):
    """A copy of the tiny model with adapters whose B matrices are random, so the adapted
    policy really differs from its base (peft starts B at zero)."""
    base = copy.deepcopy(tiny_model[0]).eval()
    model = apply_lora(copy.deepcopy(base), LoraConfig(r=r, alpha=8, target_modules=TARGETS))
    torch.manual_seed(1)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    return base, model.eval()


def _ids(tokenizer):
    return torch.tensor([tokenizer.encode("Who founded the city of Duba? <search>Duba</search>")])


def test_only_adapter_parameters_are_trainable(tiny_model):
    _, model = _adapted(tiny_model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_A" in n or "lora_B" in n for n in trainable)
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trainable} == set(TARGETS)
    frozen_before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    ids = _ids(tiny_model[1])
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    assert all(torch.equal(p, frozen_before[n]) for n, p in model.named_parameters() if not p.requires_grad)


def test_r0_is_full_fine_tuning(tiny_model):
    model = copy.deepcopy(tiny_model[0])
    assert apply_lora(model, LoraConfig(r=0)) is model
    with pytest.raises(TypeError, match="model.lora.r > 0"):
        with reference_context(model):
            pass


def test_reference_context_gives_the_base_logits(tiny_model):
    base, model = _adapted(tiny_model)
    ids = _ids(tiny_model[1])
    with torch.no_grad():
        want = base(input_ids=ids).logits
        adapted = model(input_ids=ids).logits
        with reference_context(model) as ref:
            reference = ref(input_ids=ids).logits
        after = model(input_ids=ids).logits
    assert (adapted - want).abs().max() > 1e-3  # the adapters do change the policy
    torch.testing.assert_close(reference, want, rtol=0, atol=1e-6)
    torch.testing.assert_close(after, adapted, rtol=0, atol=0)  # adapters are back on after the block


def test_a_target_module_the_model_lacks_lists_its_linear_layers(tiny_model):
    model = copy.deepcopy(tiny_model[0])
    with pytest.raises(ValueError, match=r"model.lora.target_modules.*\['c_attn'\].*'down_proj'.*'q_proj'"):
        apply_lora(model, LoraConfig(r=4, target_modules=("q_proj", "c_attn")))


def test_bad_lora_settings_name_the_key():
    from agent_r1.config import load_config

    with pytest.raises(ValueError, match=r"model.lora.r=-1"):
        load_config(None, {"model.lora.r": -1})
    with pytest.raises(ValueError, match=r"model.lora.target_modules is empty"):
        load_config(None, {"model.lora.r": 8, "model.lora.target_modules": []})
    cfg = load_config(None, {"model.lora.r": 8, "model.lora.target_modules": ["q_proj"]})
    assert (cfg.model.lora.r, cfg.model.lora.target_modules) == (8, ("q_proj",))


def test_adapter_checkpoint_reloads_and_merged_export_matches(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    from agent_r1.cli import main
    from agent_r1.models.build import load_model, save_model
    from agent_r1.models.lora import has_adapters, save_adapter, set_adapter_base

    base, model = _adapted(tiny_model)
    tokenizer = tiny_model[1]
    save_model(base, tokenizer, tmp_path / "base")
    set_adapter_base(model, tmp_path / "base")
    ckpt_root = tmp_path / "checkpoints"
    save_adapter(model, tokenizer, ckpt_root / "iter_000003")
    (ckpt_root / "latest").write_text("iter_000003")
    assert not (ckpt_root / "iter_000003" / "model.safetensors").exists()  # adapters only, not a base copy

    ids = _ids(tokenizer)
    with torch.no_grad():
        adapted = model(input_ids=ids).logits
    reloaded, _ = load_model(ckpt_root / "iter_000003")  # what resume calls
    assert has_adapters(reloaded)
    assert {n for n, p in reloaded.named_parameters() if p.requires_grad} == {
        n for n, p in model.named_parameters() if p.requires_grad}
    with torch.no_grad():
        torch.testing.assert_close(reloaded.eval()(input_ids=ids).logits, adapted, rtol=0, atol=1e-6)

    out = tmp_path / "merged"
    assert main(["export", "--merge", "--checkpoint", str(ckpt_root), "--out", str(out)]) == 0
    assert not (out / "adapter_config.json").exists() and not (out / "state.pt").exists()
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, adapted, rtol=0, atol=1e-5)


def test_an_adapter_folder_with_its_own_tokenizer_loads_one_tokenizer(tiny_model, tmp_path, monkeypatch):
    """The run's tokenizer saved beside the adapters is the one used, and the base's is not loaded
    too: with Qwen2.5's 151,936-token vocabulary each load takes seconds."""
    from transformers import AutoTokenizer

    from agent_r1.models.build import load_model, save_model
    from agent_r1.models.lora import save_adapter, set_adapter_base

    base, model = _adapted(tiny_model)
    tokenizer = tiny_model[1]
    save_model(base, tokenizer, tmp_path / "base")
    set_adapter_base(model, tmp_path / "base")
    save_adapter(model, tokenizer, tmp_path / "adapter")
    loaded_from = []
    real = AutoTokenizer.from_pretrained.__func__

    def counted(cls, path, *args, **kwargs):
        loaded_from.append(str(path))
        return real(cls, path, *args, **kwargs)

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", classmethod(counted))
    _, loaded = load_model(tmp_path / "adapter")
    assert loaded_from == [str(tmp_path / "adapter")]
    assert loaded.get_vocab() == tokenizer.get_vocab()
