"""DAPO's dynamic sampling (`algo.dynamic_sampling`, training/trainer.py): the filter on
hand-built groups, and an in-process trainer iteration that draws an extra round.

The Ray driver (synchronous and asynchronous) is held by tests/integration/test_dynamic_sampling_ray.py.
"""

from __future__ import annotations

import copy

import pytest

from agent_r1.config import load_config
from agent_r1.algos.advantages import informative, split_groups
from agent_r1.training.trainer import fill_batch
from agent_r1.training.trainer import PromptSampler
from agent_r1.trajectory import Trajectory, Turn

N = 2  # group size in the hand-built batches


def _cfg(**over):
    base = {"algo.dynamic_sampling.enabled": True, "train.prompts_per_iter": 3, "rollout.n_samples": N,
            "algo.dynamic_sampling.max_extra_rounds": 4}
    base.update(over)
    return load_config(None, base)


def _group(sid: str, *rewards: float) -> list[Trajectory]:
    return [Trajectory(sample_id=sid, prompt_ids=[1], outcome_reward=r) for r in rewards]


def _batch(*groups: list[Trajectory]) -> list[Trajectory]:
    return [t for g in groups for t in g]


def _ids(trajs):
    return [t.sample_id for t in trajs][::N]


class Rounds:
    """`more(round)` over a PromptSampler: each prompt's rewards come from `rewards[id]`."""

    def __init__(self, rewards: dict[str, tuple[float, ...]], seed: int = 0):
        self.rewards = rewards
        self.sampler = PromptSampler([{"id": k} for k in rewards], seed)
        self.calls: list[int] = []

    def draw(self, n: int) -> list[Trajectory]:
        return _batch(*(_group(s["id"], *self.rewards[s["id"]]) for s in self.sampler.next_batch(n)))

    def __call__(self, round: int) -> list[Trajectory]:
        self.calls.append(round)
        return self.draw(3)


def test_off_returns_the_batch_as_it_came():
    first = _batch(_group("a", 1, 1), _group("b", 0, 1))
    cfg = _cfg(**{"algo.dynamic_sampling.enabled": False})
    trajs, metrics = fill_batch(cfg, first, lambda r: pytest.fail("no extra round when off"))
    assert trajs is first and metrics == {}


def test_all_equal_groups_are_dropped_and_a_full_batch_needs_no_extra_round():
    first = _batch(_group("a", 0, 1), _group("b", 1, 0), _group("c", 0.5, 0.5))
    cfg = _cfg(**{"train.prompts_per_iter": 2})
    trajs, m = fill_batch(cfg, first, lambda r: pytest.fail("the batch is already full"))
    assert _ids(trajs) == ["a", "b"]
    assert m == {"dynamic/rounds": 1.0, "dynamic/prompts_sampled": 3.0, "dynamic/groups_kept": 2.0,
                 "dynamic/groups_dropped": 1.0, "dynamic/groups_trimmed": 0.0, "dynamic/fallback": 0.0}


def test_extra_rounds_are_drawn_until_full_then_trimmed_to_prompts_per_iter():
    # prompts p0..p8: the informative ones are those whose rewards differ
    rewards = {f"p{i}": ((0.0, 1.0) if i % 3 == 0 else (1.0, 1.0)) for i in range(9)}
    rewards.update({"p1": (0.0, 1.0), "p4": (0.2, 0.1)})  # 5 informative prompts of 9
    more = Rounds(rewards)
    first = more.draw(3)
    trajs, m = fill_batch(_cfg(), first, more)
    # the same draws by hand: rounds of 3 prompts from the same sampler until 3 groups are kept
    ref = PromptSampler([{"id": k} for k in rewards], 0)
    kept, rounds, dropped, seen = [], 0, 0, 0
    while len(kept) < 3:
        ids = [s["id"] for s in ref.next_batch(3)]
        rounds, seen = rounds + 1, seen + 3
        good = [i for i in ids if len(set(rewards[i])) > 1]
        dropped += len(ids) - len(good)
        kept += good
    assert rounds > 1, "the test needs a first round with a dropped group"
    assert more.calls == list(range(1, rounds))  # round numbers (their seeds) 1, 2, ...
    assert _ids(trajs) == kept[:3]  # rollout order, trimmed to exactly prompts_per_iter
    assert all(informative(g) for g in split_groups(trajs, N))
    assert m["dynamic/rounds"] == rounds and m["dynamic/prompts_sampled"] == seen
    assert m["dynamic/groups_kept"] == 3 and m["dynamic/groups_dropped"] == dropped
    assert m["dynamic/groups_trimmed"] == len(kept) - 3 and m["dynamic/fallback"] == 0
    assert more.sampler.state_dict() == ref.state_dict()  # the sampler moved as the rounds drew: exact resume


