"""benchmarks/outside_agent.py at its smoke size (`--quick`): the outside-written arithmetic agent trained by
the three documented lines writes its results file with every field the figures are read from. No figure
is asserted, only that the real code path ran; results and work files go to tmp. Marked `bench`, as the
other benchmark smoke runs (`make bench`)."""

from __future__ import annotations

import json
import math

import pytest

from agent_r1.agents.records import CallRecord
from benchmarks import common, outside_agent

pytestmark = pytest.mark.bench


def test_outside_agent_quick_writes_its_figures(tmp_path, monkeypatch):
    monkeypatch.setenv(common.RESULTS_ENV, str(tmp_path / "results"))
    monkeypatch.setenv(common.WORK_ENV, str(tmp_path / "work"))
    monkeypatch.chdir(tmp_path)  # main() changes to the repository; the fixture puts the cwd back
    assert outside_agent.main(["--quick"]) == 0
    doc = json.loads((tmp_path / "results" / "outside_agent_quick.json").read_text())
    assert doc["command"] == "python -m benchmarks.outside_agent --quick"
    assert doc["machine"]["commit"] and doc["agent"] == outside_agent.AGENT
    assert doc["overrides"]["env.kind"] == "openai_agent" and doc["overrides"]["train.init_from"] == "sft"
    assert doc["model_chat_template"] == "qwen2.5-brief" and doc["warm_start"]["sft_seconds"] > 0
    assert len(doc["curve"]) == 2
    for row in doc["curve"]:
        assert {"reward_mean", "agent/drift", "agent/sessions", "drift_per_session", "agent/steps_per_session",
                "seconds", "tool_first_rate"} <= set(row), row
        assert row["agent/sessions"] == 4  # 2 prompts x 2 samples
    s = doc["summary"]
    assert isinstance(s["drift_per_session"], float) and math.isfinite(s["drift_per_session"])
    assert s["em_before"] is not None and s["em_after"] is not None and s["held_out_n"] == 4
    assert s["seconds_per_iteration"] > 0 and isinstance(s["drift_kinds"], dict)
    assert [r["greedy"] for r in doc["rollouts"]] == [True, False, False, True]  # eval, 2 iterations, eval


def _call(prompt: list[int], completion: list[int]) -> CallRecord:
    return CallRecord(prompt_ids=prompt, completion_ids=completion, completion_logprobs=[0.0] * len(completion),
                      finish_reason="stop", messages=2, temperature=1.0)


def test_drifted_calls_are_classified():
    """A prompt that re-tokenises the reply (same text) and one that edits it (other text) are told apart;
    a call that continues its session is no drift."""
    text = {1: "a", 2: "b", 3: "c", 4: "bc", 5: "x", 6: "d"}

    def decode(ids):
        return "".join(text[i] for i in ids)

    same_text = [_call([1], [2, 3]), _call([1, 4, 6], [6])]
    other_text = [_call([1], [2, 3]), _call([1, 5, 6], [6])]
    continued = [_call([1], [2, 3]), _call([1, 2, 3, 6], [6])]
    report = outside_agent.session_report([({}, same_text, []), ({}, other_text, []), ({}, continued, [])], decode)
    assert report["sessions"] == 3 and report["tool_first"] == 0
    kinds = [(d["kind"], d["where"], d["token"]) for d in report["drifts"]]
    assert kinds == [("same text, other ids", "previous reply", 1), ("other text", "previous reply", 1)]
    assert outside_agent.drift_kinds(report["drifts"]) == {"same text, other ids (previous reply)": 1,
                                                          "other text (previous reply)": 1}
