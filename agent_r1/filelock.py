"""An exclusive lock shared by threads and processes: `fcntl.flock` on a file.

The OS drops a flock when its process dies, so a holder killed with it never blocks the others. Each
FileLock opens its own file description: two of them on one path exclude each other, within one
process too; threads sharing one FileLock also wait on its thread lock. Not re-entrant.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path


class FileLock:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._thread_lock = threading.Lock()
        self._fd: int | None = None

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """`blocking=False`: one try. `timeout`: keep trying that many seconds (None: forever)."""
        deadline = time.monotonic() + ((float("inf") if timeout is None else timeout) if blocking else 0.0)
        while not (self._thread_lock.acquire(blocking=False) and self._lock_file()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def _lock_file(self) -> bool:
        """One try at the flock, the thread lock held; gives the thread lock back when it fails."""
        fd = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException as err:
            if fd is not None:
                os.close(fd)
            self._thread_lock.release()
            if isinstance(err, BlockingIOError):
                return False
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        os.close(fd)  # closing the description drops the flock
        self._thread_lock.release()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
