"""`ray.engine` renamed to `rollout.engine` (agent_r1/config.py move_renamed_keys): a params file or a run's
config.json written before loads, and the key acts as it did: with Ray it chose the workers' engine, so its
value becomes rollout.engine; without Ray it did nothing and is dropped, with a warning."""

from __future__ import annotations

import json
import warnings

import pytest

from agent_r1.config import ExperimentConfig, load_config


def old_tree(**sections):
    tree = json.loads(json.dumps(ExperimentConfig().to_dict()))
    tree["rollout"]["engine"] = "transformers"  # rollout.engine's default before the rename
    tree["ray"]["engine"] = "auto"  # ray.engine's: every config.json before the rename holds both
    for name, values in sections.items():
        tree[name].update(values)
    return tree


def test_an_old_run_folders_config_with_the_old_defaults_loads_without_a_word():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(tree=old_tree())
    assert cfg.rollout.engine == "transformers" and not hasattr(cfg.ray, "engine")


def test_an_old_gpu_ray_runs_config_keeps_its_workers_engine():
    with pytest.warns(UserWarning, match="in place of rollout.engine='transformers'"):
        cfg = load_config(tree=old_tree(ray={"enabled": True, "engine": "vllm"}))
    assert cfg.rollout.engine == "vllm" and cfg.ray.enabled is True


def test_a_set_old_key_with_ray_moves_to_the_new_one_and_says_so():
    with pytest.warns(UserWarning, match="ray.engine is renamed to rollout.engine"):
        cfg = load_config(overrides={"ray.engine": "transformers", "ray.enabled": "true"})
    assert cfg.rollout.engine == "transformers"


def test_without_ray_the_old_key_is_dropped_as_it_did_nothing():
    with pytest.warns(UserWarning, match="ray.engine='vllm' is ignored: .* ray.enabled is off"):
        cfg = load_config(overrides={"ray.engine": "vllm", "rollout.engine": "transformers"})
    assert cfg.rollout.engine == "transformers"


def test_a_bad_value_under_the_old_key_fails_on_the_new_one():
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="rollout.engine"):
        load_config(overrides={"ray.engine": "tgi", "ray.enabled": True})
