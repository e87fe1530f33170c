"""How a call runs once the gate has let it through (core.py Gate): the caller's grants and calls in
flight around it, its audit line, and the thread it runs on: a worker, the compute thread, or (a
quick search) the thread it arrived on in the compute thread's place. Both MCP transports, the
tasks and the tools' functions serve their calls here."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypeVar

from .. import compute
from ..api import grants
from ..api.hits import quick
from ..api.models import Request
from ..api.tool import Tool
from ..api.ultrarag import adapt
from ..compute import CALLER
from ..errors import CancelledWork, ForbiddenError, LimitError
from ..security.guard import FROM_CLIENT
from ..security.limits import CANCEL, CHUNK, PROGRESS, Report
from ..security.principals import PRINCIPAL

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

log = logging.getLogger("retriever.mcp")
T = TypeVar("T")
# Set by a face that must know whether a call reached serve_call, which audits every outcome of its own:
# serve_call notes the tool's name in the list (FastMCP's middleware: a failure before it is the arguments')
REACHED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("retriever_reached", default=None)



async def serve_call(engine: Retriever, tool: Tool, request: Request,
                     then: Callable[[dict[str, Any]], T] | None = None, progress: Report | None = None,
                     at_once: bool = False) -> Any:
    """One call: the web tools are coroutines; the rest block, so they run on a worker thread that
    the request's cancellation stops (run). A search of at most one chunk of queries runs on the
    compute thread, where its encode and index search run (compute.py), instead of on a worker
    that hands them over and waits; a larger one on a worker, so other calls' chunks take turns
    with its own; `at_once` (the stdio server): a quick search (api/hits.py quick) runs right here on
    the event loop, in the compute thread's place while that one is idle (compute.here), without the
    hand-offs there and back. `then(reply)`, if given, runs where the call ran (stdio writes the answer
    there, without waking the event loop first) and its value is returned instead of the reply. `progress`:
    where the call's long work reports (the client asked with a progressToken; limits.caller_progress).
    A caller has at most limits.max_calls_per_caller calls running. The caller (principals.PRINCIPAL)
    needs the tool's scope and a grant on each collection the call acts on (api/grants.py); each
    write is audited, refused, failed or done (one whose arguments do not validate never gets here: the
    gate audits it, Gate.invalid)."""
    with _served(engine, tool, request, then) as (request, noted):
        return await _serve_call(engine, tool, request, noted, progress, at_once)


def serve_here(engine: Retriever, tool: Tool, request: Request, then: Callable[[dict[str, Any]], Any]) -> bool:
    """`serve_call(engine, tool, request, then, at_once=True)` of a quick search (api/hits.py quick), on this
    thread without awaiting anything, where the compute thread is idle (compute.here): the stdio server
    serves it as the line arrives, without a task and a turn of the event loop first. False, and nothing
    done: not such a call, or not now (serve_call serves it)."""
    if engine.ultrarag or not (_on_compute(tool, request) and quick(engine, request)):
        return False
    with compute.here() as here:
        if not here:
            return False
        with _served(engine, tool, request, then) as (request, noted):
            run_here(tool.name, compute.whole(lambda *args: noted(tool.call(*args))), engine, request)
    return True


@contextlib.contextmanager
def _served(engine: Retriever, tool: Tool, request: Request,
            then: Callable[[dict[str, Any]], T] | None) -> Iterator[tuple[Request, Callable[[dict[str, Any]], Any]]]:
    """What serve_call does around the work: the caller's grants (refused, audited), its calls in flight,
    and the audit of the outcome. Yields the request (UltraRAG's adapted) and what the reply goes
    through (`noted`: a listing of collections cut to those the caller may read, then `then`)."""
    reached = REACHED.get()
    if reached is not None:
        reached.append(tool.name)
    if engine.ultrarag:
        request = adapt(request, engine.config.index_backend)
    principal = PRINCIPAL.get()
    why = grants.refusal(principal, tool, engine, request)
    if why is not None:
        grants.audit(principal, tool, engine, request, "refused")
        raise ForbiddenError(why)
    replies: list[Any] = []

    def noted(payload: dict[str, Any]) -> Any:
        payload = grants.visible(principal, payload)  # a listing of collections: those it may read
        replies.append(payload)
        return payload if then is None else then(payload)

    try:
        with _in_flight(engine.base_config.limits.max_calls_per_caller):
            yield request, noted
    except BaseException as e:
        grants.audit(principal, tool, engine, request, "cancelled" if isinstance(e, asyncio.CancelledError) else "failed")
        raise
    grants.audit(principal, tool, engine, request, "done", replies[0] if replies else None)


@contextlib.contextmanager
def _in_flight(limit: int) -> Iterator[None]:
    """One more call of this caller (compute.CALLER: a bearer token over HTTP) running, within `limit`;
    a caller that is not told apart (stdio, HTTP without tokens) is not counted."""
    caller = CALLER.get()
    if not caller:
        yield
        return
    with _CALLS_LOCK:
        if _CALLS.get(caller, 0) >= limit:
            raise LimitError(f"this caller has {limit} calls running (limits.max_calls_per_caller); wait for one "
                             "to finish")
        _CALLS[caller] = _CALLS.get(caller, 0) + 1
    try:
        yield
    finally:
        with _CALLS_LOCK:
            _CALLS[caller] -= 1
            if not _CALLS[caller]:
                del _CALLS[caller]


_CALLS: dict[str, int] = {}  # caller -> its calls running
_CALLS_LOCK = threading.Lock()


async def _serve_call(engine: Retriever, tool: Tool, request: Request, then: Callable[[dict[str, Any]], T] | None,
                      progress: Report | None, at_once: bool) -> Any:
    if tool.asynchronous:
        FROM_CLIENT.set(True)
        payload = await tool.call(engine, request)
        return payload if then is None else then(payload)
    call = tool.call if then is None else lambda *args: then(tool.call(*args))
    if _on_compute(tool, request):
        if at_once and quick(engine, request):
            with compute.here() as here:
                if here:
                    return run_here(tool.name, compute.whole(call), engine, request)
        return await run(tool.name, compute.whole(call), engine, request, executor=compute.executor())
    return await run(tool.name, call, engine, request, progress=progress)


def run_here(name: str, fn: Callable[..., T], /, *args: Any) -> T:
    """`fn(*args)` on this thread (the event loop's, in the compute thread's place: compute.here), as
    a client's call (see `run`); short, so nothing can cancel it midway."""
    ctx, work = _as_call(name, fn, args, threading.Event(), None)
    return ctx.run(work)


def _as_call(name: str, fn: Callable[..., T], args: tuple[Any, ...], cancel: threading.Event,
             progress: Report | None) -> tuple[contextvars.Context, Callable[[], T]]:
    """A context for `fn(*args)` as a client's call (its cancel event, guard.py's checks, where its
    progress goes), and the work that runs it there."""
    ctx = contextvars.copy_context()
    ctx.run(CANCEL.set, cancel)
    ctx.run(FROM_CLIENT.set, True)
    if progress is not None:
        ctx.run(PROGRESS.set, progress)

    def work() -> T:
        try:
            return fn(*args)
        except CancelledWork as e:
            log.info("%s: %s", name, e)
            raise

    return ctx, work


def _on_compute(tool: Tool, request: Request) -> bool:
    """Whether the call runs whole on the compute thread: a search (not a web tool's coroutine) of at
    most one chunk of queries, without an LLM reranking (which waits seconds on a server elsewhere)."""
    if not tool.compute or tool.asynchronous or request.given("llm_rerank") is not None:
        return False
    queries = request.given("query_list", request.given("query"))  # the agent's search has `query`
    return (1 if isinstance(queries, str) else len(queries or ())) <= CHUNK


async def run(name: str, fn: Callable[..., T], /, *args: Any, executor: Executor | None = None,
              progress: Report | None = None) -> T:
    """`fn(*args)` on a worker thread (or `executor`'s), as a client's call: paths, endpoints and
    settings are checked (guard.py), and if the request is cancelled (the client gave up or went
    away) the work stops at its next chunk of queries (limits.py) instead of running on unseen."""
    event = threading.Event()
    ctx, work = _as_call(name, fn, args, event, progress)
    future = asyncio.get_running_loop().run_in_executor(executor, ctx.run, work)
    try:
        return await future
    except asyncio.CancelledError:
        event.set()
        log.info("%s: request cancelled; its remaining work is dropped", name)
        raise


__all__ = ["REACHED", "run", "run_here", "serve_call", "serve_here"]
