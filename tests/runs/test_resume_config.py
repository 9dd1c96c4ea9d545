"""`--resume` continues the run its folder holds: a config that differs from the folder's own
config.json in what the run trains (algorithm, seed, data, format, model, rewards) is refused,
naming each key and both values, unless asked for (`--allow-config-change`). Settings that change
only how long, where or how fast it runs (iterations, evaluation, workers, paths) may differ."""

from __future__ import annotations

import pytest

from agent_r1.config import load_config
from agent_r1.training.checkpoint import NoCheckpointError


def _base(tmp_path) -> dict:
    return {"train.out_dir": str(tmp_path / "run"), "train.runs_dir": str(tmp_path / "runs"),
            "data.dir": str(tmp_path / "data"), "search.index_dir": str(tmp_path / "index")}


def _opened(tmp_path):
    from agent_r1.runs.run import Run

    return Run.open(load_config(None, _base(tmp_path)), resolve_start=False, log=lambda *a: None)


@pytest.mark.parametrize("changes, keys", [
    ({"algo.adv_estimator": "rloo"}, ["algo.adv_estimator"]),
    ({"seed": 7, "env.format": "hermes", "data.n_people": 90}, ["seed", "env.format", "data.n_people"]),
    ({"reward.format_penalty": -0.5}, ["reward.format_penalty"]),
])
def test_a_resume_under_another_config_is_refused_naming_the_keys(tmp_path, changes, keys):
    from agent_r1.runs.run import Run

    _opened(tmp_path)
    with pytest.raises(ValueError) as info:
        Run.open(load_config(None, {**_base(tmp_path), **changes}), resume=True, resolve_start=False)
    message = str(info.value)
    assert "--resume" in message and "--allow-config-change" in message
    for key in keys:
        assert key in message, (key, message)


def test_changes_that_keep_the_run_the_same_pass_and_asked_changes_pass(tmp_path):
    from agent_r1.runs.run import Run

    _opened(tmp_path)
    same_run = {"train.iterations": 80, "train.eval_every": 5, "train.threads": 1, "ray.num_workers": 2,
                "train.keep_checkpoints": 5, "search.timeout_s": 60}
    with pytest.raises(NoCheckpointError):  # past the comparison: only the checkpoint is missing
        Run.open(load_config(None, {**_base(tmp_path), **same_run}), resume=True, resolve_start=False)
    with pytest.raises(NoCheckpointError):
        Run.open(load_config(None, {**_base(tmp_path), "algo.adv_estimator": "rloo"}), resume=True,
                 resolve_start=False, allow_config_change=True)


def test_the_cli_refuses_a_bare_resume_under_another_algorithm(tmp_path, capsys):
    from agent_r1.cli import main

    _opened(tmp_path)
    sets = [a for k, v in _base(tmp_path).items() for a in ("--set", f"{k}={v}")]
    assert main(["train", "--no-mlflow", *sets, "--set", "algo.adv_estimator=rloo", "--resume"]) == 2
    assert "algo.adv_estimator" in capsys.readouterr().err
    assert main(["train", "--no-mlflow", *sets, "--set", "algo.adv_estimator=rloo", "--resume",
                 "--allow-config-change"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
