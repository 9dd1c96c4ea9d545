"""Sample trajectories as MLflow traces: one span tree per trajectory (agent -> turns -> tool calls).

A trace is a tracking record like any other (op `trace`, see transport.py): built here as plain JSON,
so it can wait in the offline buffer, and turned into MLflow entities only when it is sent. It is
written straight to the store of the run's own tracking URI (`TracingClient.log_spans` +
`start_trace`), not through MLflow's global tracer, whose exporter uses the process-wide tracking
URI and drops a trace it cannot send with a warning: here a failed send raises, so the record is
buffered. The trace id is derived from the record's stable key (`<run key>/<iteration>/<index>`), so
a replay finds the trace it already wrote and skips it.

The tree of one trajectory
- `trajectory` (AGENT): inputs {question}, outputs {answer}; attributes: sample id, iteration, gold
  answers, EM, the reward parts (outcome, process total and per turn, score), stop reason, turns;
- `turn <i>` (LLM): the generation; inputs {turn}, outputs the action text; attributes: action
  tokens, truncated, masked, process reward, the observation shown after it;
- one TOOL span per call under its turn: inputs the arguments, outputs {titles, success, error,
  latency_ms}.
Times are the rollout's own (`Turn.info["timing_ns"]`: generation start / end, tools end, written by
rollout/loop.py); tool calls are laid out one after another from the end of the generation with
their measured latencies. A trajectory without timings (built by hand) ends at `end_ns`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

TRACE_KEY_TAG = "agent_r1.trace_key"
TRACE_NAME = "trajectory"
MAX_TEXT_CHARS = 4000  # an observation or argument longer than this is cut in the trace (the table has it whole)


@dataclass
class SpanNode:
    """One span of the tree, JSON-able (`to_dict`) so a trace can wait in the offline buffer."""

    name: str
    span_type: str
    start_ns: int
    end_ns: int
    inputs: Any = None
    outputs: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = "OK"  # OK | ERROR
    children: list[SpanNode] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpanNode:
        return cls(**{**data, "children": [cls.from_dict(c) for c in data.get("children") or []]})

    def walk(self, parent: SpanNode | None = None):
        """(span, its parent) for every span, parents first."""
        yield self, parent
        for child in self.children:
            yield from child.walk(self)


def _cut(text: Any, limit: int = MAX_TEXT_CHARS) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + " ...[cut]"


def _tool_span(call: dict[str, Any], start_ns: int) -> SpanNode:
    latency_ms = float(call.get("latency_ms") or 0.0)
    ok = bool(call.get("ok"))
    outputs = {"titles": list(call.get("titles") or []), "success": ok, "error": call.get("error"),
               "latency_ms": round(latency_ms, 3)}
    return SpanNode(name=str(call.get("name") or "<unnamed>"), span_type="TOOL", start_ns=start_ns,
                    end_ns=start_ns + int(latency_ms * 1e6), inputs=call.get("arguments") or {}, outputs=outputs,
                    attributes={"tool": str(call.get("name")), "success": ok, "latency_ms": round(latency_ms, 3),
                                **({"error": _cut(call["error"], 500)} if call.get("error") else {})},
                    status="OK" if ok else "ERROR")


def _turn_span(index: int, turn: Any, start_ns: int, context_tokens: int) -> SpanNode:
    """The turn's generation, then its tool calls one after another (their latencies as measured)."""
    info = turn.info or {}
    timing = info.get("timing_ns")
    gen_start, gen_end, tools_end = timing if timing else (start_ns, start_ns, start_ns)
    children, t = [], gen_end
    for call in info.get("calls") or []:
        children.append(_tool_span(call, t))
        t = children[-1].end_ns
    attributes = {
        "turn": index, "action_tokens": len(turn.action_ids), "truncated": bool(turn.truncated),
        "masked": bool(turn.masked), "process_reward": float(turn.process_reward),
        "tool_calls": int(turn.tool_calls), "valid_tool_calls": int(turn.valid_tool_calls),
        "observation": _cut(turn.observation_text), "observation_truncated": bool(turn.observation_truncated),
        # MLflow shows token counts of LLM spans (the context is the prompt and every earlier turn)
        "mlflow.chat.tokenUsage": {"input_tokens": context_tokens, "output_tokens": len(turn.action_ids),
                                   "total_tokens": context_tokens + len(turn.action_ids)},
    }
    if info.get("parse_error"):
        attributes["parse_error"] = _cut(info["parse_error"], 500)
    return SpanNode(name=f"turn {index}", span_type="LLM", start_ns=int(gen_start), end_ns=int(max(tools_end, t)),
                    inputs={"turn": index}, outputs=turn.action_text, attributes=attributes, children=children)


