"""One writer at a time per collection, across processes: an advisory lock file beside the
collection's change log, held with `filelock` (`fcntl.flock` underneath, released by the kernel
when the process dies, so a crashed writer never leaves a stale lock). One lock object per
holding, so a second holder in the same process (another thread, a nested call) waits too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import BusyError

WAIT_SECONDS = 30.0


def lock_path(log_folder: Path) -> Path:
    return log_folder.with_name(f".{log_folder.name}.lock")


@contextmanager
def collection_lock(log_folder: Path, wait: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold the collection's write lock; wait up to `wait` seconds for another writer, then fail."""
    path = lock_path(log_folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    # No soft-lock fallback where flock is missing: a soft lock outlives a crashed writer.
    lock = FileLock(path, timeout=wait, mode=0o644, thread_local=False, poll_interval=0.05, fallback_to_soft=False)
    try:
        lock.acquire()
    except Timeout:
        raise BusyError(f"another process is writing to this collection (lock {path}); "
                        f"retry when it has finished") from None
    try:
        yield
    finally:
        lock.release()
