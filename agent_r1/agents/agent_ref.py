"""`env.agent: "package.module:function"`: its shape checked at config load, the function imported when
the env is built (startup). Imports nothing heavy: config validation reads it."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from typing import Any

AGENT_REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def check_agent_ref(ref: str, key: str = "env.agent") -> None:
    """Fails unless `ref` has the `package.module:function` shape (at config load: no import yet)."""
    if not isinstance(ref, str) or not AGENT_REF.match(ref):
        raise ValueError(f"{key}={ref!r} must name a function as 'package.module:function' "
                         "(e.g. examples.qa_agent:agent)")


def load_agent(ref: str, key: str = "env.agent") -> Callable[..., Any]:
    """The function `ref` names. Imported with the working directory on sys.path (as uvicorn does for
    its app), so an agent module next to params.yaml works without installing it."""
    check_agent_ref(ref, key)
    module, name = ref.split(":")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:
        raise ImportError(f"{key}={ref!r}: importing module {module!r} failed: {type(exc).__name__}: {exc}") from exc
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ImportError(f"{key}={ref!r}: module {module!r} has no function {name!r}")
    return fn
