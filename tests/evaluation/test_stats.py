"""The two-level bootstrap behind the paper table's confidence intervals."""

import numpy as np
import pytest

from agent_r1.evaluation.stats import mean_ci, paired_difference_ci


def test_interval_brackets_the_mean_and_shrinks_with_more_questions():
    rng = np.random.default_rng(1)
    small = [rng.binomial(1, 0.4, 50) for _ in range(3)]
    large = [rng.binomial(1, 0.4, 2000) for _ in range(3)]
    a, b = mean_ci(small), mean_ci(large)
    assert a.low <= a.mean <= a.high and b.low <= b.mean <= b.high
    assert (b.high - b.low) < (a.high - a.low) / 3


def test_constant_scores_have_a_zero_width_interval():
    ci = mean_ci([[1.0] * 10, [1.0] * 10])
    assert (ci.mean, ci.low, ci.high) == (1.0, 1.0, 1.0)


def test_seed_to_seed_spread_widens_the_interval():
    # the same questions, but one seed learned and two did not: the interval must cover that doubt
    agree = [[1, 0] * 50] * 3
    disagree = [[1] * 100, [0] * 100, [1, 0] * 50]
    assert mean_ci(agree).mean == mean_ci(disagree).mean == 0.5
    d = mean_ci(disagree)
    assert d.high - d.low > 2 * (mean_ci(agree).high - mean_ci(agree).low)


def test_paired_difference_sees_a_consistent_gain_that_unpaired_noise_would_hide():
    rng = np.random.default_rng(0)
    base = [rng.binomial(1, 0.5, 100) for _ in range(3)]
    better = [np.maximum(r, rng.binomial(1, 0.1, 100)) for r in base]  # never worse, sometimes better
    diff = paired_difference_ci(better, base)
    assert diff.mean > 0 and diff.excludes_zero()
    same = paired_difference_ci(base, base)
    assert (same.low, same.high) == (0.0, 0.0) and not same.excludes_zero()


def test_bad_tables_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="same number of questions"):
        mean_ci([[1, 0], [1]])
    with pytest.raises(ValueError, match="differ in shape"):
        paired_difference_ci([[1, 0]], [[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="at least one seed"):
        mean_ci([])
