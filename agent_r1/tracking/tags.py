"""What describes a run: flattened params, git, DVC and machine tags; the project folder they describe."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def project_dir() -> Path:
    """`AGENT_R1_PROJECT_DIR`, else the current folder."""
    return Path(os.environ.get("AGENT_R1_PROJECT_DIR") or Path.cwd()).resolve()


def flatten_params(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """{"train": {"lr": 1e-3}} -> {"train.lr": "0.001"}; lists/tuples as JSON."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_params(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(list(value))
        else:
            out[name] = "" if value is None else str(value)
    return out


def git_tags(path: str | Path | None = None) -> dict[str, str]:
    """Commit, branch and dirty flag of the checkout holding `path` (empty outside git)."""
    cwd = str(path or project_dir())

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        tags = {"git.commit": git("rev-parse", "HEAD")}
    except (OSError, subprocess.SubprocessError):
        return {}
    try:
        tags["git.branch"] = git("rev-parse", "--abbrev-ref", "HEAD")
        tags["git.dirty"] = str(bool(git("status", "--porcelain", "--untracked-files=no")))
    except (OSError, subprocess.SubprocessError):
        pass
    tags["mlflow.source.git.commit"] = tags["git.commit"]
    return tags


def dvc_lock_hashes(project: str | Path | None = None, stages: Iterable[str] | None = None) -> dict[str, str]:
    """`dvc.<stage>.<out path>` -> the content hash DVC recorded in dvc.lock (empty without one)."""
    import yaml

    lock = Path(project or project_dir()) / "dvc.lock"
    if not lock.exists():
        return {}
    data = yaml.safe_load(lock.read_text()) or {}
    wanted = set(stages) if stages is not None else None
    tags = {}
    for stage, entry in (data.get("stages") or {}).items():
        if wanted is not None and stage not in wanted:
            continue
        for out in entry.get("outs") or []:
            digest = out.get("md5") or out.get(out.get("hash", ""), "")
            if digest:
                tags[f"dvc.{stage}.{out['path']}"] = str(digest)
    return tags


def machine_tags(config: dict[str, Any] | None = None) -> dict[str, str]:
    """Host, platform, accelerator, library versions and the engines the config selects."""
    tags = {"machine.host": platform.node(), "machine.platform": platform.platform(),
            "machine.python": platform.python_version(), "machine.cpus": str(os.cpu_count())}
    try:
        import torch

        tags["machine.torch"] = torch.__version__
        tags["machine.accelerator"] = (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    except Exception:  # noqa: BLE001 - a tag is not worth failing a run
        pass
    cfg = config or {}
    rollout = cfg.get("rollout") or {}
    ray = cfg.get("ray") or {}
    tags["engine.rollout"] = str(rollout.get("engine") or "transformers")
    tags["engine.retrieval"] = str((cfg.get("search") or {}).get("backend", ""))
    tags["engine.ray"] = "ray" if ray.get("enabled") else "in-process"
    tags["model"] = str((cfg.get("model") or {}).get("name_or_path") or "local-small")
    return tags
