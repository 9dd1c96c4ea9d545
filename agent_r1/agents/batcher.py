"""Concurrent calls of many agents -> one `generate` per batch, so the engine decodes them together.

Each HTTP call submits its prompt and awaits its future; one worker thread gathers a batch, groups the
calls by their stop strings (one `SamplingParams` per engine call; the budgets differ per prompt, which
the engines take as a list) and generates each group as one batch. The engines are not thread-safe: only
this thread touches the engine.

How long a batch gathers: an engine call costs nearly the same for 20 prompts as for 128 (at the
scales trained here its time is the decoding steps, not the batch), so a batch waits for every
session that may still call. When the driver says how many run (`running`: agents/rollout.py), the
batch closes once that many calls wait, or once no call has arrived for `wait_s` (a session busy
in a slow tool does not hold the others longer). Without it (the endpoint used directly) the first
call waits `wait_s` once for stragglers. Taking only what has queued a few ms after the first call
would split a rollout into many small engine calls: sessions come back from their tools out of step,
and a batch that leaves some behind keeps them out of step (`agent/engine_calls` shows it).

An agent re-sends its whole history on every call. With an engine that keeps prefixes
(`supports_prefix_reuse`: TransformersEngine's per-key KV cache; vLLM reuses by content with its
prefix caching), each call is keyed by its session, so a call encodes only what the session added
since its previous one; a closed session's cache is freed (`forget`), in order with its calls.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from agent_r1.rollout.engine import GenerationEngine, SamplingParams


@dataclass
class _Job:
    prompt: list[int]
    budget: int
    stop: tuple[str, ...]
    seed: int | None = None
    key: Hashable | None = None  # the session: the engine's prefix key
    future: Future = field(default_factory=Future)


@dataclass(frozen=True)
class _Forget:
    key: Hashable


class Batcher:
    def __init__(self, engine: GenerationEngine, params: SamplingParams, wait_s: float = 0.05,
                 max_batch: int = 256):
        self.engine, self.params, self.wait_s, self.max_batch = engine, params, wait_s, max_batch
        self._queue: queue.Queue[_Job | _Forget | None] = queue.Queue()
        self._reuse = bool(getattr(engine, "supports_prefix_reuse", False))
        self.batch_sizes: list[int] = []  # per engine call (metrics, tests)
        self.engine_seconds: list[float] = []  # per engine call: where an agent rollout's seconds go
        # entered around each engine call: the caller's autocast (thread-local in torch, so the trainer's
        # would not reach this thread); set by whoever drives the endpoint (agents/rollout.py)
        self.context: Callable[[], contextlib.AbstractContextManager] | None = None
        # how many sessions may still call (each has at most one call waiting, the agents here): a batch
        # waits for that many; set by the same driver, None when nobody counts
        self.running: Callable[[], int] | None = None
        self._thread = threading.Thread(target=self._work, name="agent-r1-endpoint-batcher", daemon=True)
        self._thread.start()

    def submit(self, prompt: list[int], budget: int, stop: tuple[str, ...], seed: int | None = None,
               key: Hashable | None = None) -> Future:
        """A future of the prompt's `GenerationOutput`; an engine error is set on every future of its batch.
        `seed`: this call's own (its tokens then do not depend on the calls it is batched with); `key`: its
        session, whose cached prefix it reuses and replaces."""
        job = _Job(list(prompt), budget, stop, seed, key)
        self._queue.put(job)
        return job.future

    def forget(self, key: Hashable) -> None:
        """Frees the session's cached prefix once the calls queued before are done."""
        if self._reuse:
            self._queue.put(_Forget(key))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _work(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs, forget = [], []
            (forget if isinstance(first, _Forget) else jobs).append(first)
            try:  # the calls that arrive together (the module's docstring says how long it waits)
                while len(jobs) < self.max_batch:
                    running = self.running() if self.running is not None else 0
                    if running and len(jobs) >= running:
                        break
                    job = self._queue.get(timeout=self.wait_s if running or len(jobs) == 1 else 0)
                    if job is None:
                        self._queue.put(None)  # close after this batch
                        break
                    (forget if isinstance(job, _Forget) else jobs).append(job)
            except queue.Empty:
                pass
            groups: dict[tuple[str, ...], list[_Job]] = {}
            for job in jobs:
                groups.setdefault(job.stop, []).append(job)
            for stop, group in groups.items():
                self._run(stop, group)
            if forget:  # after the batch: a session's last call may be in it
                self.engine.drop_prefixes([f.key for f in forget])  # type: ignore[attr-defined]

    def _run(self, stop: tuple[str, ...], group: list[_Job]) -> None:
        params = replace(self.params, max_new_tokens=[j.budget for j in group], stop_strings=stop)
        if any(j.seed is not None for j in group):  # per call; an unseeded call beside them draws its own
            params = replace(params, seed=[random.getrandbits(63) if j.seed is None else j.seed for j in group])
        start = time.perf_counter()
        try:
            with self.context() if self.context is not None else contextlib.nullcontext():
                keys = {"prefix_keys": [j.key for j in group]} if self._reuse else {}
                outs = self.engine.generate([j.prompt for j in group], params, **keys)
        except BaseException as exc:  # noqa: BLE001  (handed to every waiting caller, who re-raises it)
            for job in group:
                job.future.set_exception(exc)
            return
        finally:  # appended together, so a reader sees the two lists the same length
            self.engine_seconds.append(time.perf_counter() - start)
            self.batch_sizes.append(len(group))
        for job, out in zip(group, outs):
            job.future.set_result(out)
