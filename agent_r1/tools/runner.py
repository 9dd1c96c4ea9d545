"""Executes tool calls safely: unknown tools, bad arguments, exceptions, crashes and time-outs all
become failed `ToolResult`s whose text tells the model what went wrong. The one exception that
passes through is `ServiceUnavailableError` (a tool's backing service is down after retries, or
keeps timing out), which stops the run rather than feeding the model error text.

Where a call runs decides what a timeout can do:
- isolated tools (the default: `@tool` functions, plugins, any tool class without `isolate = False`)
  run in worker processes (the end of this module). A call past its timeout is killed with its worker, so
  it cannot hold a slot or perform its side effect later; the worker is replaced, the others live on.
- in-process tools (`isolate = False`: search, calculator) run on a daemon thread in this process.
  Their work is bounded by their own limits (the retriever's request timeout, the calculator's
  input limits); a timed-out call is abandoned, and a tool with `max_consecutive_timeouts` that
  keeps timing out (a hung Elasticsearch node) stops the run like a dead one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_any
from typing import Any

import jsonschema

from agent_r1.retrieval.errors import ServiceUnavailableError
from agent_r1.tools.base import ServiceTimeoutError, Tool, ToolResult
from agent_r1.tools.clip import clip_result as _clip
from agent_r1.tools.procs import contain_worker, kill_tree


@dataclass
class ToolCall:
    """A parsed call. `error` is set when parsing failed (the call is then not executed)."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None


def is_isolated(tool: Tool) -> bool:
    """Tools run in a worker process unless they declare `isolate = False` (see the module docstring)."""
    return bool(getattr(tool, "isolate", True)) and fork_available()


