"""Sample trajectories as MLflow shows them: table rows, and traces (one span tree per trajectory).

A trace is a record like any other (op `trace`): built here as plain JSON, so it can wait in the
buffer, and turned into MLflow entities only when sent, straight to the store of the run's own URI
(`TracingClient.log_spans` + `start_trace`), not through MLflow's global tracer (which drops a trace it
cannot send with a warning). Its id is derived from the record's key (`<run key>/<iteration>/<index>`),
so a replay finds the trace already written and skips it.

The tree: `trajectory` (AGENT: question in, answer out; sample id, iteration, gold, EM, reward parts,
stop reason, turns) -> `turn <i>` (LLM: the action text; action tokens, truncated, masked, process
reward, the observation) -> one TOOL span per call (arguments in; titles, success, error, latency out).
Times are the rollout's own (`Turn.info["timing_ns"]`: generation start / end, tools end); tool calls
are laid end to end from the end of the generation. A trajectory without timings ends at `end_ns`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

TRACE_KEY_TAG = "agent_r1.trace_key"
MAX_TEXT_CHARS = 4000  # longer observations and arguments are cut in a trace (the table has them whole)


def _gold(traj: Any) -> list[str]:
    return [str(g) for g in (traj.sample or {}).get("answers") or []]


def _outcome(traj: Any) -> dict[str, Any]:
    """How a trajectory ended: EM against the gold answers and the reward parts (in its row and its trace)."""
    from agent_r1.rewards.qa import exact_match

    return {"em": float(exact_match(traj.answer or "", _gold(traj))) if _gold(traj) else 0.0,
            "outcome_reward": float(traj.outcome_reward),
            "process_reward": float(sum(float(u.process_reward) for u in traj.turns)), "score": float(traj.score),
            "stop_reason": str(traj.stop_reason), "num_turns": len(traj.turns),
            "tool_calls": int(sum(u.tool_calls for u in traj.turns))}


def trajectory_rows(step: int, trajectories: list[Any], max_rows: int | None = None) -> list[dict[str, Any]]:
    """One row per trajectory: question, gold, answer, EM, reward parts, and every turn's action and
    observation text (as the model produced / the tool returned it), plus a readable transcript."""
    trajs = trajectories[:max_rows] if max_rows else trajectories
    width = max((len(t.turns) for t in trajs), default=0)
    rows = []
    for t in trajs:
        row: dict[str, Any] = {
            "iteration": int(step), "sample_id": str(t.sample_id),
            "question": str((t.sample or {}).get("question", "")), "gold": " | ".join(_gold(t)),
            "answer": "" if t.answer is None else str(t.answer), **_outcome(t)}
        lines = []
        for i in range(width):
            turn = t.turns[i] if i < len(t.turns) else None
            row[f"turn{i + 1}_action"] = turn.action_text if turn else ""
            row[f"turn{i + 1}_observation"] = turn.observation_text if turn else ""
            row[f"turn{i + 1}_process_reward"] = float(turn.process_reward) if turn else 0.0
            if turn:
                lines.append(f"[action {i + 1}] {turn.action_text}")
                lines += [f"[observation {i + 1}] {turn.observation_text}"] if turn.observation_text else []
        row["transcript"] = "\n".join(lines)
        rows.append(row)
    return rows


def rows_to_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return {k: [row.get(k) for row in rows] for k in keys}


def _span(name: str, span_type: str, start_ns: int, end_ns: int, inputs: Any, outputs: Any,
          attributes: dict[str, Any], ok: bool = True, children: list[dict] | None = None) -> dict[str, Any]:
    return {"name": name, "span_type": span_type, "start_ns": int(start_ns), "end_ns": int(end_ns), "inputs": inputs,
            "outputs": outputs, "attributes": attributes, "status": "OK" if ok else "ERROR",
            "children": children or []}


def _walk(span: dict[str, Any], parent: dict[str, Any] | None = None):
    """(span, its parent) for every span of a tree, parents first."""
    yield span, parent
    for child in span.get("children") or []:
        yield from _walk(child, span)


def _cut(text: Any, limit: int = MAX_TEXT_CHARS) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + " ...[cut]"


def _turn_span(index: int, turn: Any, start_ns: int, context_tokens: int) -> dict[str, Any]:
    """The turn's generation, then its tool calls one after another (their latencies as measured)."""
    info = turn.info or {}
    gen_start, gen_end, tools_end = info.get("timing_ns") or (start_ns, start_ns, start_ns)
    tools, t = [], gen_end
    for call in info.get("calls") or []:
        latency_ms, ok = float(call.get("latency_ms") or 0.0), bool(call.get("ok"))
        ms, error = round(latency_ms, 3), {"error": _cut(call["error"], 500)} if call.get("error") else {}
        tools.append(_span(str(call.get("name") or "<unnamed>"), "TOOL", t, t + int(latency_ms * 1e6),
                           call.get("arguments") or {}, {"titles": list(call.get("titles") or []), "success": ok,
                                                         "error": call.get("error"), "latency_ms": ms},
                           {"tool": str(call.get("name")), "success": ok, "latency_ms": ms, **error}, ok))
        t = tools[-1]["end_ns"]
    attributes = {
        "turn": index, "action_tokens": len(turn.action_ids), "truncated": bool(turn.truncated),
        "masked": bool(turn.masked), "process_reward": float(turn.process_reward),
        "tool_calls": int(turn.tool_calls), "valid_tool_calls": int(turn.valid_tool_calls),
        "observation": _cut(turn.observation_text), "observation_truncated": bool(turn.observation_truncated),
        # MLflow shows token counts of LLM spans (the context is the prompt and every earlier turn)
        "mlflow.chat.tokenUsage": {"input_tokens": context_tokens, "output_tokens": len(turn.action_ids),
                                   "total_tokens": context_tokens + len(turn.action_ids)},
        **({"parse_error": _cut(info["parse_error"], 500)} if info.get("parse_error") else {})}
    return _span(f"turn {index}", "LLM", gen_start, max(tools_end, t), {"turn": index}, turn.action_text, attributes,
                 children=tools)


