"""One dedicated thread for the numeric work that runs on OpenMP (torch, FAISS).

OpenMP keeps a team of worker threads per calling thread, and idle teams spin. When tool calls
arrive on changing worker threads, each brings its own team and they fight over the cores: on
2 cores a one-query encode took 13 ms instead of 6.5 ms. Running that work on one thread keeps
one team.

A small search call runs on this thread from the start (mcp/serving.py `serve_call`, through
`whole`), not on a worker that hands its encode here and waits: each hand-off between threads
costs about 0.1 ms on this machine's 2 virtual cores (bench/LEAN.md). Such a call may wait for a
lock that a worker holds while that worker waits for this thread (the agent's first opening of
its collection, hybrid's calibration): a worker whose work has not started after `PATIENCE`
while a whole call holds the thread takes its work back and runs it itself, so neither waits
forever.

A short call may instead run where it arrived, in the compute thread's place (`here`), when the
compute thread is idle: the stdio server's event loop and the deploy service's run a one-query search
of this process's own indexes so, without the two hand-offs there and back. While it runs, the
compute thread waits for it and work sent there runs in its place too: still one thread at a time.

Callers take turns here: work waits in one queue per caller (`CALLER`, set by the HTTP guard to a
digest of the bearer token) and the thread serves the queues in turn, one piece of work each. A
caller with eight calls running, or one long call cut into chunks of queries, gets every other
turn at most while another caller's work waits, not eight turns in a row.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_NAME = "retriever-compute"
# Who is calling, where a server tells callers apart (security/http_guard.py: a digest of the bearer
# token, never the token); "" for one caller (stdio, the library, HTTP without tokens). The compute
# thread serves callers in turn; state learnt from traffic (the hybrid query gate) is kept per caller.
CALLER: ContextVar[str] = ContextVar("retriever_caller", default="")
PATIENCE = 0.1  # seconds a worker waits behind a whole call before it runs its work itself


class Turns(Executor):
    """One thread, one queue of work per caller (`CALLER` where the work is submitted); the thread
    takes the oldest work of the caller whose turn it is, then that caller goes to the back."""

    def __init__(self, name: str = _NAME) -> None:
        self._name = name
        self._fresh()

    def _fresh(self) -> None:
        """No work, no thread, a lock nobody holds: at the start, and in a child forked from this
        process (its copy of the lock may be held by the compute thread, which it has not got)."""
        self._cond = threading.Condition()
        self._queues: dict[str, deque[tuple[Future[Any], Callable[[], Any]]]] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self._role = threading.Lock()  # held by the thread doing the compute work: this one, or one in its place

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the compute thread has stopped (the interpreter is exiting)")
            self._queues.setdefault(CALLER.get(), deque()).append((future, partial(fn, *args, **kwargs)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return future

    def waiting(self) -> dict[str, int]:
        """Each caller's work not yet started."""
        with self._cond:
            return {caller: len(q) for caller, q in self._queues.items()}

    def _next(self) -> tuple[Future[Any], Callable[[], Any]] | None:
        with self._cond:
            self._cond.wait_for(lambda: self._queues or self._closed)
            if not self._queues:
                return None
            caller, queue = next(iter(self._queues.items()))
            work = queue.popleft()
            del self._queues[caller]
            if queue:  # to the back: every other caller with work waiting goes first
                self._queues[caller] = queue
            return work

    def _serve(self) -> None:
        while (work := self._next()) is not None:
            future, fn = work
            with self._role:  # after a call run in this thread's place (`here`), if one runs
                if not future.set_running_or_notify_cancel():  # taken back by its caller (Pending.result)
                    continue
                try:
                    result, error = fn(), None
                except BaseException as e:  # as ThreadPoolExecutor: result() raises it
                    result, error = None, e
            # the place given back before the caller hears: its next quick call may take it at once
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)
            del work, future, fn, result, error  # no reference kept to a result while waiting for the next

    @contextmanager
    def here(self) -> Iterator[bool]:
        """This thread in the compute thread's place, if that one is idle (no work waiting, none
        running): True, and until the end work sent to the compute thread runs here (`on_it`) or
        waits; else False, and nothing changes."""
        if on_it():
            yield True
            return
        with self._cond:
            idle = not self._queues and self._role.acquire(blocking=False)
        if not idle:
            yield False
            return
        _here.on = True
        try:
            yield True
        finally:
            _here.on = False
            self._role.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closed = True
            if cancel_futures:
                for queue in self._queues.values():
                    for future, _ in queue:
                        future.cancel()
                self._queues.clear()
            self._cond.notify_all()
            thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()


