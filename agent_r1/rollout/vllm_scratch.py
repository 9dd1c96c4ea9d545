"""Scratch files a vLLM engine writes outside the run folder, named so that they can be cleaned up.

An engine built from an in-memory model serves it from a temp folder, and every weight sync passes
through one safetensors file (in /dev/shm when it fits: a 3B model's is several GB of RAM until it
is deleted). Both are removed on every path the process itself runs; a process killed outright
(`kill -9`, the OOM killer) cannot, so the names carry the writer's pid and each engine start sweeps
the files whose writer is gone. The names carry the writer's pid namespace too: containers sharing
/dev/shm (`--ipc=host`, common on GPU hosts) do not see each other's processes, and a file whose
writer cannot be seen from here is left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

PREFIX = "agent-r1-"
SHM = "/dev/shm"


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def scratch_prefix(kind: str, pid: int | None = None) -> str:
    """The name prefix of a scratch file or folder of `kind` ("vllm", "weights") written by `pid`
    (this process by default), in this pid namespace."""
    return f"{PREFIX}{kind}-{os.getpid() if pid is None else pid}@{_pid_namespace()}-"


def owner_pid(name: str) -> int | None:
    """The pid a scratch name carries when its writer ran in this pid namespace, else None (also for a
    name that is not a scratch name)."""
    if not name.startswith(PREFIX):
        return None
    parts = name[len(PREFIX):].split("-", 2)
    if len(parts) != 3:
        return None
    pid, _, namespace = parts[1].partition("@")
    if not (pid.isdigit() and namespace.isdigit()) or int(namespace) != _pid_namespace():
        return None
    return int(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def scratch_dirs() -> list[Path]:
    """Where scratch files go: /dev/shm and the temp folder."""
    return [Path(d) for d in (SHM, tempfile.gettempdir()) if os.path.isdir(d)]


def sweep_stale(dirs: Iterable[Path] | None = None) -> list[Path]:
    """Removes the scratch files and folders of this user whose writer is no longer running; returns
    what it removed. A pid since reused by a live process keeps its file until that one ends too."""
    removed = []
    uid = os.getuid()
    for folder in dirs if dirs is not None else scratch_dirs():
        try:
            entries = list(Path(folder).iterdir())
        except OSError:
            continue
        for path in entries:
            pid = owner_pid(path.name)
            try:
                if pid is None or _alive(pid) or path.lstat().st_uid != uid:
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError:  # gone meanwhile, or not ours to remove
                continue
            removed.append(path)
    return removed
