"""Executes tool calls safely: unknown tools, bad arguments, exceptions and time-outs all
become failed `ToolResult`s whose text tells the model what went wrong. The one exception that
passes through is `ServiceUnavailableError` (a tool's backing service is down after retries),
which stops the run rather than feeding the model error text."""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
from dataclasses import dataclass
from typing import Any

import jsonschema

from agent_r1.tools.base import ServiceUnavailableError, Tool, ToolResult


@dataclass
class ToolCall:
    """A parsed call. `error` is set when parsing failed (the call is then not executed)."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None


class ToolRunner:
    """Validates and runs calls against a fixed set of tools with a per-call timeout."""

    def __init__(self, tools: list[Tool], timeout_s: float = 10.0, max_result_chars: int = 20_000):
        self.tools = {t.name: t for t in tools}
        self.timeout_s = timeout_s
        self.max_result_chars = max_result_chars
        self._validators = {t.name: jsonschema.Draft202012Validator(t.parameters) for t in tools}
        # One long-lived worker thread per runner; a hung tool is abandoned, not joined.
        self._pool = cf.ThreadPoolExecutor(max_workers=4, thread_name_prefix="tool")
        self.stats: dict[str, dict[str, float]] = {}

    def validate(self, call: ToolCall) -> str | None:
        """Returns an error message for the model, or None when the call may run."""
        if call.error:
            return call.error
        if call.name not in self.tools:
            return f"unknown tool {_short(repr(call.name))}; available tools: {', '.join(sorted(self.tools))}"
        errors = sorted(self._validators[call.name].iter_errors(call.arguments), key=str)
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "arguments"
            return f"invalid arguments for {call.name!r} at {_short(where)}: {_short(errors[0].message)}"
        return None

    def run(self, calls: list[ToolCall]) -> list[ToolResult]:
        """Runs the valid calls (batched per tool when it offers `batch_call`), in order."""
        results: list[ToolResult | None] = [None] * len(calls)
        by_tool: dict[str, list[int]] = {}
        for i, call in enumerate(calls):
            err = self.validate(call)
            if err is not None:
                results[i] = ToolResult(text=f"Error: {err}", success=False, metadata={"error": "invalid"})
                self._count(call.name if call.name in self.tools else "<invalid>", ok=False, seconds=0.0)
            else:
                by_tool.setdefault(call.name, []).append(i)
        for name, idxs in by_tool.items():
            outs = self._execute(self.tools[name], [calls[i].arguments for i in idxs])
            for i, res in zip(idxs, outs):
                results[i] = res
        return [r for r in results if r is not None]

    def _execute(self, tool: Tool, args: list[dict[str, Any]]) -> list[ToolResult]:
        start = time.perf_counter()
        batch = getattr(tool, "batch_call", None)
        fn = (lambda: batch(args)) if callable(batch) else (lambda: [tool.call(a) for a in args])
        try:
            outs = self._pool.submit(fn).result(timeout=self.timeout_s)
            if not isinstance(outs, list) or len(outs) != len(args):
                raise TypeError(f"tool {tool.name!r} returned {type(outs).__name__}, expected one result per call")
            outs = [self._clip(o) for o in outs]
        except ServiceUnavailableError:
            raise  # the service is down, not the model's fault: stop the run (see ServiceUnavailableError)
        except cf.TimeoutError:
            outs = [ToolResult(f"Error: tool {tool.name!r} timed out after {self.timeout_s:g}s", False,
                               {"error": "timeout"}) for _ in args]
        except Exception as exc:  # a tool bug must not end the rollout; the model is told
            msg = f"Error: tool {tool.name!r} failed: {type(exc).__name__}: {exc}"[:500]
            outs = [ToolResult(msg, False, {"error": "exception"}) for _ in args]
        per_call = (time.perf_counter() - start) / max(len(outs), 1)  # a batch's time, shared by its calls
        for o in outs:
            o.metadata["seconds"] = per_call
            self._count(tool.name, ok=o.success, seconds=per_call)
        return outs

    def _clip(self, result: Any) -> ToolResult:
        if not isinstance(result, ToolResult):
            result = ToolResult(text=json.dumps(result) if not isinstance(result, str) else result)
        if len(result.text) > self.max_result_chars:
            result.text = result.text[: self.max_result_chars] + " ...[truncated]"
            result.metadata["clipped"] = True
        return result

    def _count(self, name: str, ok: bool, seconds: float) -> None:
        """`stats[tool]`: calls, failures, seconds (total) and max_seconds (slowest call)."""
        s = self.stats.setdefault(name, {"calls": 0, "failures": 0, "seconds": 0.0, "max_seconds": 0.0})
        s["calls"] += 1
        s["failures"] += 0 if ok else 1
        s["seconds"] += seconds
        s["max_seconds"] = max(s["max_seconds"], seconds)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _short(text: str, limit: int = 300) -> str:
    """An error message cut to `limit` characters, keeping its end (jsonschema messages quote the
    model's whole value first and say what was wrong last: "'...' is not of type 'string'")."""
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def tool_metrics(step_infos: list[dict[str, Any]]) -> dict[str, float]:
    """Flat per-tool metrics from env step infos (their "tools" entry), for a metrics sink:
    `tools/<name>/calls`, `tools/<name>/failure_rate`, `tools/<name>/latency_ms` (mean per call)."""
    totals: dict[str, dict[str, float]] = {}
    for info in step_infos:
        for name, s in (info.get("tools") or {}).items():
            t = totals.setdefault(name, {"calls": 0, "failures": 0, "seconds": 0.0})
            for key in t:
                t[key] += s.get(key, 0)
    out: dict[str, float] = {}
    for name, t in sorted(totals.items()):
        calls = max(t["calls"], 1)
        out[f"tools/{name}/calls"] = t["calls"]
        out[f"tools/{name}/failure_rate"] = t["failures"] / calls
        out[f"tools/{name}/latency_ms"] = 1000.0 * t["seconds"] / calls
    return out
