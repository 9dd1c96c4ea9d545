"""GSPO, CISPO, Dr. GRPO and the constant-normaliser aggregation against verl's own functions: the
outputs verl's core_algos gave on 12 fixed float64 cases (recorded by tests/algos/verl_reference.py;
verl is not installed here), within 1e-6 (verl adds 1e-8 to its masked-mean denominators)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agent_r1.algos import ADV_ESTIMATORS, AdvantageInputs, aggregate_loss, cispo_policy_loss, gspo_policy_loss
from tests.algos.verl_reference import AGGS, case_inputs

DOC = json.loads((Path(__file__).parent / "data" / "verl_reference.json").read_text())
CASES = list(range(len(DOC["cases"])))


def close(a, b, tol=1e-6):
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64),
                               atol=tol, rtol=tol)


def tensors(x):
    return (torch.tensor(x[k], dtype=torch.float64) for k in ("old", "new", "mask", "adv"))


def test_the_recorded_inputs_are_what_the_generator_makes():
    """The JSON's inputs are regenerated bit for bit, so the cases cannot drift from the script."""
    assert [c["inputs"] for c in DOC["cases"]] == [case_inputs(i) for i in CASES]
    # the comparisons are not vacuous: groups of two or more, and clipping on both losses, occur
    assert sum(len(set(c["inputs"]["ids"])) < len(c["inputs"]["ids"]) for c in DOC["cases"]) >= 6
    assert sum(c["verl"]["gspo"]["clipfrac"] > 0 for c in DOC["cases"]) >= 3
    assert sum(c["verl"]["cispo/token-mean"]["clipfrac"] > 0 for c in DOC["cases"]) >= 2


@pytest.mark.parametrize("i", CASES)
def test_gspo_equals_verls(i):
    x, ref = DOC["cases"][i]["inputs"], DOC["cases"][i]["verl"]["gspo"]
    old, new, mask, adv = tensors(x)
    new.requires_grad_(True)
    loss, metrics = gspo_policy_loss(new, old, adv, mask, x["clip_low"], x["clip_high"], agg="seq-mean-token-mean")
    loss.backward()
    close(loss, ref["loss"])
    close(new.grad, ref["grad"])
    close(metrics["clipfrac"], ref["clipfrac"])


@pytest.mark.parametrize("i", CASES)
@pytest.mark.parametrize("agg", AGGS)
def test_cispo_equals_verls_without_a_lower_bound(i, agg):
    x, ref = DOC["cases"][i]["inputs"], DOC["cases"][i]["verl"][f"cispo/{agg}"]
    old, new, mask, adv = tensors(x)
    new.requires_grad_(True)
    loss, metrics = cispo_policy_loss(new, old, adv, mask, clip_high=x["cispo_high"], agg=agg)
    loss.backward()
    close(loss, ref["loss"])
    close(new.grad, ref["grad"])
    close(metrics["clipfrac"], ref["clipfrac"])


@pytest.mark.parametrize("i", CASES)
def test_sum_norm_is_verls_over_the_rows(i):
    x, ref = DOC["cases"][i]["inputs"], DOC["cases"][i]["verl"]["sum_norm"]
    _, _, mask, values = tensors(x)
    rows = float((mask.sum(-1) > 0).sum())  # verl divides by L alone; ours by rows x L (TRL's dr_grpo)
    close(aggregate_loss(values, mask, "seq-mean-token-sum-norm", norm_tokens=x["norm_tokens"]) * rows, ref)


@pytest.mark.parametrize("i", CASES)
def test_dr_grpo_is_verls_grpo_without_the_std(i):
    x, ref = DOC["cases"][i]["inputs"], torch.tensor(DOC["cases"][i]["verl"]["dr_grpo"], dtype=torch.float64)
    _, _, mask, _ = tensors(x)
    scores = torch.tensor(x["scores"], dtype=torch.float64)
    rewards = torch.zeros_like(mask)
    rewards[:, 0] = scores
    ours = ADV_ESTIMATORS["dr_grpo"](AdvantageInputs(rewards, scores, mask, x["ids"])).advantages
    grouped = torch.tensor([x["ids"].count(g) > 1 for g in x["ids"]])  # verl gives a group of one 0 too
    close(ours[grouped], ref[grouped])