def test_the_cap_trains_on_what_was_kept():
    more = Rounds({f"p{i}": (1.0, 1.0) for i in range(6)})  # nothing informative to draw
    first = _batch(_group("a", 0, 1), _group("b", 1, 1), _group("c", 2, 2))
    trajs, m = fill_batch(_cfg(**{"algo.dynamic_sampling.max_extra_rounds": 2}), first, more)
    assert more.calls == [1, 2]
    assert _ids(trajs) == ["a"]
    assert m["dynamic/rounds"] == 3 and m["dynamic/prompts_sampled"] == 9
    assert m["dynamic/groups_kept"] == 1 and m["dynamic/groups_dropped"] == 8 and m["dynamic/fallback"] == 0
    assert more.sampler.state_dict() == {"epoch": 1, "offset": 0}


def test_no_group_survives_learns_from_round_0_and_says_so():
    first = _batch(_group("a", 1, 1), _group("b", 0, 0), _group("c", 0, 0))
    more = Rounds({"p": (0.0, 0.0)})
    trajs, m = fill_batch(_cfg(**{"algo.dynamic_sampling.max_extra_rounds": 1}), first, more)
    assert trajs is first
    assert m["dynamic/fallback"] == 1 and m["dynamic/groups_kept"] == 0 and m["dynamic/rounds"] == 2
    # max_extra_rounds 0: a filter only, no extra rollouts
    trajs, m = fill_batch(_cfg(**{"algo.dynamic_sampling.max_extra_rounds": 0}),
                          _batch(_group("a", 0, 1), _group("b", 0, 0), _group("c", 0, 0)), more)
    assert _ids(trajs) == ["a"] and m["dynamic/rounds"] == 1 and more.calls == [1]


def test_the_metric_score_counts_process_rewards_and_outcome_does_not():
    g = _group("a", 1.0, 1.0)
    g[0].turns.append(Turn(action_ids=[2], action_logprobs=[0.0], action_text="x", process_reward=0.1))
    assert informative(g, "score") and not informative(g, "outcome")
    assert informative(_group("b", 1.0)), "a group of one has nothing to compare: kept"


def test_groups_are_consecutive_chunks_of_one_prompt():
    same_prompt_twice = _batch(_group("a", 0, 1), _group("a", 1, 1))
    assert [len(g) for g in split_groups(same_prompt_twice, N)] == [2, 2]
    with pytest.raises(ValueError, match="mixes prompts"):
        split_groups(_batch(_group("a", 0), _group("b", 1)), N)
    with pytest.raises(ValueError, match="rollout.n_samples=2"):
        split_groups(_group("a", 0, 1, 2), N)


def test_config_names_the_key_and_needs_a_group_estimator():
    with pytest.raises(ValueError, match="algo.dynamic_sampling.enabled.*algo.adv_estimator='gae'"):
        load_config(None, {"algo.dynamic_sampling.enabled": True, "algo.adv_estimator": "gae"})
    with pytest.raises(ValueError, match="algo.dynamic_sampling.max_extra_rounds"):
        load_config(None, {"algo.dynamic_sampling.max_extra_rounds": -1})
    with pytest.raises(ValueError, match="algo.dynamic_sampling.metric"):
        load_config(None, {"algo.dynamic_sampling.metric": "acc"})
    assert not load_config(None, {}).algo.dynamic_sampling.enabled  # off by default


