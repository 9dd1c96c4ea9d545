"""Sample trajectories as MLflow traces, read back through the MLflow client from real stores: the
span tree of a real rollout (real search tool over a tantivy index), traces found by run and
iteration, nothing lost while MLflow is down (buffered, then delivered exactly once), and a tiny
real training run that fills the Traces tab."""

from __future__ import annotations

import json

import pytest

from agent_r1.envs.formats import get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationOutput
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import RolloutConfig
from agent_r1.tools.runner import ToolRunner
from agent_r1.tools.search import SearchTool
from agent_r1.tracking import MlflowSink, RunTracker
from agent_r1.tracking.traces import TRACE_KEY_TAG
from tests.mlflow_server import start_mlflow_server, stop
from tests.mlflow_store import fresh_store
from tests.servers import free_port


class ScriptedEngine:
    """Plays the same list of actions in every trajectory, one per turn (tokenised as given)."""

    def __init__(self, tokenizer, actions):
        self.tokenizer, self.actions, self.turn = tokenizer, actions, 0

    def generate(self, prompts, params):
        ids = self.tokenizer.encode(self.actions[self.turn], add_special_tokens=False)
        self.turn += 1
        return [GenerationOutput(list(ids), [0.0] * len(ids), "stop") for _ in prompts]


@pytest.fixture(scope="module")
def retriever(synthetic_world, tmp_path_factory):
    from agent_r1.retrieval.base import SearchConfig, open_retriever

    r = open_retriever(SearchConfig(backend="tantivy", index_dir=str(tmp_path_factory.mktemp("traces_index"))))
    r.index(synthetic_world.documents)
    yield r
    r.close()


@pytest.fixture(scope="module")
def rollout(tiny_model, synthetic_world, retriever):
    """Three trajectories of one question: a search, then a good and an empty search, then the answer."""
    _, tok = tiny_model
    q = synthetic_world.questions()[0]
    name = synthetic_world.documents[0].title
    actions = [f"<search>{name}</search>", f"<search>{name} born</search><search></search>",
               f"<answer>{q.answers[0]}</answer>"]
    runner = ToolRunner([SearchTool(retriever, k=2)], timeout_s=10.0)

    def make_env(sample):
        return ToolEnv(runner, get_format("tag"), EnvConfig(format="tag"), RewardConfig(valid_call_reward=0.1))

    sample = {"id": q.id, "question": q.question, "answers": list(q.answers)}
    cfg = RolloutConfig(max_turns=3, max_tokens_per_turn=64, max_observation_tokens=400, max_total_tokens=4000,
                        n_samples=3)
    trajs = run_rollout(ScriptedEngine(tok, actions), ChatCodec(tok), make_env, [sample], cfg, RewardConfig())
    return trajs, name


def _store(tmp_path):
    """A new SQLite store, already migrated (a copy of a template: tests/mlflow_store.py); creating a store
    from nothing is tests/tracking/test_tracking.py's test_sqlite_store_round_trip."""
    return fresh_store(tmp_path / "store")


def _root(trace):
    return next(s for s in trace.data.spans if s.parent_id is None)


def test_rollout_records_every_tool_call_in_turn_info(rollout, retriever):
    trajs, name = rollout
    traj = trajs[0]
    assert [t.tool_calls for t in traj.turns] == [1, 2, 0] and traj.stop_reason == "answer"
    first = traj.turns[0].info["calls"]
    expected_titles = [h.title for h in retriever.search([name], 2)[0]]
    assert len(first) == 1 and first[0]["name"] == "search" and first[0]["arguments"] == {"query": name}
    assert first[0]["ok"] is True and first[0]["error"] is None and first[0]["titles"] == expected_titles
    assert first[0]["latency_ms"] > 0
    good, empty = traj.turns[1].info["calls"]
    assert good["ok"] and good["titles"] and not empty["ok"] and empty["titles"] == []
    assert empty["error"] == "Error: empty search query" and isinstance(empty["arguments"], dict)
    json.dumps([t.info for t in traj.turns])  # JSON-able, as the buffer needs
    for turn in traj.turns:
        gen_start, gen_end, tools_end = turn.info["timing_ns"]
        assert gen_start <= gen_end <= tools_end


