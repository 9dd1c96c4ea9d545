"""configs/paper/*.yaml: the Agent-R1 paper's Table 3 recipe as presets.

Every preset loads through `load_config` and holds the paper's values (written out here, not read
from configs/make.py, so a wrong value in the generator fails); each is params.yaml plus a
few keys, and the committed files are exactly what make.py writes (no drift)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_r1.config import load_config
from tests.module_loader import load_script

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "configs" / "paper"

# preset -> (advantage estimator, samples per question, advantage mask, loss mask)
EXPECTED = {
    "ppo": ("gae", 1, True, True),
    "grpo": ("grpo", 5, True, True),
    "reinforce_pp": ("reinforce_pp", 1, True, True),
    "reinforce_pp_baseline": ("reinforce_pp_baseline", 5, True, True),
    "rloo": ("rloo", 5, True, True),
    "ppo_advantage_mask_off": ("gae", 1, False, True),
    "ppo_advantage_mask_off_loss_mask_off": ("gae", 1, False, False),
}


def _make_module() -> Any:
    return load_script(ROOT / "configs" / "make.py", "paper_make")


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def test_every_expected_preset_is_there_and_no_other():
    assert sorted(p.stem for p in PAPER.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_holds_the_papers_values(name):
    c = load_config(PAPER / f"{name}.yaml")
    estimator, n, adv_mask, loss_mask = EXPECTED[name]
    assert c.model.name_or_path == "Qwen/Qwen2.5-3B-Instruct"
    assert c.train.init_from == ""  # RL from the instruct model itself, not a local SFT folder
    assert (c.env.format, list(c.env.tools), c.search.k) == ("hermes", ["search"], 5)
    assert c.data.dir == "data/hotpotqa_2wiki" and c.data.source == "hotpotqa_2wiki"
    # reward: EM when an answer is given, else format score 0 minus 1
    assert (c.reward.metric, c.reward.format_penalty) == ("em", -1.0)
    assert (c.algo.adv_estimator, c.rollout.n_samples) == (estimator, n)
    assert (c.algo.advantage_mask, c.algo.loss_mask) == (adv_mask, loss_mask)
    assert (c.train.lr, c.algo.critic_lr, c.algo.kl_coef) == (1e-6, 1e-5, 0.001)
    # batch 128 questions, mini-batch 64 questions (our mini-batches count trajectories: 64 x n)
    assert (c.train.prompts_per_iter, c.train.minibatch_size) == (128, 64 * n)
    assert c.rollout.max_turns == 4
    assert (c.train.precision, c.model.gradient_checkpointing) == ("bf16", True)
    assert 0 < c.train.micro_batch_size <= c.train.minibatch_size
    assert c.rollout.top_p == 1.0 and c.rollout.top_k == 0  # the trainer can only train untruncated sampling


def test_presets_are_params_yaml_plus_a_few_keys():
    base = _flatten(yaml.safe_load((ROOT / "params.yaml").read_text()))
    make = _make_module()
    for name in EXPECTED:
        preset = _flatten(yaml.safe_load((PAPER / f"{name}.yaml").read_text()))
        changed = {k for k in set(base) | set(preset) if base.get(k, object()) != preset.get(k, object())}
        assert changed <= set(make.preset_keys(name)), (name, sorted(changed - set(make.preset_keys(name))))
        assert set(base) <= set(preset), name  # nothing of params.yaml is dropped (DVC reads every key)
        assert len(changed) <= 40, (name, len(changed))


def test_committed_presets_are_what_make_py_writes(capsys):
    assert _make_module().main(["--check"]) == 0, capsys.readouterr().err
