"""Retriever faults end to end: the Elasticsearch-API server (noida-db) is stopped in the middle of
a training run's rollout. Search calls retry with backoff, then the run fails with a clear error
naming the URL, its last checkpoint intact; with the server back, `resume=True` runs to the end
with no step lost or logged twice. (A missing or corrupt tantivy index is tests/retrieval/test_tantivy.py.)
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

import tests.es_fixture as es_fixture
from agent_r1.retrieval.errors import ServiceUnavailableError
from agent_r1.tools.base import ToolResult
from agent_r1.tools.runner import ToolCall, ToolRunner

ITERATIONS = 6
STOP_AFTER = 2  # the server is stopped at the first search of iteration STOP_AFTER + 1


def tiny_es_overrides(tmp_path: Path, url: str) -> dict[str, object]:
    """The kill-resume micro run (tests/reliability/test_kill_resume.py) on Elasticsearch, from a
    short SFT warm start so the policy does call search (a random tiny model almost never does)."""
    return {"data.dir": str(tmp_path / "data"), "search.index_dir": str(tmp_path / "index"),
            "train.out_dir": str(tmp_path / "run"), "train.runs_dir": str(tmp_path / "runs"),  # digest cache too
            "data.n_people": 60, "model.hidden_size": 32,
            "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64, "model.vocab_size": 300,
            "train.iterations": ITERATIONS, "train.checkpoint_every": 1, "train.prompts_per_iter": 4,
            "rollout.n_samples": 2, "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 12,
            "train.eval_every": 0, "train.eval_size": 2, "train.threads": 1,
            "train.init_from": str(tmp_path / "sft" / "model"), "sft.out_dir": str(tmp_path / "sft"),
            "sft.steps": 80, "sft.lr": 1e-2, "env.format": "tag",
            "search.backend": "elasticsearch", "search.url": url, "search.index_name": "reliability-e2e",
            # the tool timeout must outlast the retries (5 attempts, 0.5+1+2+4 s of backoff)
            "search.timeout_s": 60}


class _Down:
    name = "search"
    description = "A search whose server is down."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def call(self, arguments):
        raise ServiceUnavailableError("Elasticsearch at http://127.0.0.1:1 did not answer msearch")


class _Buggy(_Down):
    def call(self, arguments):
        raise RuntimeError("a bug in the tool")


def test_runner_lets_service_outage_through_but_not_tool_bugs():
    """A tool bug is the model's observation; a dead service stops the run (not trained on)."""
    call = ToolCall("search", {"query": "q"})
    res = ToolRunner([_Buggy()]).run([call])[0]
    assert isinstance(res, ToolResult) and not res.success and "a bug in the tool" in res.text
    with pytest.raises(ServiceUnavailableError, match=r"127\.0\.0\.1:1"):
        ToolRunner([_Down()]).run([call])


def test_es_stopped_mid_training_fails_clearly_then_resumes(tmp_path: Path, monkeypatch, caplog):
    from agent_r1.config import load_config
    from agent_r1.models.build import load_model
    from agent_r1.retrieval.es_backend import ElasticsearchRetriever
    from agent_r1.runs.warm_start import run_sft
    from agent_r1.runs.run import run_train
    from agent_r1.training import checkpoint as ckpt
    from agent_r1.tracking.metrics import read_metrics

    port = es_fixture.free_port()  # the restarted server must answer at the URL in retriever.json
    monkeypatch.setattr(es_fixture, "free_port", lambda: port)
    server = es_fixture.start_noida(tmp_path / "noida")
    try:
        cfg = load_config(None, tiny_es_overrides(tmp_path, server.url))
        run_sft(cfg)  # also builds the data and the Elasticsearch index (setup.ensure_index -> build_index)
        assert (tmp_path / "index" / "retriever.json").is_file()

        state = {"iteration": 0, "stopped_at": None}
        original_search = ElasticsearchRetriever.search

        def search(self, queries, k):
            if state["iteration"] >= STOP_AFTER and state["stopped_at"] is None:
                server.stop()  # mid-rollout: generation of this iteration has begun
                state["stopped_at"] = time.monotonic()
            return original_search(self, queries, k)

        monkeypatch.setattr(ElasticsearchRetriever, "search", search)

        def on_iteration(iteration, metrics):
            state["iteration"] = iteration

        caplog.set_level(logging.WARNING, logger="agent_r1.retrieval.es_backend")
        with pytest.raises(RuntimeError) as info:
            run_train(cfg, on_iteration=on_iteration)
        failed_after = time.monotonic() - state["stopped_at"]
        message = str(info.value)
        assert isinstance(info.value, ServiceUnavailableError)
        assert server.url in message and "did not answer msearch after 5 attempt(s)" in message, message
        assert "server is running" in message
        # retried with exponential backoff before giving up
        delays = [float(d) for d in re.findall(r"retrying in ([\d.]+)s", caplog.text)]
        assert delays == [0.5, 1.0, 2.0, 4.0], caplog.text
        assert failed_after >= sum(delays)

        out = tmp_path / "run"
        latest = ckpt.latest_checkpoint(out / "checkpoints")
        assert latest is not None and ckpt.load_state(latest)["iteration"] == STOP_AFTER
        load_model(latest)  # the last checkpoint is complete and loads
        before = read_metrics(out / "metrics.jsonl")
        assert sum(m.get("tools/search/calls", 0) for m in before if m["step"] >= 1) > 0  # searches did happen
        assert [m["step"] for m in before if m["step"] >= 1] == list(range(1, STOP_AFTER + 1))

        server = es_fixture.start_noida(tmp_path / "noida")  # back, same data, same port
        monkeypatch.setattr(ElasticsearchRetriever, "search", original_search)
        result = run_train(cfg, resume=True)
        assert result["iterations"] == ITERATIONS
        after = read_metrics(out / "metrics.jsonl")
        steps = [m["step"] for m in after if m["step"] >= 1]
        assert steps == list(range(1, ITERATIONS + 1))  # nothing lost, nothing twice
        resumed = [m for m in after if m["step"] > STOP_AFTER]
        assert sum(m.get("tools/search/calls", 0) for m in resumed) > 0
        # every failed search after the restart is a call the policy wrote invalid (e.g. an empty
        # query), never the server: the failure rate stays within the invalid-call share
        bad = [m for m in resumed
               if m.get("tools/search/failure_rate", 0.0) > 1.0 - m.get("valid_call_rate", 100.0) / 100.0 + 1e-9]
        assert not bad, [{k: v for k, v in m.items() if k.startswith(("tools/", "step", "valid"))} for m in bad]
    finally:
        server.stop()
