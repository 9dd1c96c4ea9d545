"""Inverse-CDF token draws (agent_r1.rollout.sampling.draw): the distribution asked for, nothing
outside it, reproducible with a seed, and a clear error on a broken distribution."""

from __future__ import annotations

import pytest
import torch

from agent_r1.rollout.sampling import draw


def test_draws_follow_the_distribution_and_never_a_zero_probability_token():
    probs = torch.tensor([0.5, 0.0, 0.25, 0.15, 0.1, 0.0]) * 3.0  # unnormalised rows are fine
    rows = probs.expand(20000, -1)
    tokens = draw(rows, torch.Generator().manual_seed(0))
    freq = torch.bincount(tokens, minlength=6).double() / len(tokens)
    assert freq[1] == 0 and freq[5] == 0
    # binomial standard error at 20k draws is <= 0.0036: 0.015 is over 4 of them
    assert torch.allclose(freq, (probs / probs.sum()).double(), atol=0.015), freq


def test_a_seed_repeats_the_draws():
    probs = torch.softmax(torch.randn(64, 1000, generator=torch.Generator().manual_seed(1)), -1)
    a = draw(probs, torch.Generator().manual_seed(5))
    b = draw(probs, torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and a.shape == (64,) and int(a.max()) < 1000


def test_a_broken_distribution_is_an_error():
    probs = torch.tensor([[0.2, 0.8], [float("nan"), 1.0]])
    with pytest.raises(ValueError, match="no finite probability mass"):
        draw(probs)