_here = threading.local()  # `on`: this thread is in the compute thread's place (Turns.here)
_executor = Turns()
class _Flag:
    """A flag one thread sets and others read: a bool (no lock, nothing woken, as an Event's set has)."""

    on = False


_holding = _Flag()  # on while a whole call runs on the compute thread
# as concurrent.futures' own executors: the work queued finishes before the interpreter exits
getattr(threading, "_register_atexit", lambda f: None)(_executor.shutdown)


def _forked() -> None:
    """A child forked from a thread (multiprocessing's fork, a native library's helper: OpenVINO's
    telemetry forks at import) copies the locks as they were, perhaps held by the compute thread,
    which the child has not got: its exit (the shutdown above) waited on that lock for ever, and
    the parent waiting on the child with it. The child starts with its own."""
    _executor._fresh()
    _holding.on = False


os.register_at_fork(after_in_child=_forked)


def executor() -> Turns:
    """The compute thread's executor (for `loop.run_in_executor`)."""
    return _executor


def on_it() -> bool:
    """Whether this is the compute thread, or a thread in its place (`here`)."""
    return getattr(_here, "on", False) or threading.current_thread().name.startswith(_NAME)


def here() -> contextlib.AbstractContextManager[bool]:
    """This thread in the compute thread's place while that one is idle (True), else nothing (False):
    for a call shorter than the hand-offs to the compute thread and back (Turns.here)."""
    return _executor.here()


def whole(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` as a whole call on the compute thread (run through `executor()`): while it runs, work
    sent here by other threads may be taken back by them (see the module doc)."""
    def call(*args: object) -> T:
        _holding.on = True
        try:
            return fn(*args)
        finally:
            _holding.on = False

    return call


class Pending(Generic[T]):
    """Work sent to the compute thread; `result()` waits for it (or runs it, see the module doc)."""

    def __init__(self, fn: Callable[..., T], args: tuple[object, ...]) -> None:
        self._fn, self._args = fn, args
        if not on_it():
            self._future = _executor.submit(fn, *args)
            return
        self._future = Future()
        try:  # on the compute thread itself: now (a later turn of this thread would wait forever)
            self._future.set_result(fn(*args))
        except BaseException as e:  # as the executor would: result() raises it
            self._future.set_exception(e)

    def result(self) -> T:
        while True:
            try:
                return self._future.result(timeout=PATIENCE)
            except TimeoutError:
                if _holding.on and self._future.cancel():  # not started, behind a whole call
                    return self._fn(*self._args)


def on_compute_thread(fn: Callable[..., T], *args: object) -> T:
    """Run `fn(*args)` on the compute thread and wait for it (directly if already there)."""
    if on_it():
        return fn(*args)
    return Pending(fn, args).result()


def submit(fn: Callable[..., T], *args: object) -> Pending[T]:
    """Start `fn(*args)` on the compute thread; the caller goes on (e.g. with BM25) meanwhile. On
    the compute thread itself it runs now."""
    return Pending(fn, args)


class SharedLock:
    """Readers share it, a writer holds it alone; a waiting writer goes before readers that come
    after it. The FAISS index's own (indexes/faiss/index.py): work here usually runs on the compute
    thread, one call at a time, but a worker may take its work back (`PATIENCE`), and an append
    run that way must not reach the index while a search is inside it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            if self._writing or self._waiting:
                self._cond.wait_for(lambda: not self._writing and not self._waiting)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers and self._waiting:  # the last reader out lets a waiting writer in
                    self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._writing and not self._readers)
            self._waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()
