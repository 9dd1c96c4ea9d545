"""Running agent sessions, each within `env.agent_timeout_s`, whatever the agent does meanwhile.

Every session runs in a daemon thread of its own: a sync agent calls the function there, an async
agent runs on an event loop of its own there. The rollout waits for each one's result up to the
timeout and then scores the session as timed out (a failure), whether or not its thread has ended:
- Python cannot stop a thread, so a sync agent stuck in a call is left behind; a daemon thread does
  not keep the process from exiting (a pool's worker thread is joined at exit: the trainer hung);
- an async agent that blocks its thread (a sync HTTP call, `time.sleep`) instead of awaiting cannot
  be cancelled by its own loop either: on a loop shared with the other sessions it stalled them all,
  and it finished "in time" once it unblocked, scored as a success. On its own loop it stalls only
  itself, and the deadline is kept by the waiting side, not by the agent's loop.
A timed-out sync agent's client is closed, so its next endpoint call fails and ends it; an async
agent that awaits is cancelled on its own loop at the deadline (its client closed with it).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class SessionResult:
    value: Any = None  # what the agent returned
    error: str = ""  # why it gave no usable value: its exception, a timeout, a wrong return type


class _Deadline(Exception):
    """An async agent cancelled by its own loop at the deadline (told apart from a TimeoutError of its own)."""


def _in_daemon_thread(fn: Callable[[], Any]) -> Future:
    """A future of `fn()` run in a new daemon thread."""
    fut: Future = Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn())
        except BaseException as exc:  # noqa: BLE001  (SystemExit too: the session's failure, not the run's)
            fut.set_exception(exc if isinstance(exc, Exception) else RuntimeError(f"{type(exc).__name__}: {exc}"))

    threading.Thread(target=run, name="agent-r1-agent", daemon=True).start()
    return fut


def _client(openai: Any, is_async: bool, base_url: str, key: str, tls: Any) -> Any:
    """An unmodified openai client of one session. Its HTTP client is openai's default one, handed the
    rollout's one TLS context: making a context loads the CA bundle (~22 ms), so one per session would
    start a rollout's sessions one after another on the runner's one thread, and their first calls
    would reach the engine a few at a time (the endpoint is plain HTTP on loopback: TLS is never used)."""
    http = (openai.DefaultAsyncHttpxClient if is_async else openai.DefaultHttpxClient)(verify=tls)
    return (openai.AsyncOpenAI if is_async else openai.OpenAI)(base_url=base_url, api_key=key, max_retries=0,
                                                               http_client=http)


async def _own_loop_session(agent: Callable[..., Any], make_client: Callable[[], Any],
                            row: dict[str, Any], timeout_s: float, kwargs: dict[str, Any]) -> Any:
    client = make_client()
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:  # an agent that awaits is cancelled here at its deadline; one that blocks, by the waiting side
        return await asyncio.wait_for(agent(client, row, **kwargs), timeout_s)
    except asyncio.TimeoutError:
        if loop.time() - start < timeout_s:
            raise  # the agent's own TimeoutError, raised before the deadline
        raise _Deadline() from None
    finally:
        await client.close()


@dataclass
class Running:
    """How many sessions run now (hold a slot and have not ended): the endpoint's batcher waits for
    that many calls (batcher.py). Changed on the runner's event loop only, read from the batcher's thread."""

    count: int = 0

    def __call__(self) -> int:
        return self.count


def run_sessions(agent: Callable[..., Any], base_url: str, jobs: list[tuple[dict[str, Any], str]],
                 concurrency: int, timeout_s: float, kwargs: dict[str, Any] | None = None,
                 running: Running | None = None) -> list[SessionResult]:
    """Runs `agent(client, sample, **kwargs)` for every (sample, session key), at most `concurrency` at once
    (`kwargs`: `tools`, the run's MCP tools, for an agent that takes them: agent_tools.py); `running`
    counts the sessions running meanwhile (a timed-out one stops counting at its deadline)."""
    running = running if running is not None else Running()
    kwargs = kwargs or {}
    import httpx
    import openai

    is_async = inspect.iscoroutinefunction(agent)
    tls = httpx.create_ssl_context()  # the context httpx makes by default, once for every session (_client)
    timed_out = f"timed out after env.agent_timeout_s={timeout_s}s"
    left_running = 0

    async def main() -> list[SessionResult]:
        sem = asyncio.Semaphore(concurrency)

        async def one(sample: dict[str, Any], key: str) -> SessionResult:
            nonlocal left_running
            async with sem:  # a timed-out session's slot is freed: its thread no longer counts
                row = copy.deepcopy(sample)
                client = None if is_async else _client(openai, False, base_url, key, tls)
                work = ((lambda: asyncio.run(_own_loop_session(
                            agent, lambda: _client(openai, True, base_url, key, tls), row, timeout_s, kwargs)))
                        if is_async else (lambda: agent(client, row, **kwargs)))
                running.count += 1  # counted before its thread starts: its first call finds it counted
                try:  # the deadline is kept here, on a loop no agent runs on
                    waited = asyncio.wrap_future(_in_daemon_thread(work))
                    done, _ = await asyncio.wait({waited}, timeout=timeout_s)
                    if not done:
                        waited.cancel()
                        left_running += 1
                        return SessionResult(error=timed_out)
                    return SessionResult(value=waited.result())
                except _Deadline:
                    return SessionResult(error=timed_out)
                except Exception as exc:  # noqa: BLE001  (the session's failure, counted; the run continues)
                    return SessionResult(error=f"{type(exc).__name__}: {exc}")
                finally:
                    running.count -= 1
                    if client is not None:  # its connections; a stuck sync agent's next call then fails
                        client.close()

        return list(await asyncio.gather(*(one(s, k) for s, k in jobs)))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        results = asyncio.run(main())
    else:
        with ThreadPoolExecutor(1) as one_loop:  # called from inside an event loop (a notebook): its own loop
            results = one_loop.submit(asyncio.run, main()).result()
    if left_running:
        log.warning("%d agent sessions were still running at env.agent_timeout_s=%ss: scored as failures and "
                    "left to end in their daemon threads (Python cannot stop a thread)", left_running, timeout_s)
    return results
