"""Child processes for the tests that start their own (learner ranks over gloo, runs racing for one
folder): forked from a server that has already imported torch, transformers and the trainer.

A spawned child imports all of that again, 3-8 s of CPU on 2 cores each, and the suite started about
twenty of them. multiprocessing's "forkserver" starts one server per test process, on first use,
imports PRELOAD there once, and forks every child from it: the children are still fresh processes
(their own interpreter state, their own gloo group or SQLite connection), only their imports are
shared.

What a child does not inherit from the test is the environment: it has the server's, as it was when
the server started. `with_environment(fn)` hands the test's environment of that moment to the child,
as a spawned child would inherit it (a long-lived child that runs several jobs, such as test_ddp's
ranks, still needs what changes between jobs as an argument).
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import Any

# what the children import anyway; one the server cannot import is skipped (multiprocessing's rule).
# Not MLflow: its import starts pyarrow's jemalloc background thread, and the server must have one
# thread when it forks (a lock another thread held would stay locked in the child).
PRELOAD = ["torch", "transformers.modeling_utils", "transformers.models.llama.modeling_llama",
           "agent_r1.training.trainer", "agent_r1.runs.run", "agent_r1.tracking"]
START_METHOD = "forkserver"


def context() -> BaseContext:
    """The forkserver context, its server set to preload PRELOAD (used when the server starts: the
    first child this process asks for)."""
    ctx = mp.get_context(START_METHOD)
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def with_environment(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, to run in a child under the environment this process has now (picklable: a child target)."""
    return functools.partial(_in_environment, dict(os.environ), fn)


def _in_environment(environment: dict[str, str], fn: Callable[..., Any], *args: Any) -> Any:
    os.environ.clear()
    os.environ.update(environment)
    return fn(*args)
