"""Where records go (the tracking URI, the artifact root, the buffer folder), and how a URI is shown.

A tracking URI may carry credentials (`http://user:pass@host`, `postgresql://user:pass@host/db`);
`redact_uri` is the one place that hides them, and everything this package prints or logs goes
through it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_EXPERIMENT = "agent-r1"

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


def project_dir() -> Path:
    return Path(os.environ.get("AGENT_R1_PROJECT_DIR") or Path.cwd()).resolve()


def default_tracking_uri(project: str | Path | None = None) -> str:
    """`MLFLOW_TRACKING_URI` if set, else the project's SQLite store."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    root = Path(project).resolve() if project else project_dir()
    (root / "mlruns").mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"


def default_artifact_root(tracking_uri: str | None = None, project: str | Path | None = None) -> str:
    """Next to a SQLite store (`<dir of mlflow.db>/artifacts`); otherwise `<project>/mlruns/artifacts`.
    Used only for experiments this code creates on a local store; a server decides its own."""
    if tracking_uri and tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri[len("sqlite:///"):]).parent / "artifacts").resolve().as_uri()
    root = Path(project).resolve() if project else project_dir()
    return (root / "mlruns" / "artifacts").as_uri()


def default_buffer_dir(project: str | Path | None = None) -> Path:
    """`AGENT_R1_MLFLOW_BUFFER`, else `<project>/mlruns/buffer`."""
    env = os.environ.get("AGENT_R1_MLFLOW_BUFFER")
    if env:
        return Path(env)
    return (Path(project).resolve() if project else project_dir()) / "mlruns" / "buffer"


def quiet_http_defaults() -> None:
    """MLflow's HTTP client retries a refused connection for minutes by default; the buffer does the
    retrying here, so a down server costs seconds, not minutes. Explicit settings win."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
