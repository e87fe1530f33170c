"""One writer at a time per collection, across processes: an advisory lock file beside the
collection's change log (`fcntl.flock`, released by the kernel when the process dies, so a
crashed writer never leaves a stale lock)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import BusyError

WAIT_SECONDS = 30.0


def lock_path(log_folder: Path) -> Path:
    return log_folder.with_name(f".{log_folder.name}.lock")


@contextmanager
def collection_lock(log_folder: Path, wait: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold the collection's write lock; wait up to `wait` seconds for another writer, then fail."""
    path = lock_path(log_folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BusyError(f"another process is writing to this collection (lock {path}); "
                                    f"retry when it has finished") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