def test_traces_have_the_span_tree_and_are_found_by_run_and_iteration(rollout, tmp_path):
    from mlflow import MlflowClient

    trajs, name = rollout
    uri = _store(tmp_path)
    tracker = RunTracker("unit", experiment="traces", tracking_uri=uri, buffer_dir=tmp_path / "buffer", verbose=False)
    train = tracker.child("train")
    sink = MlflowSink(train, max_traces=2)
    sink.log_trajectories(1, trajs)
    sink.log_trajectories(2, trajs)
    report = tracker.close()
    assert report["pending"] == 0 and report["rejected"] == 0 and report["buffered"] == 0

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("traces").experiment_id
    traces = client.search_traces(locations=[exp], run_id=train.run_id)
    assert len(traces) == 4  # 2 iterations x max_traces, of 3 trajectories each
    assert client.search_traces(locations=[exp], run_id=tracker.run_id) == []  # linked to the train run only
    second = client.search_traces(locations=[exp], filter_string="tags.iteration = '2'")
    assert sorted(t.info.tags[TRACE_KEY_TAG] for t in second) == [f"{train.key}/2/0", f"{train.key}/2/1"]
    trace = second[0]
    assert trace.info.trace_metadata["mlflow.sourceRun"] == train.run_id
    assert trace.info.tags["sample_id"] == trajs[0].sample_id and trace.info.tags["mlflow.traceName"] == "trajectory"

    root = _root(trace)
    traj = trajs[0]
    assert root.name == "trajectory" and root.span_type == "AGENT"
    assert root.inputs == {"question": traj.sample["question"]} and root.outputs == {"answer": traj.answer}
    attrs = root.attributes
    assert attrs["sample_id"] == traj.sample_id and attrs["iteration"] == 2 and attrs["em"] == 1.0
    assert attrs["gold"] == traj.sample["answers"] and attrs["stop_reason"] == "answer" and attrs["num_turns"] == 3
    assert attrs["outcome_reward"] == traj.outcome_reward and attrs["score"] == pytest.approx(traj.score)
    assert attrs["process_reward"] == pytest.approx(sum(t.process_reward for t in traj.turns))
    assert attrs["process_reward"] > 0 and attrs["process_rewards"] == [t.process_reward for t in traj.turns]

    turns = sorted((s for s in trace.data.spans if s.span_type == "LLM"), key=lambda s: s.name)
    assert [s.name for s in turns] == ["turn 1", "turn 2", "turn 3"]
    assert all(s.parent_id == root.span_id for s in turns)
    for span, turn in zip(turns, traj.turns):
        assert span.outputs == turn.action_text
        assert span.attributes["action_tokens"] == len(turn.action_ids)
        assert span.attributes["process_reward"] == pytest.approx(turn.process_reward)
        assert span.attributes["masked"] is False and span.attributes["truncated"] is False
        assert root.start_time_ns <= span.start_time_ns <= span.end_time_ns <= root.end_time_ns
    tools = [s for s in trace.data.spans if s.span_type == "TOOL"]
    assert [s.parent_id for s in tools] == [turns[0].span_id, turns[1].span_id, turns[1].span_id]
    ok_call = next(s for s in tools if s.parent_id == turns[0].span_id)
    call = traj.turns[0].info["calls"][0]
    assert ok_call.name == "search" and ok_call.inputs == {"query": name}
    assert ok_call.outputs["titles"] == call["titles"] and ok_call.outputs["success"] is True
    assert ok_call.outputs["latency_ms"] == pytest.approx(call["latency_ms"], abs=1e-3)
    assert (ok_call.end_time_ns - ok_call.start_time_ns) == int(call["latency_ms"] * 1e6)
    assert turns[0].start_time_ns <= ok_call.start_time_ns and ok_call.end_time_ns <= turns[0].end_time_ns
    failed = [s for s in tools if not s.outputs["success"]]
    assert len(failed) == 1 and failed[0].status.status_code == "ERROR"
    assert failed[0].attributes["error"] == "Error: empty search query"
    # the tables are still there
    arts = {a.path for a in client.list_artifacts(train.run_id, "trajectories")}
    assert arts == {"trajectories/iter_000001.json", "trajectories/iter_000002.json"}


def test_max_traces_zero_logs_none(rollout, tmp_path):
    from mlflow import MlflowClient

    uri = _store(tmp_path)
    tracker = RunTracker("unit", experiment="traces", tracking_uri=uri, buffer_dir=tmp_path / "buffer", verbose=False)
    assert MlflowSink(tracker, max_traces=0).log_traces(1, rollout[0]) == 0
    assert MlflowSink(tracker, max_table_rows=1, max_traces=16).log_traces(2, rollout[0]) == 1
    tracker.close()
    exp = MlflowClient(uri).get_experiment_by_name("traces").experiment_id
    assert len(MlflowClient(uri).search_traces(locations=[exp], run_id=tracker.run_id)) == 1


