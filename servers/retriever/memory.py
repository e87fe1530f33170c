"""glibc malloc settings for a long-running server: give freed memory back to the system.

By default glibc raises its mmap threshold after a large free and keeps later large blocks in
the heap, and each thread may get its own arena: a server's resident memory then ratchets up
with every batch. `bound_malloc()` (called by the CLI) uses one arena and a fixed 256 KB mmap
threshold; measured on SciFact, peak server memory dropped by about 150 MB. Bulk embedding is
about 15% slower with that setting (every batch's activations are fresh pages), so
`bulk_allocations()` lifts it for the duration of an embedding run. No-ops off glibc.

Python's cyclic garbage collector runs over and over while a program imports its libraries and
loads its indexes, finding nothing to free: `serve --init` spent about 0.1 s of its start in
collections. `start_up()` turns it off until the command runs (or, for `serve`, until its
indexes are loaded: `started()`, which also freezes what start-up made, so later collections
never walk it again). The cyclic garbage start-up left is frozen with it, once: a full collection
at that point found 1,213 unreachable objects (SciFact, onnx and OpenVINO) and took 77 to 89 ms,
most of what not collecting saved, so it is not run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_SERVER_MMAP_THRESHOLD = 256 * 1024
_BULK_MMAP_THRESHOLD = 64 * 1024 * 1024
_libc: Any = None


def _load_libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def bound_malloc() -> None:
    """One arena, a fixed mmap threshold, a small trim threshold (process-wide)."""
    global _libc
    _libc = _load_libc()
    if _libc is not None:
        _libc.mallopt(_M_ARENA_MAX, 1)
        _libc.mallopt(_M_MMAP_THRESHOLD, _SERVER_MMAP_THRESHOLD)
        _libc.mallopt(_M_TRIM_THRESHOLD, 1024 * 1024)


@contextmanager
def bulk_allocations() -> Iterator[None]:
    """Within: large blocks come from the heap again; after: the heap is trimmed."""
    if _libc is None:
        yield
        return
    _libc.mallopt(_M_MMAP_THRESHOLD, _BULK_MMAP_THRESHOLD)
    try:
        yield
    finally:
        _libc.mallopt(_M_MMAP_THRESHOLD, _SERVER_MMAP_THRESHOLD)
        _libc.malloc_trim(0)


def reuse_batch_memory() -> None:
    """For `retriever deploy`: large blocks come from the heap and are reused batch after batch,
    and each thread may have its arena again. Its batches are bounded (deploy.max_batch queries),
    so the heap is too; with fresh pages for every batch and one arena the service's dense
    throughput at 16 clients was 114 q/s, with this 150 q/s (bench/load_bench.py, one run)."""
    if _libc is not None:
        _libc.mallopt(_M_MMAP_THRESHOLD, _BULK_MMAP_THRESHOLD)
        _libc.mallopt(_M_ARENA_MAX, 8)


def trim_heap() -> None:
    """Give the heap's free memory back to the system now (glibc's malloc_trim; a no-op elsewhere)."""
    libc = _libc or _load_libc()
    if libc is not None:
        libc.malloc_trim(0)


@contextmanager
def start_up() -> Iterator[None]:
    """No garbage collection within (unless `started()` turned it back on); as before after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def started() -> None:
    """Start-up is over: what it made goes to the permanent generation (gc.freeze: no collection
    walks it again) and collection runs as usual from here."""
    gc.freeze()
    gc.enable()
