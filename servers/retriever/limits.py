"""Bounded work: per-call limits, and searches run a chunk of queries at a time so that a caller
who cancels (or goes away) stops its queued work at the next chunk.

The caller that can be cancelled (the MCP layer) sets `CANCEL` to an event for the duration of
the call; the context (and so the event) follows the call into its worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TypeVar

from .config import LimitsConfig
from .errors import CancelledWork, LimitError

T = TypeVar("T")
CHUNK = 128  # queries searched between two looks at the cancel event
CANCEL: ContextVar[threading.Event | None] = ContextVar("retriever_cancel", default=None)


def check_cancelled(done: int, total: int) -> None:
    event = CANCEL.get()
    if event is not None and event.is_set():
        raise CancelledWork(f"cancelled by the caller after {done} of {total} queries")


def check_limits(limits: LimitsConfig, queries: int, depth: int) -> None:
    """Refuse a call of more queries, or queries x depth results, than the YAML allows."""
    if queries > limits.max_queries:
        raise LimitError(f"{queries} queries in one call, the limit is {limits.max_queries} (limits.max_queries); "
                         "split the call")
    if queries * depth > limits.max_results:
        raise LimitError(f"{queries} queries x depth {depth} = {queries * depth} results, the limit is "
                         f"{limits.max_results} (limits.max_results); ask for fewer results or split the call")


def chunked(search: Callable[[list[str]], list[T]], queries: Sequence[str], limits: LimitsConfig, depth: int,
            chunk: int = CHUNK) -> list[T]:
    """`search` over `queries` a chunk at a time (per-query results are independent), within limits."""
    check_limits(limits, len(queries), depth)
    out: list[T] = []
    for start in range(0, len(queries), chunk):
        check_cancelled(start, len(queries))
        out.extend(search(list(queries[start : start + chunk])))
    return out
