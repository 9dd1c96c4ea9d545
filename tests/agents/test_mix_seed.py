"""`mix_seed` (agent_r1/sampling.py): the seeds of a seeded agent rollout's sessions (agents/rollout.py) and
of a seeded session's calls (agents/endpoint.py). The values are pinned: a changed stride or formula would
change every seeded rollout, and runs compared across versions would no longer repeat."""

from __future__ import annotations

from agent_r1.sampling import CALL_SEED_STRIDE, SESSION_SEED_STRIDE, mix_seed


def test_the_strides_and_values_are_the_ones_seeded_rollouts_were_drawn_with():
    assert (SESSION_SEED_STRIDE, CALL_SEED_STRIDE) == (1_000_003, 1_000_033)
    assert mix_seed(3, 1, SESSION_SEED_STRIDE) == 3 * 1_000_003 + 1
    assert mix_seed(3, 1, CALL_SEED_STRIDE) == 3 * 1_000_033 + 1
    assert mix_seed(0, 7, CALL_SEED_STRIDE) == 7


def test_a_seed_stays_within_63_bits():
    assert mix_seed(2**62, 5, CALL_SEED_STRIDE) == 2**62 + 5  # an odd stride times 2**62 wraps to 2**62
    assert 0 <= mix_seed(-1, 0, SESSION_SEED_STRIDE) < 2**63
