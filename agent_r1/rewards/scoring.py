"""Outcome, format and process rewards.

The outcome reward is a function of the answer text the model itself generated and the gold
answers; it never receives tool output. Process rewards are computed by the env per step and
placed by the trajectory at the token that closed that action.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_r1.registry import Registry
from agent_r1.rewards.qa import exact_match, f1_score, numeric_match, substring_match

AnswerMetric = Callable[[str, Sequence[str]], float]
MOST_LENIENT = 2


@dataclass(frozen=True)
class MetricTraits:
    """How lenient a metric is (0 = all or nothing on the normalised answer; higher gives credit for
    less): a data row may switch to a metric no more lenient than the run's (envs/tool_env.py). A metric
    registered without one counts as the most lenient, so rows can pick it only in runs that use it."""

    leniency: int = MOST_LENIENT


#: `reward.metric` (or a row's env.reward.metric) -> fn(answer, golds) -> float
ANSWER_METRICS: Registry[AnswerMetric, MetricTraits] = Registry(
    "answer metric", key="reward.metric", where="agent_r1.rewards.scoring.ANSWER_METRICS", traits=MetricTraits,
    plugins="agent_r1.answer_metrics")
ANSWER_METRICS.register("em", exact_match, leniency=0)
ANSWER_METRICS.register("f1", f1_score, leniency=1)
ANSWER_METRICS.register("substring", substring_match, leniency=2)
ANSWER_METRICS.register("numeric", numeric_match, leniency=0)  # the last number in the answer equals a gold number


def metric_leniency(name: str) -> int:
    return ANSWER_METRICS.traits(name).leniency if name in ANSWER_METRICS else MOST_LENIENT


def register_answer_metric(name: str, leniency: int = MOST_LENIENT) -> Callable[[AnswerMetric], AnswerMetric]:
    """Decorator: `@register_answer_metric("my_metric") def score(answer, golds) -> float`;
    then `reward.metric: my_metric` (or a sample's env {"reward": {"metric": "my_metric"}}, in a run whose
    metric is at least as lenient: see MetricTraits). Shorthand for `@ANSWER_METRICS.register(name,
    leniency=...)` that also lets a re-run cell (a function of the same qualified name) replace itself."""

    def wrap(fn: AnswerMetric) -> AnswerMetric:
        held = ANSWER_METRICS.get(name)
        itself = held is not None and getattr(held, "__qualname__", None) == getattr(fn, "__qualname__", "")
        return ANSWER_METRICS.register(name, fn, replace=itself, leniency=leniency)

    return wrap


@dataclass
class RewardConfig:
    metric: str = "em"  # one of ANSWER_METRICS
    format_penalty: float = 0.0  # added (use a negative value) when no <answer> was given
    process_reward: bool = True  # ablation switch: off drops every process reward
    valid_call_reward: float = 0.0  # per well-formed, successfully executed tool call
    retrieval_hit_reward: float = 0.0  # first retrieval of each supporting document
    max_process_reward: float = 1.0  # cap per trajectory, so tool spam cannot farm reward
    # DAPO's soft overlong punishment (`overlong_reward`): the last `overlong_buffer` tokens before
    # rollout.max_total_tokens cost up to `overlong_penalty`, linearly (0 = off)
    overlong_buffer: int = 0
    overlong_penalty: float = 1.0

    def __post_init__(self) -> None:
        ANSWER_METRICS.check(self.metric, "reward.metric")
        # NaN or inf here poisons every reward until the loss is NaN (Python's JSON reader accepts
        # NaN in a data row); the allowed ranges are checked with the config (config.LIMITS)
        for key in ("format_penalty", "valid_call_reward", "retrieval_hit_reward", "max_process_reward",
                    "overlong_penalty"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"reward.{key} must be a finite number (got {value!r})")


def outcome_reward(answer: str | None, golds: Sequence[str], config: RewardConfig) -> float:
    """Score of the model's own final answer; `format_penalty` when it gave none."""
    if answer is None:
        return config.format_penalty
    return ANSWER_METRICS[config.metric](answer, golds)


def overlong_reward(length: int, max_length: int, config: RewardConfig) -> float:
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13): 0 up to `max_length - buffer`
    tokens, then linearly down to `-overlong_penalty` at `max_length`, and `-overlong_penalty` beyond.

    In a multi-turn rollout `length` is the trajectory's total tokens (prompt, actions and
    observations) and `max_length` is rollout.max_total_tokens: that is the budget whose hit cuts
    an episode short (rollout/loop.py), the analogue of DAPO's maximum response length. The
    prompt is the same for every trajectory of a group, so what the group estimators compare is
    how much room each trajectory's own turns took (actions, and the observations its calls asked
    for). An action cut by the per-turn budget (rollout.max_tokens_per_turn) is a separate matter:
    rollout.mask_truncated_turns leaves it out of the loss."""
    buffer = config.overlong_buffer
    if buffer <= 0:
        return 0.0
    over = length - (max_length - buffer)
    if over <= 0:
        return 0.0
    return -config.overlong_penalty * min(over / buffer, 1.0)


def step_process_reward(
    valid_calls: int,
    retrieved_titles: Sequence[str],
    supporting_titles: set[str],
    already_found: set[str],
    config: RewardConfig,
) -> float:
    """Process reward of one step. Updates `already_found` with newly retrieved supports."""
    if not config.process_reward:
        return 0.0
    reward = config.valid_call_reward * valid_calls
    new_hits = (set(retrieved_titles) & supporting_titles) - already_found
    already_found.update(new_hits)
    reward += config.retrieval_hit_reward * len(new_hits)
    return reward
