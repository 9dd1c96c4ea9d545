"""Keeping a tool worker's processes contained (Linux; elsewhere only the process group is used).

- A worker dies with the process that forked it: PR_SET_PDEATHSIG(SIGKILL) has the kernel kill it the
  moment its parent is gone, even in the middle of a hung call (its own loop only notices an orphaning
  between calls). The signal follows the forking thread: the runner forks workers from the thread
  that calls it, which in this project is the trainer's main thread.
- Nothing a tool starts outlives its worker: the worker is a child subreaper (PR_SET_CHILD_SUBREAPER),
  so what its tools start stays among its descendants even after a double fork or `setsid()` (which
  leaves the process group); killing a worker stops it, then kills every descendant found under it in
  /proc, then the worker itself.

The limit: when the trainer is SIGKILLed the kernel kills the worker at once, and what its tools had
started is then re-parented to init and lives on (no process is left to kill it; only a cgroup or a
PID namespace would hold it, neither available to an unprivileged process).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def contain_worker(parent_pid: int) -> None:
    """Called first thing in a worker: die with the parent, keep every descendant. Exits at once if the
    parent is already gone (it may have died before the death signal was armed)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent_pid:
        os._exit(0)


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # the command name is in parentheses and may hold spaces or ")": the ppid follows the last ")"
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (children first), from /proc; [] where /proc is not there."""
    if not Path("/proc/self/stat").exists():
        return []
    children, found, todo = _children_map(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(pid: int) -> None:
    """SIGKILLs every descendant of `pid`, then its process group and `pid`. The worker is stopped first so
    it starts nothing new; a killed descendant's own children are re-parented to the worker (a
    subreaper), so rounds repeat until none is left."""
    _signal(pid, signal.SIGSTOP)
    for _ in range(20):  # while the worker lives: once it is gone, its orphans go to init, out of reach
        found = descendants(pid)
        if not found:
            break
        for child in found:
            _signal(child, signal.SIGKILL)
    try:
        os.killpg(pid, signal.SIGKILL)  # the worker's group (the worker leads it) and anything left in it
    except (ProcessLookupError, PermissionError):
        pass
    _signal(pid, signal.SIGKILL)
