"""Config: params.yaml maps onto typed dataclasses; bad input fails at start with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_r1.config import load_config, parse_overrides

REPO = Path(__file__).resolve().parents[2]


def test_project_params_file_loads():
    cfg = load_config(REPO / "params.yaml")
    assert cfg.algo.adv_estimator == "grpo" and cfg.rollout.n_samples >= 2
    assert isinstance(cfg.data.question_types, tuple)


def test_overrides_are_typed():
    cfg = load_config(None, parse_overrides(["train.lr=1e-4", "algo.loss_mask=false", "rollout.max_turns=3"]))
    assert cfg.train.lr == 1e-4 and cfg.algo.loss_mask is False and cfg.rollout.max_turns == 3


@pytest.mark.parametrize(
    "override, message",
    [
        ({"train.lrr": 1}, r"unknown config key\(s\) \['train.lrr'\]"),
        ({"nosuch.key": 1}, r"unknown config key\(s\) \['nosuch'\]"),
        ({"train.lr": "fast"}, r"'train.lr': expected float"),
        ({"train.iterations": 2.5}, r"'train.iterations': expected an integer"),
        ({"algo.loss_mask": "maybe"}, r"'algo.loss_mask': expected true/false"),
        ({"train.lr": -0.1}, r"train.lr must be in \(0, 10\]"),
        ({"rollout.n_samples": 1}, r"rollout.n_samples >= 2"),
        ({"algo.adv_estimator": "ppo2"}, r"algo.adv_estimator='ppo2'; choose one of"),
        ({"rollout.max_turns": 0}, r"rollout.max_turns must be >= 1"),
        ({"reward.metric": "bleu"}, r"reward.metric='bleu'"),
        ({"env.format": "xml"}, r"env.format='xml'"),
    ],
)
def test_bad_config_names_the_key(override, message):
    with pytest.raises(ValueError, match=message):
        load_config(None, override)


def test_missing_params_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="--params"):
        load_config(tmp_path / "nope.yaml")


def test_override_syntax_error():
    with pytest.raises(ValueError, match="section.key=value"):
        parse_overrides(["train.lr"])
