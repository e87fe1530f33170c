"""What both MCP transports share, without importing an MCP framework: the tools a server lists,
a call's function (its signature is its request model's, so the arguments validate as FastMCP
validates them), the worker thread a call runs on, and the gate every call goes through (the
tools the configuration hides, the refusals before a call, the message of every failure).

The streamable HTTP server is FastMCP's (server.py); stdio is served by stdio.py on this alone, so a
stdio start imports no MCP framework."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from .. import compute
from ..api import grants
from ..api.hits import quick
from ..api.models import Request, argument_problems, unreadable_json
from ..api.registry import listed_input, selected
from ..api.replies import reply
from ..api.tool import Tool
from ..api.ultrarag import adapt
from ..compute import CALLER
from ..errors import CancelledWork, ForbiddenError, InvalidInputError, LimitError, RetrieverError
from ..security.guard import FROM_CLIENT, for_client
from ..security.limits import CANCEL, CHUNK, PROGRESS, Report
from ..security.principals import PRINCIPAL

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

log = logging.getLogger("retriever.mcp")
T = TypeVar("T")
# Set by a face that must know whether a call reached serve_call, which audits every outcome of its own:
# serve_call notes the tool's name in the list (FastMCP's middleware: a failure before it is the arguments')
REACHED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("retriever_reached", default=None)


class Refused(Exception):
    """A call refused or failed with a message for the client (MCP's tool error: isError true)."""


def served_tools(engine: Retriever, read_only: bool | None = None, ultrarag: bool = False, profile: str | None = None,
                 include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> list[Tool]:
    """The tools of `profile` (default: tools.profile in the YAML; `ultrarag` implies the ultrarag
    profile), plus `include`, less `exclude`. `read_only` (default: security.read_only in the YAML)
    leaves out every tool that writes, and makes the engine write no file either."""
    cfg = engine.base_config
    if read_only and not cfg.security.read_only:
        engine.serve_read_only()  # writes no file either (calibration.py), as the YAML's read_only
    read_only = cfg.security.read_only if read_only is None else read_only
    profile = profile or ("ultrarag" if ultrarag else cfg.tools.profile)
    return selected(profile, cfg.tools.include if include is None else include,
                    cfg.tools.exclude if exclude is None else exclude, read_only)


def tool_function(name: str, model: type[Request], serve: Callable[[Request], Awaitable[T]],
                  returns: Any = inspect.Signature.empty) -> Callable[..., Awaitable[T]]:
    """An async function whose keyword parameters are `model`'s fields (with their descriptions,
    defaults and ranges), so FastMCP's input schema is the model's. Its caller validates the arguments
    by that signature (FastMCP's adapter, or Gate.request's), the one validation of a call: the body
    builds the model from them without validating them again (Request.built, model_construct's result: each field's type,
    range and validators have run; `extra="forbid"` is the signature's refusal of an unknown
    argument), runs the model's one check across values (Request.check_finite) and serves it
    (tests/test_one_validation.py: it equals the model's own validation). No docstring: the
    description is given to FastMCP as such (server.py), which otherwise imports griffe and parses
    every docstring at start-up (0.03-0.13 s of build_server here).
    `returns`: the return annotation (FastMCP reads it)."""
    fields = sorted(model.model_fields.items(), key=lambda item: not item[1].is_required())
    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[f.annotation, f],
                                default=inspect.Parameter.empty if f.is_required() else f.default)
              for n, f in fields]

    async def tool(**arguments: Any) -> T:
        return await serve(model.built(**arguments).check_finite())

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params}
    if returns is not inspect.Signature.empty:
        tool.__annotations__["return"] = returns
    return tool


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
    if (engine.ultrarag or not tool.compute or tool.asynchronous or _queries(request) > CHUNK
            or request.given("llm_rerank") is not None or not quick(engine, request)):
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
    # an LLM reranking waits seconds on a server elsewhere: not on the compute thread
    if tool.compute and _queries(request) <= CHUNK and getattr(request, "llm_rerank", None) is None:
        if at_once and quick(engine, request):
            with compute.here() as here:
                if here:
                    return run_here(tool.name, compute.whole(call), engine, request)
        return await run(tool.name, compute.whole(call), engine, request, executor=compute.executor())
    return await run(tool.name, call, engine, request, progress=progress)


def _done(work: Awaitable[T]) -> T:
    """The value of a coroutine that completes without waiting on anything (the tool function's body
    around `validated`: the request built and returned), run to its end here."""
    coro = work.__await__()
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    coro.close()
    raise RuntimeError("a validation waited on something")


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


def _queries(request: Request) -> int:
    """How many queries a search request holds (`query_list`, or the agent's `query`)."""
    queries = request.given("query_list", request.given("query"))
    return 1 if isinstance(queries, str) else len(queries or ())


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


