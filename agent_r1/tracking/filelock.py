"""An exclusive lock shared by threads and processes: `fcntl.flock` on a file, re-entrant per holder.

flock locks belong to an open file description, so the OS drops them when their process dies: a
writer or flusher killed while holding one never blocks the others. Within one process, a second
`FileLock` on the same path opens its own description and so waits like another process would; the
same `FileLock` taken again by the thread that holds it just counts (re-entrant).
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
        self._thread_lock = threading.RLock()
        self._fd: int | None = None
        self._depth = 0

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """`blocking=False`: one try. `timeout`: keep trying that many seconds (None: forever)."""
        if timeout is not None and blocking:
            deadline = time.monotonic() + timeout
            while not self.acquire(blocking=False):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)
            return True
        if not self._thread_lock.acquire(blocking=blocking):
            return False
        if self._depth == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                self._thread_lock.release()
                return False
            except BaseException:
                os.close(fd)
                self._thread_lock.release()
                raise
            self._fd = fd
        self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the description drops the flock
        self._thread_lock.release()

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
