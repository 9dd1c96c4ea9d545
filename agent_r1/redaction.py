"""The secrets a config holds, hidden wherever a config is written or logged (MLflow params and
tags, a run's config.json, a warm start's card), while the run itself keeps the real values.

What counts as a secret (a config written by a user may hold any of these):
- every value of an MCP server's `env` mapping (tokens are passed to stdio servers this way; which
  variable is harmless cannot be told, so none is shown);
- the value after a secret-looking flag in an MCP server's `args` (`--api-key X`, `--token=X`);
- credentials in any URL (`user:pass@`, `?token=`, `api_key=`: `redact_uri`, also what this
  package prints or logs of a tracking URI);
- a string under a key that names a secret (`api_key`, `token`, `password`, ...), e.g. in env.tool_args.

`redact_config` returns the public copy and the hidden values by path; `restore_secrets` puts them
back (a run's private secrets file, runs/folders.py). Imports nothing heavy.
"""

from __future__ import annotations

import copy
import re
from typing import Any

# Two readers of a URI's user info disagree, and a secret must be hidden from both:
# - urllib (requests, MLflow's REST client): the authority ends at the first `/ ? #`, and the user
#   info runs to its last `@`, so a password holding a raw `@` is hidden whole (_USERINFO);
# - SQLAlchemy (the database stores): after `user:`, the password runs to an `@` and may hold `/ # ?`
#   and spaces (_PASSWORD). It ends at the first `@` that a host follows (a host ends at `/ ? # :`,
#   a space or the end), so `p@ss@host` hides `p@ss`. In free text this can hide more than the
#   password (`http://h:5000/x ... a@b` hides up to `@b`): shown text errs on hiding.
_SCHEME = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)"
_PASSWORD = re.compile(_SCHEME + r"[^:/?#\s@]*:[^\n]*?@(?=[^\s/?#@]+(?:[/?#\s]|$))")
_USERINFO = re.compile(_SCHEME + r"[^/?#\s]+@")
# Credentials in the query string (`?password=`, `&token=`, `api_key=`): the value is hidden.
_QUERY_SECRET = re.compile(r"(?P<key>[?&;][^=&#\s]*?(?:pass|pwd|token|secret|key|auth|credential|signature)"
                           r"[^=&#\s]*=)[^&#\s]*", re.IGNORECASE)


def redact_uri(text: str) -> str:
    """`http://user:pass@host:5000` -> `http://***@host:5000`, `?password=x` -> `?password=***`; any other
    text is returned with the credentials of every URI it quotes hidden the same way."""
    text = _PASSWORD.sub(r"\g<scheme>***@", str(text))
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    return _QUERY_SECRET.sub(r"\g<key>***", text)


REDACTED = "***"
Path_ = tuple[Any, ...]  # keys and list indices from the tree's root

_SECRET_WORD = (r"(?:pass(?:word|wd|phrase)?|pwd|token|secret|api[_-]?key|access[_-]?key|private[_-]?key|auth"
                r"|credentials?)")
_SECRET_KEY = re.compile(rf"^(?:.*[_\-.])?{_SECRET_WORD}$", re.IGNORECASE)
_SECRET_FLAG = re.compile(rf"^(?P<flag>--?(?:[\w-]*[_-])?{_SECRET_WORD})(?P<eq>=)?", re.IGNORECASE)


def redact_config(tree: Any, root: Path_ = ()) -> tuple[Any, list[tuple[Path_, Any]]]:
    """(a copy of `tree` with every secret replaced, [(path, real value)] of what was replaced).
    `root` is where `tree` sits in a whole config (`("env", "mcp_servers")` for a dotted override's
    value), so the rules that depend on the place apply to parts of a tree too."""
    hidden: list[tuple[Path_, Any]] = []
    public = _walk(copy.deepcopy(tree), tuple(root), hidden)
    return public, hidden


def redact_secrets(tree: Any, root: Path_ = ()) -> Any:
    """The public copy only (for whatever logs or shows a config)."""
    return redact_config(tree, root)[0]


def restore_secrets(tree: Any, hidden: list[tuple[Path_, Any]]) -> Any:
    """`tree` (a copy) with the values `redact_config` hid put back at their paths."""
    out = copy.deepcopy(tree)
    for path, value in hidden:
        node = out
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
    return out


def _in_mcp_server(path: Path_) -> bool:
    """`path` is a key of one entry of env.mcp_servers (given as a tree or as a dotted override)."""
    return len(path) >= 3 and path[-3] == "mcp_servers" and isinstance(path[-2], int)


def _walk(node: Any, path: Path_, hidden: list[tuple[Path_, Any]]) -> Any:
    if isinstance(node, dict):
        if path and path[-1] == "env" and _in_mcp_server(path):  # a server's environment: all of it
            for key, value in node.items():
                if value not in (None, ""):
                    hidden.append((path + (key,), value))
                    node[key] = REDACTED
            return node
        for key, value in node.items():
            node[key] = _walk(value, path + (key,), hidden)
        return node
    if isinstance(node, list):
        if path and path[-1] == "args" and _in_mcp_server(path):
            return _args(node, path, hidden)
        return [_walk(value, path + (i,), hidden) for i, value in enumerate(node)]
    if isinstance(node, str) and node:
        last = path[-1] if path else ""
        public = REDACTED if isinstance(last, str) and _SECRET_KEY.match(last) else redact_uri(node)
        if public != node:
            hidden.append((path, node))
        return public
    return node


def _args(args: list[Any], path: Path_, hidden: list[tuple[Path_, Any]]) -> list[Any]:
    """A command line: `--token X` hides X, `--token=X` hides what follows `=`, URLs lose credentials."""
    out, after_flag = [], False
    for i, arg in enumerate(args):
        text = str(arg)
        m = _SECRET_FLAG.match(text)
        if after_flag:
            public = REDACTED
        elif m and m["eq"]:
            public = text[:m.end()] + REDACTED
        else:
            public = redact_uri(text)
        after_flag = bool(m and not m["eq"])
        if public != text:
            hidden.append((path + (i,), arg))
        out.append(public if public != text else arg)
    return out