def trajectory_span(step: int, traj: Any, end_ns: int | None = None) -> SpanNode:
    """The span tree of one trajectory (see the module doc)."""
    from agent_r1.rewards.qa import exact_match

    sample = traj.sample or {}
    gold = [str(g) for g in sample.get("answers") or []]
    timed = all((turn.info or {}).get("timing_ns") for turn in traj.turns) and traj.turns
    t = 0  # untimed: laid out from 0, shifted below so the trajectory ends at `end_ns`
    turns, context = [], len(traj.prompt_ids)
    for i, turn in enumerate(traj.turns, start=1):
        turns.append(_turn_span(i, turn, t, context))
        t = turns[-1].end_ns
        context += len(turn.action_ids) + len(turn.observation_ids)
    if not timed:
        shift = (end_ns or time.time_ns()) - t
        for span in turns:
            for node, _ in span.walk():
                node.start_ns, node.end_ns = node.start_ns + shift, node.end_ns + shift
    start = turns[0].start_ns if turns else (end_ns or time.time_ns())
    process = [float(turn.process_reward) for turn in traj.turns]
    attributes = {
        "sample_id": str(traj.sample_id), "iteration": int(step), "gold": gold,
        "em": float(exact_match(traj.answer or "", gold)) if gold else 0.0,
        "outcome_reward": float(traj.outcome_reward), "process_reward": float(sum(process)),
        "process_rewards": process, "score": float(traj.score), "stop_reason": str(traj.stop_reason),
        "num_turns": len(traj.turns), "tool_calls": int(sum(turn.tool_calls for turn in traj.turns)),
        "action_tokens": int(traj.num_action_tokens),
    }
    return SpanNode(name=TRACE_NAME, span_type="AGENT", start_ns=start, end_ns=max([start, *(s.end_ns for s in turns)]),
                    inputs={"question": str(sample.get("question", ""))},
                    outputs={"answer": traj.answer}, attributes=attributes, children=turns)


def trace_record(run_key: str, experiment: str, step: int, index: int, traj: Any,
                 end_ns: int | None = None) -> dict[str, Any]:
    """The `trace` record of the `index`-th trajectory logged at iteration `step` of run `run_key`."""
    return {"op": "trace", "key": run_key, "experiment": experiment, "trace_key": f"{run_key}/{int(step)}/{index}",
            "tags": {"iteration": str(int(step)), "sample_id": _valid(str(traj.sample_id))},
            "root": _valid(trajectory_span(step, traj, end_ns).to_dict())}


def _valid(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD. A model can write one as a JSON escape inside a
    hermes call ("\\udcff"); the parsed arguments keep it, and no store can encode it (records.py would set
    the whole trace aside)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_valid(k): _valid(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid(v) for v in value]
    return value


# ---- to MLflow's entities (at send time) -------------------------------------------------------
def trace_id_of(trace_key: str) -> str:
    """The MLflow trace id of a record: `tr-` + 32 hex digits, the same on every replay."""
    return "tr-" + hashlib.md5(trace_key.encode()).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _dump(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def mlflow_trace(record: dict[str, Any], experiment_id: str, run_id: str) -> tuple[Any, list[Any]]:
    """(TraceInfo, [Span]) of a `trace` record, linked to `run_id` (`mlflow.sourceRun`)."""
    from mlflow.entities import Span, TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.constant import SpanAttributeKey, TraceMetadataKey, TraceTagKey

    trace_id = trace_id_of(record["trace_key"])
    otel_trace_id = bytes.fromhex(trace_id[3:])
    root = SpanNode.from_dict(record["root"])
    ids: dict[int, bytes] = {}
    spans = []
    for n, (node, parent) in enumerate(root.walk()):
        ids[id(node)] = hashlib.md5(f"{record['trace_key']}/{n}".encode()).digest()[:8]
        attributes = {k: _dump(v) for k, v in node.attributes.items()}
        attributes.update({SpanAttributeKey.REQUEST_ID: _dump(trace_id), SpanAttributeKey.SPAN_TYPE: _dump(node.span_type),
                           SpanAttributeKey.INPUTS: _dump(node.inputs), SpanAttributeKey.OUTPUTS: _dump(node.outputs)})
        if parent is None:
            attributes[SpanAttributeKey.EXPERIMENT_ID] = _dump(experiment_id)
        spans.append(Span.from_dict({
            "trace_id": _b64(otel_trace_id), "span_id": _b64(ids[id(node)]),
            "parent_span_id": _b64(ids[id(parent)]) if parent is not None else None, "name": node.name,
            "start_time_unix_nano": node.start_ns, "end_time_unix_nano": node.end_ns,
            "status": {"code": "STATUS_CODE_ERROR" if node.status == "ERROR" else "STATUS_CODE_OK", "message": ""},
            "attributes": attributes, "events": []}))
    info = TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=root.start_ns // 1_000_000, execution_duration=(root.end_ns - root.start_ns) // 1_000_000,
        state=TraceState.OK, request_preview=_dump(root.inputs)[:1000], response_preview=_dump(root.outputs)[:1000],
        trace_metadata={TraceMetadataKey.SOURCE_RUN: run_id, "mlflow.trace_schema.version": "3",
                        TraceMetadataKey.INPUTS: _dump(root.inputs)[:1000],
                        TraceMetadataKey.OUTPUTS: _dump(root.outputs)[:1000]},
        tags={**{k: str(v) for k, v in (record.get("tags") or {}).items()}, TraceTagKey.TRACE_NAME: root.name,
              TRACE_KEY_TAG: record["trace_key"]})
    return info, spans
