"""Micro-batching: requests that arrive while the compute thread is busy wait in a bounded queue
and are served together.

Requests that differ only in their queries and in how the reply is shaped (text, metadata, the
reply budget) share a key; the worker takes the first waiting request and every later one with
its key, up to `max_batch` queries, searches their queries in one call (one encode, one index
search) and gives each caller the hits of its own queries. Under concurrent load a batch waits
up to `max_wait_ms` until as many requests are queued as the last batch served (or a full
batch): callers whose replies went out together come back a few ms apart, and one that misses
the batch waits a whole batch more. A lone caller is served at once. Requests of other kinds
(batch tools, fan-out, ...) run alone, in arrival order with the rest.

A request of more than `max_batch` queries that could be merged (a one-list search) is searched
`max_batch` queries at a time, its pieces taking turns with the other requests: a one-query
search that arrives behind a 4,000-query one waits for one piece, not for the whole.

A full queue refuses at once (the service answers 503 with Retry-After); a request whose caller
went away or timed out is taken off the queue before it runs (`drop`), and one already running
stops at its next piece, or at its search's next chunk of queries (limits.CANCEL).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import compute
from ..api.calls import hits_reply
from ..api.hits import hits as kind_hits
from ..api.hits import quick, searches
from ..api.models import BM25SearchRequest, Request
from ..api.registry import call
from ..compute import CALLER
from ..config import DeployConfig
from ..search.results import as_queries, regroup
from ..security.guard import FROM_CLIENT
from ..security.limits import BETWEEN, CANCEL, check_limits
from ..security.principals import OPERATOR, PRINCIPAL, Principal
from ..types import Hit, Payload
from .metrics import Metrics

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

log = logging.getLogger(__name__)
SHAPE_ONLY = {"query_list", "return_text", "return_metadata", "max_bytes", "max_chars"}  # no effect on the hits


class QueueFull(Exception):
    """The queue holds `max_queue` requests, or this caller `max_queue_per_caller`: come back later."""


@dataclass(eq=False)
class Job:
    request: Request
    key: str | None  # requests with one key are merged; None: runs alone
    queries: list[str]
    future: asyncio.Future[Payload] = field(repr=False)
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)  # set when its caller left
    caller: str = ""  # compute.CALLER of the request: what it searches runs as that caller
    principal: Principal = OPERATOR  # who asked (principals.PRINCIPAL): what it searches sees only its documents
    done: int = 0  # a request cut into pieces: queries searched so far
    hits: list[list[Hit]] = field(default_factory=list, repr=False)  # and their hits


def merge_key(request: Request) -> str | None:
    """What must be equal for two requests to be searched as one."""
    if not searches(request) or getattr(request, "llm_rerank", None) is not None:
        return None  # runs alone, through the whole call (an LLM rerank is per request)
    rest = request.model_dump(exclude=SHAPE_ONLY)
    return f"{type(request).__name__}:{json.dumps(rest, sort_keys=True, default=str)}"


class Batcher:
    def __init__(self, engine: Retriever, settings: DeployConfig, metrics: Metrics,
                 alone: Callable[[], bool] = lambda: False) -> None:
        self.engine = engine
        self.alone = alone  # whether the request served now is the only one inside the service (app.py)
        self.max_batch = min(settings.max_batch, engine.base_config.limits.max_queries)
        self.max_wait = settings.max_wait_ms / 1000
        self.max_queue = settings.max_queue
        self.max_per_caller = min(settings.max_queue_per_caller, settings.max_queue)
        self.metrics = metrics
        self._turn = 0  # counts batches served; a caller's last turn decides who goes next
        self._last = 1  # requests in the last batch served (the worker waits for as many under load)
        self._served: dict[str, int] = {}  # caller -> the turn it was last served
        self._jobs: deque[Job] = deque()
        self._pieces: deque[Job] = deque()  # requests cut into pieces, between two of their pieces
        self._piece_next = False  # whose turn: a piece, or the queue
        self._wake = asyncio.Event()  # set while jobs wait
        self._arrived = asyncio.Event()  # set by each new job
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retriever-service")
        self._loop: asyncio.AbstractEventLoop | None = None  # the service's, once run() starts

    def depth(self) -> int:
        return len(self._jobs)

    def submit(self, request: Request) -> Job:
        """Queue `request`; its job's future gets the reply (or the error). Raises QueueFull, or
        the request's own error for queries that are not a list of strings."""
        caller = CALLER.get()
        if len(self._jobs) >= self.max_queue:
            self.metrics.rejected.inc()
            raise QueueFull(f"busy: {self.max_queue} requests are waiting (deploy.max_queue)")
        if sum(j.caller == caller for j in self._jobs) >= self.max_per_caller:
            self.metrics.rejected.inc()
            raise QueueFull(f"busy: {self.max_per_caller} of this caller's requests are waiting "
                            "(deploy.max_queue_per_caller)")
        key = merge_key(request)
        key = None if key is None else f"{caller}:{key}"  # two callers' queries are never one search
        queries = as_queries(request.query_list) if isinstance(request, BM25SearchRequest) else []
        job = Job(request, key, queries, asyncio.get_running_loop().create_future(), caller=caller,
                  principal=PRINCIPAL.get())
        self._jobs.append(job)
        self._wake.set()
        self._arrived.set()
        return job

    def now(self, request: Request) -> Payload | Exception | None:
        """A quick search (api/hits.py quick) of a lone caller (no other request inside the service, none
        waiting here) served right here on the event loop, in the idle compute thread's place, as the
        worker would serve it (`_searched`) without its turn: the reply, or the error it raised. None
        where it is not one, or not now (`submit` queues it)."""
        if (self._jobs or self._pieces or not searches(request) or request.given("llm_rerank") is not None
                or not self.alone() or not quick(self.engine, request)):
            return None
        queries = as_queries(request.query_list)  # type: ignore[attr-defined]
        if len(queries) > self.max_batch:
            return None
        with compute.here() as here:
            if not here:
                return None
            caller = CALLER.get()
            job = Job(request, "now", queries, asyncio.get_running_loop().create_future(), caller=caller,
                      principal=PRINCIPAL.get())
            self._served_now(caller)
            ctx = contextvars.copy_context()
            ctx.run(FROM_CLIENT.set, True)  # as the worker's context: the service's callers are clients
            with self._batch([job]):
                try:
                    return ctx.run(compute.whole(self._serve), [job])[0]
                except Exception as e:  # as a batch that failed: its caller gets the error
                    return e

    @contextlib.contextmanager
    def _batch(self, jobs: list[Job]) -> Iterator[None]:
        """A batch served: its size (which the worker's next batch waits for under load, _gather), and its
        requests, queries and seconds in the metrics."""
        self._last = len(jobs)
        self.metrics.batch_requests.observe(len(jobs))
        self.metrics.batch_queries.observe(max(1, sum(len(j.queries) for j in jobs)))
        start = time.perf_counter()
        try:
            yield
        finally:
            self.metrics.batch_seconds.observe(time.perf_counter() - start)

    def drop(self, job: Job, reason: str) -> bool:
        """Take `job` off the queue if it has not started, or stop it (at its next piece or chunk
        of queries) if it has; True if it was taken off the queue."""
        job.future.cancel()
        job.cancel.set()
        self.metrics.dropped.labels(reason=reason).inc()
        for queue in (self._jobs, self._pieces):
            if job in queue:
                queue.remove(job)
                log.info("a waiting request was dropped (%s)", reason)
                return True
        log.info("a running request stops at its next piece or chunk of queries (%s)", reason)
        return False

    async def run(self) -> None:
        """The worker: one batch at a time, for as long as the service runs."""
        loop = self._loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        ctx.run(FROM_CLIENT.set, True)  # the service's callers are clients: guard.py's checks apply
        while True:
            await self._wake.wait()
            await self._gather(self._last)
            jobs = self._take()
            if not self._jobs and not self._pieces:
                self._wake.clear()
            if not jobs:
                continue
            with self._batch(jobs):
                try:
                    results = await self._searched(loop, ctx, jobs)
                except Exception as e:  # the batch failed as a whole: every caller gets the error
                    results = [e] * len(jobs)
            for job, result in zip(jobs, results):
                if result is None and not job.future.done():  # a piece: more to come, after the others' turn
                    self._pieces.append(job)
                    self._wake.set()
                    continue
                _settle(job, result)

    async def _searched(self, loop: asyncio.AbstractEventLoop, ctx: contextvars.Context,
                        jobs: list[Job]) -> list[Payload | Exception | None]:
        """The batch served where its work runs best. A quick search (api/hits.py quick: one query of
        this process's own indexes) while no other request is inside the service runs here on the
        event loop, in the compute thread's place while that one is idle; with other requests about,
        the loop goes on reading them meanwhile, to be merged into the next batch; a search of one key on the compute thread,
        where its encode and index search run, not on the service thread that would hand them over
        there and wait; the rest on the service thread. Each step spared is a thread hand-off, about
        0.1 ms here (bench/LEAN.md call-overhead)."""
        first = jobs[0]
        if first.key is not None and len(first.queries) <= self.max_batch:
            if len(jobs) == 1 and self.alone() and quick(self.engine, first.request):
                with compute.here() as here:
                    if here:
                        return ctx.run(compute.whole(self._serve), jobs)
            return await loop.run_in_executor(compute.executor(), ctx.run, compute.whole(self._serve), jobs)
        return await loop.run_in_executor(self._executor, ctx.run, self._serve, jobs)

    async def _gather(self, last: int) -> None:
        """Under concurrent load (the last batch served `last` > 1 requests), wait up to
        `max_wait` until as many requests are queued again, or a full batch: callers whose last
        replies went out together come back together. A lone caller is served at once."""
        deadline = asyncio.get_running_loop().time() + self.max_wait
        while last > 1 and len(self._jobs) < last and sum(len(j.queries) for j in self._jobs) < self.max_batch:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return

    def _take(self) -> list[Job]:
        """The first waiting job and every later one with its key, within `max_batch` queries."""
        if self._pieces and (self._piece_next or not self._jobs):
            self._piece_next = False
            return [self._pieces.popleft()]
        self._piece_next = True
        if not self._jobs:
            return []
        # callers in turn: the waiting job of the caller served longest ago (arrival order among equals)
        first = min(self._jobs, key=lambda j: self._served.get(j.caller, -1))
        self._jobs.remove(first)
        self._served_now(first.caller)
        if first.key is None or len(first.queries) > self.max_batch:
            return [first]
        return self._with_its_key(first)

    def _served_now(self, caller: str) -> None:
        """`caller` takes this turn; callers long gone are forgotten (those with no request waiting)."""
        self._turn += 1
        self._served[caller] = self._turn
        if len(self._served) > 4 * self.max_queue:
            self._served = {c: t for c, t in self._served.items() if any(j.caller == c for j in self._jobs)}

    def _with_its_key(self, first: Job) -> list[Job]:
        """`first` (off the queue already) and the waiting jobs of its key, within max_batch queries."""
        jobs, size = [first], len(first.queries)
        for job in list(self._jobs):
            if job.key == first.key and size + len(job.queries) <= self.max_batch:
                self._jobs.remove(job)
                jobs.append(job)
                size += len(job.queries)
        return jobs

    def _serve(self, jobs: list[Job]) -> list[Payload | Exception | None]:
        """Where `_searched` runs it: one engine call for all `jobs`, each reply shaped for its caller
        (None: a piece of a cut request was searched, more to come). A lone job runs with its
        cancel event as limits.CANCEL, so a caller who left stops it at its next chunk."""
        first = jobs[0].request
        CALLER.set(jobs[0].caller)  # this thread's context is the batch's own (run: ctx.run per batch)
        PRINCIPAL.set(jobs[0].principal)  # security.visibility: the batch sees what its caller sees (one principal)
        if len(jobs) == 1:
            token = CANCEL.set(jobs[0].cancel)
            # a whole call (one that cannot be cut into pieces): other callers go between its chunks
            between = BETWEEN.set(self._between if jobs[0].key is None else None)
            try:
                if jobs[0].key is not None and len(jobs[0].queries) > self.max_batch:
                    return [self._piece(jobs[0])]
                return [call(self.engine, first)]
            finally:
                BETWEEN.reset(between)
                CANCEL.reset(token)
        merged = first.model_copy(update={"query_list": [q for j in jobs for q in j.queries]})
        hits = kind_hits(self.engine, merged)  # type: ignore[arg-type]
        return [hits_reply(self.engine, j.request, part)  # type: ignore[arg-type]
                for j, part in zip(jobs, regroup(hits, [len(j.queries) for j in jobs]))]

    def _between(self) -> None:
        """Between two chunks of a whole call (a multi-query, a fan-out: requests that cannot be cut
        into pieces), on the service thread: the small searches of other callers waiting now are
        served, each in its own context, and answered at once."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            jobs = asyncio.run_coroutine_threadsafe(self._take_small(CALLER.get()), loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - the service is stopping: the call goes on alone
            return
        if not jobs:
            return
        ctx = contextvars.copy_context()
        ctx.run(CANCEL.set, None)  # not the long call's: its caller leaving does not stop these
        ctx.run(BETWEEN.set, None)
        try:
            results = ctx.run(self._serve, jobs)
        except Exception as e:  # noqa: BLE001 - the batch failed as a whole: its callers get the error
            results = [e] * len(jobs)
        for job, result in zip(jobs, results):
            loop.call_soon_threadsafe(_settle, job, result)

    async def _take_small(self, running: str) -> list[Job]:
        """On the event loop: a batch of waiting searches that can be merged, of another caller than
        `running`'s, within max_batch queries (none: [])."""
        first = next((j for j in self._jobs if j.caller != running and j.key is not None
                      and len(j.queries) <= self.max_batch), None)
        if first is None:
            return []
        self._jobs.remove(first)
        return self._with_its_key(first)

    def _piece(self, job: Job) -> Payload | None:
        """The next `max_batch` queries of a cut request; its reply once the last is searched. The
        whole request is held to the call limits before its first piece."""
        r: Any = job.request
        if job.done == 0:
            cfg = self.engine.config
            k = (cfg.top_k if r.top_k is None else r.top_k) + (getattr(r, "offset", 0) or 0)
            if getattr(r, "candidate_depth", None) is not None or hasattr(r, "fusion"):
                k = max(k, r.candidate_depth or cfg.hybrid.candidate_depth)
            check_limits(cfg.limits, len(job.queries), k)
        piece = job.queries[job.done : job.done + self.max_batch]
        job.hits += kind_hits(self.engine, r.model_copy(update={"query_list": piece}))
        job.done += len(piece)
        if job.done < len(job.queries):
            return None
        return hits_reply(self.engine, r, job.hits)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _settle(job: Job, result: Payload | Exception | None) -> None:
    """A job's reply (or error) handed to its caller, unless it left (or none came: a piece)."""
    if job.future.done() or result is None:
        return
    if isinstance(result, Exception):
        job.future.set_exception(result)
    else:
        job.future.set_result(result)
