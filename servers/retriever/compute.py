"""One dedicated thread for the numeric work that runs on OpenMP (torch, FAISS).

OpenMP keeps a team of worker threads per calling thread, and idle teams spin. When tool calls
arrive on changing worker threads, each brings its own team and they fight over the cores: on
2 cores a one-query encode took 13 ms instead of 6.5 ms. Running that work on one thread keeps
one team.

A small search call runs on this thread from the start (mcp/core.py `serve_call`), not on a worker
that hands its encode here and waits: each hand-off between threads costs about 0.1 ms on this
machine's 2 virtual cores (bench/LEAN.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
_NAME = "retriever-compute"
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_NAME)


def executor() -> ThreadPoolExecutor:
    """The compute thread's executor (for `loop.run_in_executor`)."""
    return _executor


def on_it() -> bool:
    """Whether this is the compute thread."""
    return threading.current_thread().name.startswith(_NAME)


def on_compute_thread(fn: Callable[..., T], *args: object) -> T:
    """Run `fn(*args)` on the compute thread and wait for it (directly if already there)."""
    if on_it():
        return fn(*args)
    return submit(fn, *args).result()


def submit(fn: Callable[..., T], *args: object) -> Future[T]:
    """Start `fn(*args)` on the compute thread; the caller goes on (e.g. with BM25) meanwhile. On
    the compute thread itself it runs now (waiting for a later turn of this thread would wait
    forever) and the future it returns is done."""
    if not on_it():
        return _executor.submit(fn, *args)
    done: Future[T] = Future()
    try:
        done.set_result(fn(*args))
    except BaseException as e:  # as the executor would: the caller's result() raises it
        done.set_exception(e)
    return done