# --- the in-process trainer ---------------------------------------------------------------------
def test_trainer_iteration_draws_an_extra_round_and_trains_on_informative_groups(tiny_model, tmp_path,
                                                                                  monkeypatch):
    """Rewards forced by the prompt: 'flat' prompts score 0 on every trajectory, 'vary' prompts
    alternate 1, 0. Round 0 draws 2 of each; round 1 the other 4 (2 of each)."""
    import agent_r1.rollout.loop as loop
    from agent_r1.training.trainer import RLTrainer
    from tests.rollout_helpers import make_env_factory

    cfg = load_config(None, {
        "train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 4, "rollout.n_samples": 2,
        "rollout.max_turns": 1, "rollout.max_tokens_per_turn": 4, "train.ppo_epochs": 1, "train.minibatch_size": 8,
        "train.eval_every": 0, "train.threads": 1, "algo.dynamic_sampling.enabled": True})
    ids = [f"q{i}" for i in range(8)]
    order = [s["id"] for s in PromptSampler([{"id": i} for i in ids], cfg.seed).next_batch(8)]
    vary = {order[0], order[2], order[4], order[6]}
    samples = [{"id": i, "question": "Where was Karivo born?", "answers": ["vary" if i in vary else "flat"]}
               for i in ids]
    calls = iter(range(10_000))

    def forced(answer, golds, config):
        return float(next(calls) % 2) if golds == ["vary"] else 0.0

    monkeypatch.setattr(loop, "outcome_reward", forced)
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    trainer = RLTrainer(cfg, model, tok, make_env_factory("tag"), samples)
    m = trainer.train_step()
    assert m["dynamic/rounds"] == 2 and m["dynamic/prompts_sampled"] == 8
    assert m["dynamic/groups_dropped"] == 4 and m["dynamic/groups_kept"] == 4 and m["dynamic/fallback"] == 0
    trained = trainer.last_trajectories
    assert [t.sample_id for t in trained][::2] == [order[0], order[2], order[4], order[6]]
    assert all(informative(g) for g in split_groups(trained, 2))
    assert m["groups_all_equal"] == 0.0 and m["reward_mean"] == 0.5  # the usual metrics: the trained batch
    assert trainer.state_dict()["sampler"] == {"epoch": 1, "offset": 0}  # both rounds' prompts drawn


def test_resume_with_dynamic_sampling_equals_uninterrupted(tmp_path):
    """2 iterations, stop, resume to 3 == 3 straight: the extra rounds' prompts come from the saved
    sampler position and their seeds from (iteration, round)."""
    from agent_r1.runs.run import run_train
    from agent_r1.tracking.metrics import read_metrics
    from tests.pipeline_helpers import resume_run_overrides

    common = {**resume_run_overrides(tmp_path), "algo.adv_estimator": "grpo", "algo.kl_coef": 0.0,
              "algo.dynamic_sampling.enabled": True, "reward.overlong_buffer": 768}
    run_train(load_config(None, {**common, "train.iterations": 3, "train.out_dir": str(tmp_path / "a")}))
    run_train(load_config(None, {**common, "train.iterations": 2, "train.out_dir": str(tmp_path / "b")}))
    run_train(load_config(None, {**common, "train.iterations": 3, "train.out_dir": str(tmp_path / "b")}), resume=True)
    a = read_metrics(tmp_path / "a" / "metrics.jsonl")[1:]
    b = read_metrics(tmp_path / "b" / "metrics.jsonl")[1:]
    assert any(m["dynamic/rounds"] > 1 for m in a)
    keys = ("dynamic/rounds", "dynamic/prompts_sampled", "dynamic/groups_kept", "reward_mean", "response_length")
    assert [[m[k] for k in keys] for m in a] == [[m[k] for k in keys] for m in b]
    assert [m["policy_loss"] for m in a] == pytest.approx([m["policy_loss"] for m in b], abs=1e-6)