class ToolRunner:
    """Validates and runs calls against a fixed set of tools with a per-call timeout.

    `max_workers` bounds the worker processes of isolated tools (forked on first use, kept between
    calls; calls of one tool in a batch run on up to this many at once).
    """

    def __init__(self, tools: list[Tool], timeout_s: float = 10.0, max_result_chars: int = 20_000,
                 max_workers: int = 4):
        if timeout_s <= 0:
            raise ValueError(f"tool timeout_s (search.timeout_s in params.yaml) must be > 0 seconds, got {timeout_s}")
        self.tools = {t.name: t for t in tools}
        self.timeout_s = timeout_s
        self.max_result_chars = max_result_chars
        self._validators = {t.name: jsonschema.Draft202012Validator(t.parameters) for t in tools}
        self._pool = WorkerPool({t.name: t for t in tools if is_isolated(t)}, max_workers)
        # a runner dropped without close() (a test's env, a notebook cell) still stops its workers
        self._finalizer = weakref.finalize(self, self._pool.close)
        self._timeouts_in_a_row: dict[str, int] = {}
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
        batched = callable(getattr(tool, "batch_call", None))
        if is_isolated(tool):
            # a batch tool answers its calls in one job; other calls run (and time out) one by one
            jobs = [args] if batched else [[a] for a in args]
            outcomes = self._pool.run(tool.name, jobs, batched, self.timeout_s, self.max_result_chars)
        else:
            jobs = [args]
            outcomes = [_run_on_thread(tool, args, batched, self.timeout_s, self.max_result_chars)]
        outs = [r for job, outcome in zip(jobs, outcomes) for r in self._results(tool, job, outcome)]
        per_call = (time.perf_counter() - start) / max(len(outs), 1)  # a batch's time, shared by its calls
        for o in outs:
            o.metadata["seconds"] = per_call
            self._count(tool.name, ok=o.success, seconds=per_call)
        self._check_hung(tool, [o.kind for o in outcomes])
        return outs

    def _results(self, tool: Tool, job: list[dict[str, Any]], outcome: Outcome) -> list[ToolResult]:
        if outcome.kind == "ok":
            return outcome.value
        if outcome.kind == "unavailable":
            # the service is down, not the model's fault: stop the run (see ServiceUnavailableError)
            raise outcome.value if isinstance(outcome.value, ServiceUnavailableError) \
                else ServiceUnavailableError(str(outcome.value))
        if outcome.kind == "timeout":
            text, error = f"Error: tool {tool.name!r} timed out after {self.timeout_s:g}s", "timeout"
        elif outcome.kind == "crash":
            text, error = f"Error: tool {tool.name!r} crashed: {outcome.value}", "crash"
        else:  # a tool bug must not end the rollout; the model is told
            text, error = f"Error: tool {tool.name!r} failed: {outcome.value}"[:500], "exception"
        return [ToolResult(text, False, {"error": error}) for _ in job]

    def _check_hung(self, tool: Tool, kinds: list[str]) -> None:
        """A tool that declares `max_consecutive_timeouts` fronts a service (search: the retriever);
        that many timed-out round-trips in a row mean the service hangs, which is not the model's
        doing: stop the run as if it were down, rather than train on timeout observations."""
        limit = getattr(tool, "max_consecutive_timeouts", None)
        if not limit:
            return
        if "timeout" in kinds:
            self._timeouts_in_a_row[tool.name] = self._timeouts_in_a_row.get(tool.name, 0) + 1
        elif any(k == "ok" for k in kinds):
            self._timeouts_in_a_row[tool.name] = 0
        if self._timeouts_in_a_row.get(tool.name, 0) >= limit:
            raise ServiceTimeoutError(
                f"tool {tool.name!r} timed out {limit} times in a row (after {self.timeout_s:g}s each): the "
                "service behind it hangs (for search: the retriever; an Elasticsearch node that accepts "
                "connections but does not answer). Stopped the run rather than train on timeout observations; "
                "check the service, then continue with `--resume` (raise search.timeout_s if it is only slow, "
                f"or env.tool_args.{tool.name}.max_consecutive_timeouts to tolerate more)")

    def _count(self, name: str, ok: bool, seconds: float) -> None:
        """`stats[tool]`: calls, failures, seconds (total) and max_seconds (slowest call)."""
        s = self.stats.setdefault(name, {"calls": 0, "failures": 0, "seconds": 0.0, "max_seconds": 0.0})
        s["calls"] += 1
        s["failures"] += 0 if ok else 1
        s["seconds"] += seconds
        s["max_seconds"] = max(s["max_seconds"], seconds)

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers of isolated tools (for tests and debugging)."""
        return self._pool.pids()

    def close(self) -> None:
        """Stops the worker processes; the runner may still be used (workers start again on demand)."""
        self._pool.close()


def _run_on_thread(tool: Tool, args: list[dict[str, Any]], batched: bool, timeout_s: float,
                   max_chars: int) -> Outcome:
    """Runs an in-process tool on a daemon thread of its own: past the timeout the call is abandoned
    (its own limits end it; a daemon thread never holds up the interpreter's exit) and nothing
    else waits on it, unlike a fixed thread pool whose threads hung calls would all take."""
    box: list[Outcome] = []
    thread = threading.Thread(target=lambda: box.append(invoke(tool, args, batched, max_chars)),
                              name=f"tool-{tool.name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return box[0] if box else Outcome("timeout")


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


# ------------------------------------------------------------------------------------------------
# Worker processes for isolated tools. They are forked, not spawned: a forked worker inherits the
# tool objects, so any tool works as it is (closures, notebook functions, plugin instances holding
# clients) with no pickling, and a worker starts in milliseconds. Only arguments and results cross
# the pipe. Each worker leads its own process group, dies with the runner's process and keeps what its
# tools start among its descendants (procs.py), so killing it also ends what its tool started.

_START_TIMEOUT_S = 30.0


@dataclass
class Outcome:
    """How one job ended: ok (value: its ToolResults), timeout, crash (value: what happened),
    error (value: "Type: message" of the tool's exception) or unavailable (the ServiceUnavailableError)."""

    kind: str
    value: Any = None


def fork_available() -> bool:
    return "fork" in mp.get_all_start_methods()


def invoke(tool: Tool, args: list[dict[str, Any]], batched: bool, max_chars: int) -> Outcome:
    """Runs one job (in a worker process or on a thread) and never raises."""
    try:
        outs = tool.batch_call(args) if batched else [tool.call(a) for a in args]  # type: ignore[attr-defined]
        if not isinstance(outs, list) or len(outs) != len(args):
            raise TypeError(f"tool {tool.name!r} returned {type(outs).__name__}, expected one result per call")
        return Outcome("ok", [_clip(o, max_chars) for o in outs])
    except ServiceUnavailableError as exc:
        return Outcome("unavailable", exc)
    except Exception as exc:
        return Outcome("error", f"{type(exc).__name__}: {exc}")


def _serve(conn: Connection, tools: dict[str, Tool], parent_pid: int) -> None:
    """A worker's loop: one job at a time, until the pipe closes or the runner's process is gone."""
    contain_worker(parent_pid)  # dies with the runner's process, keeps what its tools start (procs.py)
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle; it stops us
    conn.send("ready")
    while True:
        if not conn.poll(1.0):
            if os.getppid() != parent_pid:  # orphaned (the runner's process was killed): leave
                return
            continue
        try:
            name, args, batched, max_chars = conn.recv()
        except EOFError:
            return
        outcome = invoke(tools[name], args, batched, max_chars)
        if outcome.kind == "unavailable":  # an exception may not unpickle on the other side; its text does
            outcome = Outcome("unavailable", str(outcome.value))
        try:
            conn.send(outcome)
        except Exception as exc:  # pickling failed before anything was written
            conn.send(Outcome("error", f"its result could not be passed back ({type(exc).__name__}: {exc})"))


class _Worker:
    def __init__(self, tools: dict[str, Tool]):
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, tools, os.getpid()), name="agent-r1-tool-worker",
                                daemon=True)  # daemon: multiprocessing stops it if the runner's process exits
        self.proc.start()
        child.close()
        if not self.conn.poll(_START_TIMEOUT_S):
            self.kill()
            raise RuntimeError(f"a tool worker process did not start within {_START_TIMEOUT_S:g}s")
        self.conn.recv()

    def kill(self) -> None:
        """SIGKILL to it, its process group and everything its tools started (a `setsid` child too), then
        reap it: once this returns, the call is over for good."""
        if self.proc.pid is not None:
            kill_tree(self.proc.pid)
        try:
            self.proc.kill()
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.join(10)
        self.conn.close()


