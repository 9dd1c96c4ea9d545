"""Records verl's own outputs for GSPO, CISPO and Dr. GRPO on fixed small inputs, so the tests compare
agent-r1's functions against verl without verl installed (tests/algos/test_verl_reference.py).

verl's package imports Ray, hydra and its workers at import time; only `verl.trainer.ppo.core_algos`
is needed, so the figures in tests/algos/data/verl_reference.json were recorded with that file from
the verl repository (github.com/volcengine/verl, commit b178a3c) beside minimal stubs of the config
classes it imports, on PYTHONPATH. Any environment where `from verl.trainer.ppo import core_algos`
works can rerun it:

    PYTHONPATH=/path/to/verl python -m tests.algos.verl_reference   # rewrites the JSON

What is recorded, per case (float64): GSPO's loss, gradient and clipfrac (verl forces
seq-mean-token-mean); CISPO's loss and gradient in three aggregations (verl clips both sides:
clip_ratio_low 1.0 gives a lower bound of 0, which is ours: none); verl's `seq-mean-token-sum-norm`
(sum / L, ours is sum / (rows x L)); Dr. GRPO's advantage = verl's GRPO with
norm_adv_by_std_in_grpo=False.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parent / "data" / "verl_reference.json"
AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")
CLIPS = ((3e-4, 4e-4), (0.2, 0.28), (0.01, 0.02))


def case_inputs(i: int) -> dict:
    """Case i's inputs: old log-probs, new ones at one of four distances, a mask, advantages (per
    token, or constant per row as GRPO gives), clip bounds, group ids and 0/1 scores."""
    g = torch.Generator().manual_seed(1000 + i)
    b, t = 2 + i % 3, 3 + i % 4
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3
    new = old + [1e-4, 0.05, 0.5, 1e-3][i % 4] * torch.randn(b, t, generator=g, dtype=torch.float64)
    mask = (torch.rand(b, t, generator=g) > 0.3).double()
    mask[:, 0] = 1.0
    adv = torch.randn(b, 1 if i % 2 else t, generator=g, dtype=torch.float64).expand(b, t).clone()
    ids = [int(x) for x in torch.randint(0, 2, (b,), generator=g)]
    scores = torch.randint(0, 2, (b,), generator=g).double()
    lo, hi = CLIPS[i % 3]
    return {"old": old.tolist(), "new": new.tolist(), "mask": mask.tolist(), "adv": adv.tolist(), "clip_low": lo,
            "clip_high": hi, "cispo_high": [4.0, 0.2, 0.28][i % 3], "ids": ids, "scores": scores.tolist(),
            "norm_tokens": 37}


def verl_outputs(x: dict) -> dict:
    from verl.trainer.ppo import core_algos as V
    from verl.workers.config import ActorConfig

    T = lambda k: torch.tensor(x[k], dtype=torch.float64)  # noqa: E731
    old, mask, adv = T("old"), T("mask"), T("adv")
    out: dict = {}
    new = T("new").requires_grad_(True)
    loss, m = V.compute_policy_loss_gspo(old, new, adv, mask, config=ActorConfig(x["clip_low"], x["clip_high"]))
    loss.backward()
    out["gspo"] = {"loss": float(loss.detach()), "grad": new.grad.tolist(), "clipfrac": float(m["actor/pg_clipfrac"])}
    for agg in AGGS:
        new = T("new").requires_grad_(True)
        loss, m = V.compute_policy_loss_cispo(old, new, adv, mask, loss_agg_mode=agg,
                                              config=ActorConfig(1.0, x["cispo_high"]))
        loss.backward()
        out[f"cispo/{agg}"] = {"loss": float(loss.detach()), "grad": new.grad.tolist(), "clipfrac": float(m["actor/pg_clipfrac"])}
    out["sum_norm"] = float(V.agg_loss(adv, mask, "seq-mean-token-sum-norm", loss_scale_factor=x["norm_tokens"]))
    rewards = torch.zeros_like(mask)
    rewards[:, 0] = T("scores")
    out["dr_grpo"] = V.compute_grpo_outcome_advantage(rewards, mask, x["ids"], norm_adv_by_std_in_grpo=False)[0].tolist()
    return out


def main(argv: list[str] | None = None) -> int:
    cases = []
    for i in range(12):
        x = case_inputs(i)
        cases.append({"inputs": x, "verl": verl_outputs(x)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"verl_commit": "b178a3c", "cases": cases}) + "\n")
    print(f"wrote {OUT} ({len(cases)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
