"""A run folder's config.json, written without the config's secrets (it is an MLflow artifact and a
file people share), and the secrets beside it in a file only the run's user can read, so a task, a
retry or `--resume` that reopens the run from its folder gets the real values back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agent_r1.redaction import REDACTED, redact_config, restore_secrets

CONFIG_FILE = "config.json"
SECRETS_FILE = "config.secrets.json"  # never among folders.RUN_ARTIFACTS: it stays on this machine


def write_run_config(folder: str | Path, tree: dict[str, Any]) -> Path:
    """config.json (secrets hidden) and, when the config holds any, the private secrets file (0600)."""
    folder = Path(folder)
    public, hidden = redact_config(tree)
    secrets = folder / SECRETS_FILE
    if hidden:
        tmp = folder / f".{SECRETS_FILE}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private from the first byte
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)  # an earlier file of the same name kept its mode: set it
            json.dump([[list(path), value] for path, value in hidden], f)
        os.replace(tmp, secrets)
    else:
        secrets.unlink(missing_ok=True)
    path = folder / CONFIG_FILE
    path.write_text(json.dumps(public, indent=2, default=str))
    return path


def read_run_config(folder: str | Path) -> dict[str, Any]:
    """The config tree the folder's config.json holds, with its hidden secrets put back. A value
    edited by hand since (no longer the hidden form) is kept as edited."""
    folder = Path(folder)
    tree = json.loads((folder / CONFIG_FILE).read_text())
    secrets = folder / SECRETS_FILE
    if not secrets.is_file():
        return tree
    found = []
    for path, value in json.loads(secrets.read_text()):
        node = tree
        try:
            for step in path[:-1]:
                node = node[step]
            current = node[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # the entry was removed from config.json by hand
        if isinstance(current, str) and REDACTED in current:
            found.append((tuple(path), value))
    return restore_secrets(tree, found)
