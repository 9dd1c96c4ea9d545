"""`@tool`: a typed Python function with a docstring becomes a Tool.

    @tool
    def convert(amount: float, unit: Literal["km", "mi"] = "km") -> str:
        '''Convert a distance between kilometres and miles.

        Args:
            amount: the distance to convert
            unit: the unit `amount` is in
        '''

The name is the function's name, the description is the docstring's first paragraph, and the
JSON schema of `parameters` comes from the type hints (descriptions from the `Args:` section or
`Annotated[type, "description"]`). The tool is registered under its name, so
`env.tools: [convert]` in params.yaml (or a sample's `env.tools`) can use it.

The function may return a `ToolResult`, a string (the observation) or any JSON-serialisable
value; raising `ToolError("...")` returns a failed result whose text is the message. Other
exceptions are turned into failed results by the `ToolRunner`.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from agent_r1.tools.base import ToolResult
from agent_r1.tools.registry import TOOL_FACTORIES, register_tool


class ToolError(Exception):
    """Raise inside a tool function to fail the call with a message the model reads."""


_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"}, bool: {"type": "boolean"},
    type(None): {"type": "null"}, Any: {},
}


def json_schema_for(hint: Any, where: str = "") -> dict[str, Any]:
    """The JSON schema of one Python type hint (str, int, float, bool, list[...], dict[str, ...],
    tuple[...], Literal[...], Enum, Optional/Union, Annotated[..., "description"])."""
    if hint in _PRIMITIVES:
        return dict(_PRIMITIVES[hint])
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = json_schema_for(args[0], where)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if origin is typing.Literal:
        return {"enum": list(args)}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if origin in (typing.Union, types.UnionType):
        options = [json_schema_for(a, where) for a in args]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if hint in (list, tuple, set, frozenset) or origin in (list, set, frozenset):
        return {"type": "array", **({"items": json_schema_for(args[0], where)} if args else {})}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": json_schema_for(args[0], where)}
        return {"type": "array", "prefixItems": [json_schema_for(a, where) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    if hint is dict or origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"{where}: JSON object keys are strings; use dict[str, ...], not {hint}")
        return {"type": "object", **({"additionalProperties": json_schema_for(args[1], where)} if args else {})}
    raise TypeError(f"{where}: type {hint!r} has no JSON schema; use str, int, float, bool, list, dict, "
                    "Literal, an Enum or a Union of these")


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^\s*:param\s+(?:[\w\[\], ]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google-style (`Args:`) or Sphinx (`:param x:`)
    docstring. The description is the text before the first section, folded to one line."""
    summary: list[str] = []
    params: dict[str, str] = {}
    section, current, arg_indent = None, None, None
    for line in inspect.cleandoc(doc or "").splitlines():
        indent = len(line) - len(line.lstrip())
        sphinx = _SPHINX.match(line)
        head = _SECTION.match(line)
        if sphinx:
            section, current = "params", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
        elif head:
            section = "params" if head.group(1) in ("Args", "Arguments", "Parameters") else "other"
            current, arg_indent = None, None
        elif section is None:
            summary.append(line)
        elif section == "params" and line.strip():
            m = _ARG_LINE.match(line)
            if m and (arg_indent is None or indent <= arg_indent):  # a new argument, not a continuation
                current, arg_indent = m.group(1), indent
                params[current] = m.group(2).strip()
            elif current:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return re.sub(r"\s+", " ", " ".join(summary)).strip(), params


class FunctionTool:
    """A Tool backed by a plain function; `tool(fn)` builds one. Calling it calls the function."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None, description: str | None = None,
                 localns: dict[str, Any] | None = None):
        self.fn = fn
        self.name = name or fn.__name__
        doc_description, doc_params = parse_docstring(fn.__doc__)
        self.description = description or doc_description
        if not self.description:
            raise ValueError(f"tool {self.name!r}: give the function a docstring (or pass description=...); "
                             "the model reads it to decide when to call the tool")
        self.parameters = self._schema(fn, doc_params, localns)

    def _schema(self, fn: Callable[..., Any], doc_params: dict[str, str], localns: dict[str, Any] | None) -> dict[str, Any]:
        try:
            hints = typing.get_type_hints(fn, localns=localns, include_extras=True)
        except NameError as exc:
            raise TypeError(f"tool {self.name!r}: cannot resolve a type hint ({exc}); define the types it uses "
                            "at module level") from None
        properties, required = {}, []
        self._enums: dict[str, type[enum.Enum]] = {}
        for p in inspect.signature(fn).parameters.values():
            where = f"tool {self.name!r}, parameter {p.name!r}"
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise TypeError(f"{where}: *args, **kwargs and positional-only parameters cannot be "
                                "passed as JSON arguments; use named parameters")
            if p.name not in hints:
                raise TypeError(f"{where} has no type hint; annotate it (e.g. `{p.name}: str`) so the "
                                "JSON schema can be written")
            schema = json_schema_for(hints[p.name], where)
            if isinstance(hints[p.name], type) and issubclass(hints[p.name], enum.Enum):
                self._enums[p.name] = hints[p.name]  # JSON carries the value; the function gets the member
            if p.name in doc_params and "description" not in schema:
                schema["description"] = doc_params[p.name]
            if p.default is inspect.Parameter.empty:
                required.append(p.name)
            elif _jsonable(p.default):
                schema["default"] = p.default.value if isinstance(p.default, enum.Enum) else p.default
            properties[p.name] = schema
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        kwargs = {k: self._enums[k](v) if k in self._enums else v for k, v in arguments.items()}
        try:
            out = self.fn(**kwargs)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", success=False, metadata={"error": "tool"})
        if isinstance(out, ToolResult):
            return out
        return ToolResult(out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, fn={self.fn.__module__}.{self.fn.__qualname__})"


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value.value if isinstance(value, enum.Enum) else value)
        return True
    except (TypeError, ValueError):
        return False


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
         register: bool = True) -> Any:
    """`@tool` or `@tool(name=..., description=..., register=False)`; returns a `FunctionTool`.

    With `register` (the default) the tool is added to the registry under its name; defining
    the same function again (a module re-imported, a notebook cell re-run) replaces it, while
    a different function under a taken name is an error.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        # the defining scope, so string annotations naming local types resolve
        caller = sys._getframe(1).f_locals
        made = FunctionTool(f, name=name, description=description, localns=dict(caller))
        if register:
            previous = TOOL_FACTORIES.get(made.name)
            if getattr(previous, "origin", None) == _origin(f):
                TOOL_FACTORIES.unregister(made.name)
            register_tool(made.name)(_Factory(made))
        return made

    return wrap(fn) if fn is not None else wrap


def _origin(f: Callable[..., Any]) -> str:
    return f"{f.__module__}.{f.__qualname__}"


class _Factory:
    """Registry entry for a function tool: `create_tool(name)` returns the tool itself."""

    def __init__(self, made: FunctionTool):
        self.made = made
        self.origin = _origin(made.fn)

    def __call__(self, **options: Any) -> FunctionTool:
        if options:
            raise TypeError(f"tool {self.made.name!r} is a @tool function and takes no options; remove "
                            f"env.tool_args.{self.made.name} ({sorted(options)}) or write the tool as a class")
        return self.made

    def __repr__(self) -> str:
        return f"@tool {self.origin}"