def test_unreachable_mlflow_buffers_traces_and_a_flush_delivers_each_once(rollout, tmp_path):
    from mlflow import MlflowClient

    trajs, _ = rollout
    port = free_port()  # nothing listens here yet
    uri = f"http://127.0.0.1:{port}"
    tracker = RunTracker("offline", experiment="traces", tracking_uri=uri, buffer_dir=tmp_path / "buffer", verbose=False)
    MlflowSink(tracker).log_trajectories(5, trajs)
    buffered = [r for r in tracker.mlflow.buffer.pending() if r["op"] == "trace"]
    assert len(buffered) == 3 and tracker.report()["sent"] == 0
    assert [r["trace_key"] for r in buffered] == [f"{tracker.key}/5/{i}" for i in range(3)]

    server = start_mlflow_server(port, tmp_path / "server")  # MLflow comes back on that very port
    try:
        tracker.mlflow.retry_at = 0.0  # do not wait for the back-off in a test
        assert tracker.flush()
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("traces").experiment_id

        def keys():
            return sorted(t.info.tags[TRACE_KEY_TAG] for t in client.search_traces(locations=[exp], run_id=tracker.run_id))

        assert keys() == [r["trace_key"] for r in buffered]
        tree = client.search_traces(locations=[exp], run_id=tracker.run_id)[0]
        assert {s.span_type for s in tree.data.spans} == {"AGENT", "LLM", "TOOL"}
        spans_before = {t.info.trace_id: len(t.data.spans)
                        for t in client.search_traces(locations=[exp], run_id=tracker.run_id)}
        # replayed twice, as after a flush killed before it could forget them: each trace is found and
        # skipped (an altered copy changes nothing), still one trace each
        altered = [{**r, "root": {**r["root"], "outputs": {"answer": "altered"}}} for r in buffered]
        for _ in range(2):
            pending = tracker.mlflow.buffer.pending_path
            pending.write_text("".join(json.dumps(r) + "\n" for r in altered))
            assert tracker.flush() and not pending.exists()
        assert keys() == [r["trace_key"] for r in buffered]
        after = client.search_traces(locations=[exp], run_id=tracker.run_id)
        assert {t.info.trace_id: len(t.data.spans) for t in after} == spans_before
        assert all(_root(t).outputs == {"answer": trajs[0].answer} for t in after)
        assert tracker.close()["pending"] == 0 and tracker.report()["rejected"] == 0
    finally:
        stop(server)


def test_a_tiny_training_run_fills_the_traces_tab(tmp_path):
    from mlflow import MlflowClient

    from agent_r1.config import load_config
    from agent_r1.runs.run import run_train

    root = tmp_path / "world"
    cfg = load_config(None, {
        "data.dir": str(root / "data"), "search.index_dir": str(root / "index"), "data.n_people": 60,
        "model.hidden_size": 32, "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64,
        "model.vocab_size": 300, "train.prompts_per_iter": 2, "rollout.n_samples": 2, "rollout.max_turns": 2,
        "rollout.max_tokens_per_turn": 8, "train.eval_every": 0, "train.eval_size": 0, "train.threads": 1,
        "train.iterations": 2, "train.log_trajectories_every": 1, "train.out_dir": str(tmp_path / "run"),
        "train.runs_dir": str(root / "runs")})  # its digest cache too: never the repository's runs/
    uri = _store(tmp_path)
    tracker = RunTracker("e2e", experiment="traces", tracking_uri=uri, buffer_dir=tmp_path / "buffer", verbose=False)
    run_train(cfg, sink=MlflowSink(tracker, max_traces=3))
    assert tracker.close()["pending"] == 0

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("traces").experiment_id
    traces = client.search_traces(locations=[exp], run_id=tracker.run_id)
    assert sorted(t.info.tags["iteration"] for t in traces) == ["1", "1", "1", "2", "2", "2"]
    for trace in traces:
        root = _root(trace)
        turns = [s for s in trace.data.spans if s.span_type == "LLM"]
        assert root.span_type == "AGENT" and 1 <= len(turns) == root.attributes["num_turns"] <= 2
        assert all(s.parent_id == root.span_id and s.attributes["action_tokens"] >= 1 for s in turns)
        assert all(root.start_time_ns <= s.start_time_ns < s.end_time_ns <= root.end_time_ns for s in turns)
        assert trace.info.trace_metadata["mlflow.sourceRun"] == tracker.run_id
