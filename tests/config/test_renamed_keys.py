"""Renamed keys (agent_r1/config.py RENAMED_KEYS): a params file or a run's config.json written before a
rename still loads, with the value moved to the new key, and a contradiction is refused."""

from __future__ import annotations

import json
import warnings

import pytest

from agent_r1.config import ExperimentConfig, load_config


def test_an_old_run_folders_config_with_the_old_default_loads_without_a_word():
    tree = json.loads(json.dumps(ExperimentConfig().to_dict()))
    tree["ray"]["engine"] = "auto"  # what every config.json before the rename holds
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(tree=tree)
    assert cfg.rollout.engine == "auto" and not hasattr(cfg.ray, "engine")


def test_a_set_old_key_moves_to_the_new_one_and_says_so():
    with pytest.warns(UserWarning, match="ray.engine is renamed to rollout.engine"):
        cfg = load_config(overrides={"ray.engine": "transformers", "ray.enabled": True})
    assert cfg.rollout.engine == "transformers" and cfg.ray.enabled is True


def test_the_same_value_under_both_keys_is_one_choice():
    with pytest.warns(UserWarning):
        cfg = load_config(overrides={"ray.engine": "vllm", "rollout.engine": "vllm"})
    assert cfg.rollout.engine == "vllm"


def test_two_different_choices_are_refused_naming_both_keys():
    with pytest.raises(ValueError, match=r"ray.engine='vllm' and rollout.engine='transformers'.*keep only rollout.engine"):
        load_config(overrides={"ray.engine": "vllm", "rollout.engine": "transformers"})


def test_a_bad_value_under_the_old_key_fails_on_the_new_one():
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="rollout.engine"):
        load_config(overrides={"ray.engine": "tgi"})
