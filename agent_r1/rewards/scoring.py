"""Outcome, format and process rewards.

The outcome reward is a function of the answer text the model itself generated and the gold
answers; it never receives tool output. Process rewards are computed by the env per step and
placed by the trajectory at the token that closed that action.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_r1.rewards.qa import exact_match, f1_score, numeric_match, substring_match

AnswerMetric = Callable[[str, Sequence[str]], float]
ANSWER_METRICS: dict[str, AnswerMetric] = {
    "em": exact_match,
    "f1": f1_score,
    "substring": substring_match,
    "numeric": numeric_match,  # the last number in the answer equals a gold number
}


#: How lenient each metric is (0 = all or nothing on the normalised answer; higher gives credit for
#: less): a data row may switch to a metric no more lenient than the run's (envs/tool_env.py). A metric
#: registered without one counts as the most lenient, so rows can pick it only in runs that use it.
METRIC_LENIENCY: dict[str, int] = {"em": 0, "numeric": 0, "f1": 1, "substring": 2}
MOST_LENIENT = 2


def metric_leniency(name: str) -> int:
    return METRIC_LENIENCY.get(name, MOST_LENIENT)


def register_answer_metric(name: str, leniency: int = MOST_LENIENT) -> Callable[[AnswerMetric], AnswerMetric]:
    """Decorator: `@register_answer_metric("my_metric") def score(answer, golds) -> float`;
    then `reward.metric: my_metric` (or a sample's env {"reward": {"metric": "my_metric"}}, in a run whose
    metric is at least as lenient: see METRIC_LENIENCY)."""

    def wrap(fn: AnswerMetric) -> AnswerMetric:
        if name in ANSWER_METRICS and ANSWER_METRICS[name] is not fn:
            if getattr(ANSWER_METRICS[name], "__qualname__", None) != fn.__qualname__:
                raise ValueError(f"answer metric {name!r} is already registered by {ANSWER_METRICS[name]!r}")
        ANSWER_METRICS[name] = fn
        METRIC_LENIENCY.setdefault(name, leniency)
        return fn

    return wrap


@dataclass
class RewardConfig:
    metric: str = "em"  # one of ANSWER_METRICS
    format_penalty: float = 0.0  # added (use a negative value) when no <answer> was given
    process_reward: bool = True  # ablation switch: off drops every process reward
    valid_call_reward: float = 0.0  # per well-formed, successfully executed tool call
    retrieval_hit_reward: float = 0.0  # first retrieval of each supporting document
    max_process_reward: float = 1.0  # cap per trajectory, so tool spam cannot farm reward

    def __post_init__(self) -> None:
        if self.metric not in ANSWER_METRICS:
            raise ValueError(f"reward.metric={self.metric!r}; choose one of {sorted(ANSWER_METRICS)}")
        # NaN or inf here poisons every reward until the loss is NaN (Python's JSON reader accepts
        # NaN in a data row); the allowed ranges are checked with the config (config.LIMITS)
        for key in ("format_penalty", "valid_call_reward", "retrieval_hit_reward", "max_process_reward"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"reward.{key} must be a finite number (got {value!r})")


def outcome_reward(answer: str | None, golds: Sequence[str], config: RewardConfig) -> float:
    """Score of the model's own final answer; `format_penalty` when it gave none."""
    if answer is None:
        return config.format_penalty
    return ANSWER_METRICS[config.metric](answer, golds)


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
