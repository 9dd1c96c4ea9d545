"""One trainer per run folder: an exclusive `flock` on `<run>/.run.lock`, held while the run trains.

Two trainers in one folder (a second `--resume` of a live run) delete each other's temporary
checkpoint folders and write over each other's metrics: 19 of 20 saves failed. The lock is taken
without waiting, so the second is refused at once, naming the holder. A killed trainer's lock goes
with its process (the OS drops an flock when its file closes), so nothing stale is left to clear.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".run.lock"


class RunInUseError(RuntimeError):
    """Another trainer holds the run folder."""


@contextmanager
def hold_run_folder(folder: str | Path) -> Iterator[None]:
    """Holds the folder's run lock for the `with` block; RunInUseError when another holder has it
    (another process, or another holder in this one)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise RunInUseError(
            f"run folder {folder} is in use by another trainer ({holder}): two trainers in one folder delete each "
            "other's checkpoints. Wait for it to finish or stop it; to train a copy, start a new run instead "
            "of resuming this one") from None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode(), 0)
        yield
    finally:
        os.close(fd)  # drops the lock


def check_run_folder_free(folder: str | Path) -> None:
    """Refuses (RunInUseError) a folder another trainer holds now; creates nothing in a new folder."""
    if Path(folder).is_dir():
        with hold_run_folder(folder):
            pass


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"