def trajectory_span(step: int, traj: Any, end_ns: int | None = None) -> dict[str, Any]:
    """The span tree of one trajectory (see the module doc)."""
    t, turns, context = 0, [], len(traj.prompt_ids)  # untimed: laid out from 0, then shifted to end at `end_ns`
    for i, turn in enumerate(traj.turns, start=1):
        turns.append(_turn_span(i, turn, t, context))
        t = turns[-1]["end_ns"]
        context += len(turn.action_ids) + len(turn.observation_ids)
    if not (traj.turns and all((turn.info or {}).get("timing_ns") for turn in traj.turns)):
        shift = (end_ns or time.time_ns()) - t
        for span, _ in (pair for top in turns for pair in _walk(top)):
            span["start_ns"], span["end_ns"] = span["start_ns"] + shift, span["end_ns"] + shift
    start = turns[0]["start_ns"] if turns else (end_ns or time.time_ns())
    attributes = {"sample_id": str(traj.sample_id), "iteration": int(step), "gold": _gold(traj), **_outcome(traj),
                  "process_rewards": [float(turn.process_reward) for turn in traj.turns],
                  "action_tokens": int(traj.num_action_tokens)}
    return _span("trajectory", "AGENT", start, max([start, *(s["end_ns"] for s in turns)]),
                 {"question": str((traj.sample or {}).get("question", ""))}, {"answer": traj.answer}, attributes,
                 children=turns)


def trace_record(run_key: str, experiment: str, step: int, index: int, traj: Any,
                 end_ns: int | None = None) -> dict[str, Any]:
    """The `trace` record of the `index`-th trajectory logged at iteration `step` of run `run_key`."""
    return {"op": "trace", "key": run_key, "experiment": experiment, "trace_key": f"{run_key}/{int(step)}/{index}",
            "tags": {"iteration": str(int(step)), "sample_id": _valid(str(traj.sample_id))},
            "root": _valid(trajectory_span(step, traj, end_ns))}


def _valid(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD: a model can write one as a JSON escape in a
    tool call ("\\udcff"), and no store can encode it (the whole trace would be set aside)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_valid(k): _valid(v) for k, v in value.items()}
    return [_valid(v) for v in value] if isinstance(value, list) else value


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
    from mlflow.tracing.constant import SpanAttributeKey as Key, TraceMetadataKey, TraceTagKey

    trace_id, root = trace_id_of(record["trace_key"]), record["root"]
    ids: dict[int, bytes] = {}
    spans = []
    for n, (node, parent) in enumerate(_walk(root)):
        ids[id(node)] = hashlib.md5(f"{record['trace_key']}/{n}".encode()).digest()[:8]
        attributes = {k: _dump(v) for k, v in node["attributes"].items()}
        attributes.update({Key.REQUEST_ID: _dump(trace_id), Key.SPAN_TYPE: _dump(node["span_type"]),
                           Key.INPUTS: _dump(node["inputs"]), Key.OUTPUTS: _dump(node["outputs"]),
                           **({Key.EXPERIMENT_ID: _dump(experiment_id)} if parent is None else {})})
        spans.append(Span.from_dict({
            "trace_id": _b64(bytes.fromhex(trace_id[3:])), "span_id": _b64(ids[id(node)]),
            "parent_span_id": _b64(ids[id(parent)]) if parent is not None else None, "name": node["name"],
            "start_time_unix_nano": node["start_ns"], "end_time_unix_nano": node["end_ns"],
            "status": {"code": "STATUS_CODE_ERROR" if node["status"] == "ERROR" else "STATUS_CODE_OK", "message": ""},
            "attributes": attributes, "events": []}))
    inputs, outputs = _dump(root["inputs"])[:1000], _dump(root["outputs"])[:1000]
    info = TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=root["start_ns"] // 1_000_000,
        execution_duration=(root["end_ns"] - root["start_ns"]) // 1_000_000,
        state=TraceState.OK, request_preview=inputs, response_preview=outputs,
        trace_metadata={TraceMetadataKey.SOURCE_RUN: run_id, "mlflow.trace_schema.version": "3",
                        TraceMetadataKey.INPUTS: inputs, TraceMetadataKey.OUTPUTS: outputs},
        tags={**{k: str(v) for k, v in (record.get("tags") or {}).items()}, TraceTagKey.TRACE_NAME: root["name"],
              TRACE_KEY_TAG: record["trace_key"]})
    return info, spans
