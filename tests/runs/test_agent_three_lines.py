"""docs/agents.md's three lines on the arithmetic task: an outside agent (tests/runs/calc_agent.py) trained
from the warm start the run makes itself (`train.init_from: sft`), with env.tools left at its default
although every row names the calculator."""

from __future__ import annotations

import json
from pathlib import Path

from agent_r1.config import load_config
from agent_r1.runs.folders import read_record
from tests.pipeline_helpers import unpinned_micro


def test_three_lines_train_an_outside_agent_on_arithmetic(tmp_path):
    from agent_r1.runs.run import run_train

    cfg = load_config(None, unpinned_micro(tmp_path, **{
        "data.source": "arithmetic", "data.dir": str(tmp_path / "data" / "arithmetic"),
        "reward.metric": "numeric", "sft.steps": 2, "train.iterations": 1, "train.prompts_per_iter": 2,
        "train.eval_every": 0, "train.eval_size": 2, "rollout.max_tokens_per_turn": 8,
        "env.kind": "openai_agent", "env.agent": "tests.runs.calc_agent:agent"}))
    assert cfg.env.tools == ["search"] and cfg.model.chat_template == "qwen2.5-brief"
    result = run_train(cfg)
    card = read_record(Path(result["out_dir"]))
    assert card["status"] == "finished" and card["iterations"] == 1
    rows = [json.loads(line) for line in (Path(result["out_dir"]) / "metrics.jsonl").read_text().splitlines()]
    (trained,) = [r for r in rows if "agent/sessions" in r]
    assert trained["agent/sessions"] == 4 and trained["agent/calls"] >= 4  # 2 prompts x rollout.n_samples 2
    assert trained["agent/errors"] == 0
    (warm,) = [p for p in (tmp_path / "runs" / "warm_starts").iterdir() if p.is_dir()]
    assert card["lineage"]["warm_start"].startswith(warm.name)
