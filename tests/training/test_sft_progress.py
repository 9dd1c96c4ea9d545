"""SFT progress: `sft_train`'s `on_step` callback on a real tiny model, and the terminal printer."""

from __future__ import annotations

import copy
import json
import math

from agent_r1.rollout.chat import ChatCodec
from agent_r1.training.demos import demo_trajectory
from agent_r1.tracking.metrics import JsonlMetrics
from agent_r1.training.sft import print_progress, sft_train
from tests.rollout_helpers import make_env_factory

SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"]}
           for i, n in enumerate(["Karivo", "Bamena", "Tolusa", "Meriko"])]


def _demos(tok):
    make_env = make_env_factory("tag")
    codec = ChatCodec(tok)
    return [demo_trajectory(make_env(s), codec, s, ["<answer>Telumas</answer>"], 16) for s in SAMPLES]


def test_on_step_follows_the_metrics_cadence_and_leaves_training_unchanged(tiny_model, tmp_path):
    tok = tiny_model[1]
    demos = _demos(tok)
    calls: list[tuple[int, dict[str, float]]] = []
    metrics = JsonlMetrics(tmp_path / "metrics.jsonl")
    losses = sft_train(copy.deepcopy(tiny_model[0]), tok, demos, steps=8, batch_size=4, lr=1e-2, seed=0,
                       metrics=metrics, log_every=3, on_step=lambda s, v: calls.append((s, v)))

    # step 0, every log_every steps, and the last step (7 is not a multiple of 3)
    assert [s for s, _ in calls] == [0, 3, 6, 7]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 3, 6, 7]
    for (step, values), row in zip(calls, rows):
        assert set(values) == {"sft/loss", "sft/tokens_per_s", "elapsed_s", "eta_s"}
        assert all(math.isfinite(v) for v in values.values()), values
        assert values["sft/loss"] == losses[step] == row["sft/loss"]
        # the callback sees the very rate that was written, not a second clock reading
        assert values["sft/tokens_per_s"] == row["sft/tokens_per_s"] > 0
        assert values["elapsed_s"] > 0 and values["eta_s"] >= 0
    elapsed = [v["elapsed_s"] for _, v in calls]
    assert elapsed == sorted(elapsed)
    assert calls[0][1]["eta_s"] > 0
    assert calls[-1][1]["eta_s"] == 0.0

    # the callback only observes: the same run without it gives the same losses, bit for bit
    plain = sft_train(copy.deepcopy(tiny_model[0]), tok, demos, steps=8, batch_size=4, lr=1e-2, seed=0, log_every=3)
    assert plain == losses


def test_print_progress_writes_one_line_per_call(tiny_model, capsys):
    tok = tiny_model[1]
    losses = sft_train(copy.deepcopy(tiny_model[0]), tok, _demos(tok), steps=5, batch_size=4, lr=1e-2, seed=0,
                       log_every=2, on_step=print_progress(5))
    lines = capsys.readouterr().out.splitlines()
    # steps 0, 2, 4 shown as steps done out of the total
    assert [line.split()[2] for line in lines] == ["1/5", "3/5", "5/5"]
    assert all(line.startswith("sft step ") for line in lines), lines
    assert [float(line.split()[4]) for line in lines] == [round(losses[s], 3) for s in (0, 2, 4)]
    assert lines[-1].endswith("left ~0s")


def test_print_progress_line_format(capsys):
    show = print_progress(500)
    show(149, {"sft/loss": 1.23449, "sft/tokens_per_s": 5432.2, "elapsed_s": 52.4, "eta_s": 121.0})
    show(499, {"sft/loss": 0.5, "sft/tokens_per_s": 1234567.0, "elapsed_s": 3725.0, "eta_s": 0.0})
    assert capsys.readouterr().out.splitlines() == [
        "sft step 150/500 loss 1.234 tok/s 5,432 elapsed 52s left ~2m01s",
        "sft step 500/500 loss 0.500 tok/s 1,234,567 elapsed 1h02m left ~0s",
    ]
