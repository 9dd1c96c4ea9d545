"""`env.agent: "package.module:function"`: its shape checked at config load, the function imported when
the env is built (startup). Imports nothing heavy: config validation reads it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from types import ModuleType
from typing import Any

AGENT_REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def check_agent_ref(ref: str, key: str = "env.agent") -> None:
    """Fails unless `ref` has the `package.module:function` shape (at config load: no import yet)."""
    if not isinstance(ref, str) or not AGENT_REF.match(ref):
        raise ValueError(f"{key}={ref!r} must name a function as 'package.module:function' "
                         "(e.g. examples.qa_agent:agent)")


def load_agent(ref: str, key: str = "env.agent") -> Callable[..., Any]:
    """The function `ref` names. Its top-level package is looked up in the working directory first
    (as uvicorn finds its app), so an agent module next to params.yaml works without installing it."""
    check_agent_ref(ref, key)
    module, name = ref.split(":")
    try:
        mod = _import_from_working_dir(module)
    except Exception as exc:
        raise ImportError(f"{key}={ref!r}: importing module {module!r} failed: {type(exc).__name__}: {exc}") from exc
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ImportError(f"{key}={ref!r}: module {module!r} has no function {name!r}")
    return fn


def _import_from_working_dir(module: str) -> ModuleType:
    """`importlib.import_module(module)`, its top-level package found in the working directory when one
    of that name is there and none is imported yet; the process's sys.path stays as it is (a module
    the agent imports by a top-level name of its own is found on sys.path only)."""
    top = module.partition(".")[0]
    if top not in sys.modules:
        spec = PathFinder.find_spec(top, [os.getcwd()])
        if spec is not None:
            mod = importlib.util.module_from_spec(spec)
            sys.modules[top] = mod
            try:
                if spec.loader is not None:
                    spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[top]
                raise
    return importlib.import_module(module)
