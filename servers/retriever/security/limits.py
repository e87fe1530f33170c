"""Bounded work: per-call limits, and searches run a chunk of queries at a time so that a caller
who cancels (or goes away) stops its queued work at the next chunk.

The caller that can be cancelled (the MCP layer) sets `CANCEL` to an event for the duration of
the call; the context (and so the event) follows the call into its worker thread. A caller that
asked for progress (an MCP client's `progressToken`) sets `PROGRESS` the same way; long work
reports through `caller_progress()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TypeVar

from ..config import LimitsConfig
from ..errors import CancelledWork, LimitError

T = TypeVar("T")
CHUNK = 128  # queries searched between two looks at the cancel event
CANCEL: ContextVar[threading.Event | None] = ContextVar("retriever_cancel", default=None)
Report = Callable[[int, int, str], None]  # (done, total, what was just done)
PROGRESS: ContextVar[Report | None] = ContextVar("retriever_progress", default=None)
PROGRESS_EVERY = 0.5  # seconds between two progress notifications of one call (the last is always sent)
# Work that may run between two chunks of a long call, on its thread (the deploy service serves
# other callers' small searches there, so one caller's 4,000-query call does not hold them up).
BETWEEN: ContextVar[Callable[[], None] | None] = ContextVar("retriever_between", default=None)


def caller_progress() -> Report | None:
    """The progress channel of this call's caller (None: nobody asked), sending at most one report
    every PROGRESS_EVERY seconds, and the last one (done == total) always."""
    send = PROGRESS.get()
    if send is None:
        return None
    last = [float("-inf")]

    def report(done: int, total: int, what: str) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            send(done, total, what)

    return report


def cancelled() -> bool:
    """Whether the caller of this work cancelled it (or went away)."""
    event = CANCEL.get()
    return event is not None and event.is_set()


def check_cancelled(done: int, total: int) -> None:
    if cancelled():
        raise CancelledWork(f"cancelled by the caller after {done} of {total} queries")


def check_cancel(what: str) -> None:
    """Stop `what` if the caller cancelled (or went away): the cancellation point of any long work."""
    if cancelled():
        raise CancelledWork(f"cancelled by the caller during {what}")


def check_count(what: str, count: int, key: str, limit: int, hint: str) -> None:
    """Refuse `count` of something over `limits.<key>` (its value `limit`), naming the key."""
    if count > limit:
        raise LimitError(f"{what}: {count}, the limit is {limit} (limits.{key}); {hint}")


class Budget:
    """At most `limit` uses within one call (a request sent to a provider or an LLM), from any thread.
    `key`: the setting, under `limits` unless it names its section (`rerank.max_requests`)."""

    def __init__(self, what: str, key: str, limit: int) -> None:
        self.what, self.limit, self.used = what, limit, 0
        self.key = key if "." in key else f"limits.{key}"
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:
            if self.used >= self.limit:
                raise LimitError(f"{self.what}: this call has sent its {self.limit} requests ({self.key}); "
                                 "split the call")
            self.used += 1


class Deadline:
    """Long work on one input (parsing or rendering a file): `check()` between its steps stops it
    when the caller cancelled or `seconds` (limits.<key>) have passed."""

    def __init__(self, what: str, seconds: float, key: str = "max_parse_seconds") -> None:
        self.what, self.seconds, self.key = what, seconds, key
        self.until = time.monotonic() + seconds
        self.cancel = CANCEL.get()  # taken here: a check may run on a thread the context did not follow

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise CancelledWork(f"cancelled by the caller during {self.what}")
        if time.monotonic() > self.until:
            raise LimitError(f"{self.what}: not done within {self.seconds:g} s (limits.{self.key})")


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
        if start and (between := BETWEEN.get()) is not None:
            between()
        out.extend(search(list(queries[start : start + chunk])))
    return out
