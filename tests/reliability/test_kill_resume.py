"""A training process killed with SIGKILL resumes from its last complete checkpoint with no
step lost or logged twice (the 10-kill version is benchmarks/kill_resume.py)."""

from __future__ import annotations

from agent_r1.training.killtest import kill_and_resume


def micro_overrides(tmp_path):
    return {"data.dir": str(tmp_path / "data"), "search.index_dir": str(tmp_path / "index"),
            "train.out_dir": str(tmp_path / "run"), "train.runs_dir": str(tmp_path / "runs"),  # digest cache too
            "data.n_people": 60, "model.hidden_size": 32,
            "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64, "model.vocab_size": 300,
            "train.iterations": 6, "train.checkpoint_every": 1, "train.prompts_per_iter": 4,
            "rollout.n_samples": 2, "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 6,
            "train.eval_every": 0, "train.eval_size": 2, "train.threads": 1, "train.init_from": ""}


def test_sigkill_mid_run_then_resume(tmp_path):
    # killed shortly after iteration 2 was logged: inside iteration 3 (rollout, update or the
    # checkpoint write), whatever the machine's speed
    result = kill_and_resume(micro_overrides(tmp_path), iterations=6, kill_after_s=0.3, after_step=2)
    assert result.killed, "the run ended before the kill: the test would prove nothing"
    assert result.resumed_ok, result
    assert result.final_iteration == 6
    assert result.steps_logged[-6:] == [1, 2, 3, 4, 5, 6]