class Gate:
    """Every call of a server goes through here. A client's mistake (wrong arguments, our errors: a
    missing index, a path outside the roots, ...) is told to the client and logged as one line;
    anything else is our bug: an internal error, logged with its traceback. Arguments over
    limits.max_request_bytes are refused first. A tool the loaded configuration cannot serve (a web
    tool without a key, ...) is not listed (`hidden`)."""

    def __init__(self, engine: Retriever, tools: Sequence[Tool]) -> None:
        self.engine = engine
        self.tools = {t.name: t for t in tools}
        self._hidden: tuple[object, set[str]] = (None, set())
        self._validators: dict[str, TypeAdapter[Any]] = {}

    async def request(self, tool: Tool, arguments: dict[str, Any]) -> Request:
        """`request_now`, awaitable."""
        return self.request_now(tool, arguments)

    def request_now(self, tool: Tool, arguments: dict[str, Any]) -> Request:
        """The tool's arguments checked as FastMCP checks them (the same signature, tool_function)
        into its request: the call's one validation. A write whose arguments do not validate is audited."""
        if tool.name not in self._validators:
            async def validated(request: Request) -> Request:
                return request

            self._validators[tool.name] = TypeAdapter(tool_function(tool.name, tool.request, validated))  # type: ignore[arg-type]
        try:
            return _done(self._validators[tool.name].validate_python(arguments))
        except (ValidationError, InvalidInputError):  # the signature's refusal, or NaN (Request.check_finite)
            self.invalid(tool.name, arguments)
            raise

    def invalid(self, name: str, arguments: Any) -> None:
        """The audit line of a call of `name` refused because its arguments do not validate (a write only:
        grants.audit), its collections read from the raw arguments as a call refused for its scope."""
        tool = self.tools.get(name)
        if tool is not None:
            grants.audit(PRINCIPAL.get(), tool, self.engine, arguments if isinstance(arguments, dict) else {},
                         "invalid arguments")

    async def call_result(self, name: str, arguments: dict[str, Any], progress: Report | None = None
                          ) -> dict[str, Any]:
        """One call's CallToolResult as the wire has it, made as both servers make a plain call's: the
        refusals, the arguments validated, serve_call, a failure as a tool error (a task's outcome:
        tasks.py)."""
        why = self.refusal(name, arguments)
        if why is not None:
            return tool_result(why, True)
        tool = self.tools[name]  # the refusal named any other
        try:
            payload = await serve_call(self.engine, tool, await self.request(tool, arguments), progress=progress)
        except Exception as e:
            return tool_result(self.failure(name, e), True)
        text, structured = reply(payload, tool.output_schema is not None)
        return tool_result(text, structured=structured)

    def withheld(self) -> set[str]:
        """The tools tools/list leaves out for this request: those hidden by the configuration, and
        those the caller may not call: outside its scopes, or refused to it under security.visibility
        (api/grants.py listed)."""
        return self.hidden() | (set(self.tools) - grants.listed(PRINCIPAL.get(), self.tools.values(), self.engine))

    def hidden(self) -> set[str]:
        """The tools the loaded configuration cannot serve, worked out once per configuration
        (a new one comes only with retriever_init), not twice on every call."""
        cfg = self.engine.config
        if self._hidden[0] is not cfg:
            self._hidden = (cfg, {name for name, t in self.tools.items() if t.unavailable(self.engine) is not None})
        return self._hidden[1]

    def listed(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The input schema of `name` as listed with the loaded configuration (registry.listed_input)."""
        return listed_input(self.engine, name, schema)

    def refusal(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why a call of `name` with `arguments` is refused before it runs (None: it may run). A write
        refused for the caller's scope is audited here (its grants are checked, and audited, in serve_call)."""
        limit = self.engine.base_config.limits.max_request_bytes
        try:
            size = len(json.dumps(arguments, default=str))
        except (ValueError, RecursionError) as e:  # an integer over 4,300 digits, nesting past the recursion limit
            log.info("%s: unreadable arguments: %s", name, unreadable_json(e))
            self.invalid(name, arguments)
            return f"{name}: invalid arguments: {unreadable_json(e)}"
        if size > limit:
            return f"{name}: the arguments are {size} bytes, over limits.max_request_bytes ({limit})"
        tool = self.tools.get(name)
        if tool is None:
            log.info("%s: no such tool here", name)
            return (f"no tool {name!r} on this server (its profile, read-only mode or tools.exclude leave it out); "
                    f"its tools: {', '.join(self.tools) or 'none'}")
        why = tool.unavailable(self.engine)
        if why is not None:
            log.info("%s: refused: needs %s", name, why)
            return f"{name} cannot work with this server's configuration: it needs {why}"
        refused = self.scope_refusal(name, arguments)
        return None if refused is None else refused[1]

    def scope_refusal(self, name: str, arguments: Any) -> tuple[str, str] | None:
        """(the scope it needs, why) where the caller's scopes do not reach the tool `name` that this server
        serves and can serve (None: they do, or the gate refuses the call for another reason first). Such a
        write is audited here, its collections read from the raw `arguments` (grants.named_in). MCP over HTTP
        answers it with 403 before the call reaches FastMCP (middleware.ScopeChallenge); the other transports
        with a tool error (refusal)."""
        tool = self.tools.get(name)
        if tool is None or name in self.hidden():
            return None
        principal = PRINCIPAL.get()
        why = grants.scope_refusal(principal, tool)
        if why is None:
            return None
        log.info("%s: refused: %s", name, why)
        grants.audit(principal, tool, self.engine, arguments if isinstance(arguments, dict) else {}, "refused")
        return tool.scope, why

    def failure(self, name: str, e: BaseException, arguments_error: tuple[type[BaseException], ...] = ()) -> str:
        """The message for the client of what a call raised; logged once. `arguments_error`: the
        framework's own exception for arguments that do not validate, if it has one."""
        if isinstance(e, (Refused, RetrieverError)):
            log.info("%s: %s", name, " ".join(str(e).split())[:500])
            return for_client(str(e), self.engine.config, self.engine.base_dir)  # paths relative to the YAML's folder
        if isinstance(e, (ValidationError, *arguments_error)):
            problems = argument_problems(e)  # type: ignore[arg-type]
            log.info("%s: invalid arguments: %s", name, problems)
            return f"{name}: invalid arguments: {problems}"
        log.error("%s: internal error", name, exc_info=e)
        return f"{name}: internal error ({type(e).__name__}); this is a bug in the server, whose log has the details"


def tool_result(text: str, error: bool = False, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    """MCP's tool result: the JSON (or the message) as text, and structured content where given."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


__all__ = ["REACHED", "Gate", "Refused", "run", "serve_call", "served_tools", "tool_function", "tool_result"]