class WorkerPool:
    """Up to `max_workers` worker processes, started on demand and kept between calls; a worker
    whose call times out or crashes is killed and replaced, the others are untouched."""

    def __init__(self, tools: dict[str, Tool], max_workers: int):
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.tools = tools
        self.max_workers = max_workers
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()  # one batch at a time, so workers never exceed max_workers

    def run(self, name: str, jobs: list[list[dict[str, Any]]], batched: bool, timeout_s: float,
            max_chars: int) -> list[Outcome]:
        """Runs `jobs` of tool `name` on up to max_workers workers; each job has `timeout_s` from
        the moment it is sent (a worker's start is not counted)."""
        with self._lock:
            outcomes: list[Outcome] = [Outcome("timeout")] * len(jobs)
            todo = deque(range(len(jobs)))
            busy: dict[Connection, tuple[_Worker, int, float]] = {}
            try:
                while todo or busy:
                    while todo and len(busy) < self.max_workers:
                        i = todo.popleft()
                        worker = self._checkout()
                        try:
                            worker.conn.send((name, jobs[i], batched, max_chars))
                        except OSError:  # it died while idle
                            worker.kill()
                            outcomes[i] = Outcome("crash", "its worker process was gone before the call was sent")
                            continue
                        busy[worker.conn] = (worker, i, time.monotonic() + timeout_s)
                    first = min(deadline for _, _, deadline in busy.values())
                    for conn in wait_any(list(busy), timeout=max(0.0, first - time.monotonic())):
                        worker, i, _ = busy.pop(conn)  # type: ignore[index]
                        outcomes[i] = self._receive(worker)
                    now = time.monotonic()
                    for conn, (worker, i, deadline) in list(busy.items()):
                        if deadline <= now:
                            del busy[conn]
                            worker.kill()
                            outcomes[i] = Outcome("timeout")
            finally:
                for worker, _, _ in busy.values():  # interrupted midway: no call is left running
                    worker.kill()
            return outcomes

    def _checkout(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.proc.is_alive():
                return worker
            worker.kill()
        return _Worker(self.tools)

    def _receive(self, worker: _Worker) -> Outcome:
        try:
            outcome = worker.conn.recv()
        except Exception:  # EOF: the tool took its process down (os._exit, a segfault, the OOM killer)
            worker.kill()
            return Outcome("crash", f"its worker process exited with exit code {worker.proc.exitcode}")
        self._idle.append(worker)
        return outcome

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._idle if w.proc.is_alive() and w.proc.pid is not None]

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
