"""`retriever deploy`: one process, the index loaded once, many clients over HTTP.

Routes (JSON in and out; every one but the health checks needs the bearer token when tokens or OAuth
are set, and the caller's scope: `read` for each of these, with a read grant on the collection searched;
api/grants.py, docs/security.md):
- `POST /search`: UltraRAG's deploy API (`query_list`, `top_k`, `query_instruction`,
  `collection_name` -> `ret_psg`) plus ours: `mode` (dense, bm25, hybrid), filters, scores, ids,
  metadata, paging (api/models.py DeploySearchRequest). Replies are whole unless `max_bytes` asks.
- `POST /tools/<tool>`: each read-only tool of the MCP server, with the same arguments and reply.
- `GET /healthz` (the process answers), `/readyz` (the indexes are loaded; it needs no token, so
  it says which indexes and how many documents, never a path), `/metrics` (Prometheus),
  `/openapi.json`.
- the MCP streamable HTTP endpoint at `/mcp`, when mounted.

Searches go through the micro-batcher (batcher.py): a full queue answers 503 with Retry-After, a
request that waits longer than `deploy.request_timeout` 504, and the work of a caller that went
away (or timed out) is dropped: a queued request before it runs, a running one at its next piece
of `deploy.max_batch` queries (a request run whole: at its search's next chunk of queries).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..api import grants
from ..api.models import DeploySearchRequest, Request, argument_problems, unreadable_json
from ..api.registry import BY_NAME, TOOLS
from ..api.replies import json_bytes
from ..errors import (
    ForbiddenError,
    IndexMissingError,
    LimitError,
    NotInitializedError,
    RemoteError,
    RetrieverError,
)
from ..security.guard import for_client
from ..security.http_guard import front_door, parsed
from ..security.oauth import insufficient_scope
from ..security.principals import PRINCIPAL
from .batcher import Batcher, Job, QueueFull
from .metrics import Metrics
from .openapi import openapi

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

log = logging.getLogger("retriever.service")
OPEN_PATHS = ("/healthz", "/readyz")
READY_KEYS = ("status", "dense_index", "bm25_index", "generation")  # what /readyz tells anyone who asks
# /tools/<tool>: the registry's read-only tools of any profile, but the web's (served by MCP only)
READ_TOOLS: dict[str, type[Request]] = {t.name: t.request for t in TOOLS
                                        if t.effects.read_only and not inspect.iscoroutinefunction(t.call)}
STATUS: tuple[tuple[type[RetrieverError], int], ...] = (
    (ForbiddenError, 403), (IndexMissingError, 404), (LimitError, 413), (NotInitializedError, 503),
    (RemoteError, 502))


class Service:
    """The state of one deployed service: its engine, the batcher, readiness and metrics."""

    def __init__(self, engine: Retriever) -> None:
        self.engine = engine
        self.settings = engine.base_config.deploy
        self.metrics = Metrics(lambda: self.batcher.depth() if self.batcher else 0)
        self.batcher: Batcher | None = None
        self.requests = 0  # HTTP requests inside the service now (Counted)
        self.problem: str | None = "loading the corpus, the model and the indexes"

    async def start(self) -> None:
        """Load the engine (off the event loop), then warm the model with one query."""
        try:
            status = await asyncio.to_thread(self.engine.init)
            if not (status.get("dense_index") or status.get("bm25_index")):
                self.problem = "no index is loaded; build them first with `retriever index`"
                log.error("not ready: %s", self.problem)
                return
            if self.engine.dense is not None:  # the model and the dense index (BM25 may not be built)
                await asyncio.to_thread(lambda: self.engine.search(["warm-up"], 1, mode="dense"))
            self.problem = None
            log.info("ready: %s", json.dumps(status))
        except Exception as e:  # the log has the details; the process stays up for /healthz
            self.problem = f"retriever_init failed ({type(e).__name__}); the server log has the details"
            log.exception("not ready")

    async def search(self, request: Request, http: HTTPRequest) -> Response:
        """Queue `request`, wait for its reply, drop it if the caller goes away or time runs out."""
        if self.problem is not None or self.batcher is None:
            return _error(503, f"not ready: {self.problem}", retry_after=1)
        served = self.batcher.now(request)
        if served is not None:
            if isinstance(served, Exception):  # answered by _answer, as a queued request's error is
                raise served
            return _json_reply(served)
        try:
            job = self.batcher.submit(request)
        except QueueFull as e:
            return _error(503, str(e), retry_after=1)
        gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(http))
        waiting: set[asyncio.Future[Any]] = {job.future, gone}
        try:
            done, _ = await asyncio.wait(waiting, timeout=self.settings.request_timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if job.future in done:  # result() raises the job's error, answered by _answer
            return _json_reply(job.future.result())
        return self._given_up(job, "disconnected" if gone in done else "timeout")

    def _given_up(self, job: Job, reason: str) -> Response:
        assert self.batcher is not None
        self.batcher.drop(job, reason)
        if reason == "disconnected":
            return Response(status_code=499)  # nobody reads it; counted in the metrics
        return _error(504, f"no reply within {self.settings.request_timeout} s (deploy.request_timeout)")


async def _disconnected(http: HTTPRequest) -> None:
    """Returns when the client closes the connection (the body has been read already)."""
    while (await http.receive())["type"] != "http.disconnect":
        pass


READY_TIMEOUT_S = 5.0  # /readyz: how long the index backend (a Milvus server) may take to answer


class Counted:
    """ASGI middleware, outermost: counts the HTTP requests inside the service (Service.requests), from
    before the guard reads them, so the batcher knows a lone caller from one among others."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.service.requests += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.service.requests -= 1


def _backend_problem(engine: Retriever) -> str | None:
    """Why the session's index backend cannot serve searches now (a Milvus server down, its
    collection missing or released), or None. An index without a health check (FAISS, loaded
    from disk) is as ready as its load was; a Milvus one asks the server each time."""
    check = getattr(engine.dense, "health", None)
    return check(READY_TIMEOUT_S) if callable(check) else None


def _json_reply(payload: Any) -> Response:
    """A search's reply for its caller (a listing of collections cut to those it may read), as JSON by our
    serialiser (api/replies.py json_bytes: a sixth of json.dumps' time, which Starlette's JSONResponse
    uses; NaN as null, a lone surrogate escaped, where json.dumps refuses both)."""
    return Response(json_bytes(grants.visible(PRINCIPAL.get(), payload)), media_type="application/json")


def _error(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _denied(engine: Retriever, what: str, scope: str, request: Request | None = None) -> Response | None:
    """403 where the caller may not make this request (api/grants.py): without `scope`, with RFC 6750's
    insufficient_scope challenge naming it; without a grant on the collection it acts on, by name."""
    principal = PRINCIPAL.get()
    why = (grants.needs(principal, what, scope) if request is None
           else grants.access_refusal(principal, what, scope, engine, request))
    if why is None:
        return None
    log.info("%s: 403 %s", what, why)
    if principal.has(scope):
        return _error(403, why)
    header = insufficient_scope(engine.base_config.security.http.oauth, scope)
    return JSONResponse({"error": why}, status_code=403, headers={"WWW-Authenticate": header})


def _status_of(e: RetrieverError) -> int:
    return next((code for kind, code in STATUS if isinstance(e, kind)), 400)


Handler = Callable[[HTTPRequest], Awaitable[Response]]


def _answer(service: Service, route: str, handler: Handler) -> Handler:
    """`handler` with its errors turned into replies, and its count and latency in the metrics."""

    async def endpoint(http: HTTPRequest) -> Response:
        start = time.perf_counter()
        try:
            response = await handler(http)
        except ValidationError as e:
            response = _error(422, f"invalid arguments: {argument_problems(e)}")
            log.info("%s: 422 invalid arguments: %s", route, argument_problems(e)[:500])
        except RetrieverError as e:  # its paths relative to the YAML's folder; the log keeps them whole
            response = _error(_status_of(e), for_client(str(e), service.engine.config, service.engine.base_dir))
            log.info("%s: %d %s", route, response.status_code, " ".join(str(e).split())[:500])
        except ClientDisconnect:
            log.info("%s: the client went away before its request was read; dropped", route)
            response = Response(status_code=499)  # nobody reads it; counted in the metrics
        except Exception as e:
            log.exception("%s: unexpected error", route)
            response = _error(500, f"internal error ({type(e).__name__}); the server log has the details")
        service.metrics.observe(route, response.status_code, time.perf_counter() - start)
        return response

    return endpoint


async def _request(http: HTTPRequest, model: type[Any]) -> Any:
    """The body as `model`, parsed and validated on a thread where it is large (http_guard.parsed)."""
    return await parsed(await http.body(), lambda body: model.model_validate(_json(body)))


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RetrieverError(f"the request body is not JSON: {e}") from None
    except (ValueError, RecursionError) as e:  # JSON that Python cannot hold: a 5,000-digit number, deep nesting
        raise RetrieverError(f"the request body cannot be read: {unreadable_json(e)}") from None


def build_app(engine: Retriever, host: str, port: int, mcp_app: Any = None) -> Starlette:
    """The service's ASGI app; `mcp_app` (FastMCP's http_app) is mounted at /mcp if given."""
    engine.serve_read_only()  # no route writes, and no search writes a file (calibration.py)
    service = Service(engine)

    async def search(http: HTTPRequest) -> Response:
        request = (await _request(http, DeploySearchRequest)).as_search(engine.default_mode())
        return _denied(engine, "/search", "read", request) or await service.search(request, http)

    async def tool(http: HTTPRequest) -> Response:
        name = http.path_params["name"]
        if name not in READ_TOOLS:
            return _error(404, f"no tool {name!r} here; the read-only tools are: {', '.join(READ_TOOLS)}")
        request = await _request(http, READ_TOOLS[name])
        return _denied(engine, name, BY_NAME[name].scope, request) or await service.search(request, http)

    async def healthz(http: HTTPRequest) -> Response:
        return JSONResponse({"status": "alive"})

    reported: list[str | None] = [None]  # the backend's last problem, logged when it changes

    async def readyz(http: HTTPRequest) -> Response:
        if service.problem is not None:
            return _error(503, f"not ready: {service.problem}", retry_after=1)
        problem, status = None, {}
        try:  # off the event loop: a Milvus server that hangs must not stop the searches
            problem = await asyncio.wait_for(asyncio.to_thread(_backend_problem, engine), READY_TIMEOUT_S + 2)
            if problem is None:
                status = await asyncio.wait_for(asyncio.to_thread(engine.status), READY_TIMEOUT_S + 2)
        except TimeoutError:
            problem = f"the index backend did not answer within {READY_TIMEOUT_S:.0f} s"
        except RetrieverError as e:
            problem = for_client(str(e), engine.config, engine.base_dir)
        if problem != reported[0]:
            log.warning("not ready: %s", problem) if problem else log.info("ready again: the index backend answers")
            reported[0] = problem
        if problem is not None:
            return _error(503, f"not ready: {problem}", retry_after=1)
        ready = {key: status.get(key) for key in READY_KEYS}  # which indexes, how many documents
        if engine.config.security.visibility is not None:  # counts would tell of hidden documents: which indexes only
            ready = {k: v is not None if k in ("dense_index", "bm25_index") else v for k, v in ready.items()}
        return JSONResponse(ready)

    async def metrics(http: HTTPRequest) -> Response:
        refused = _denied(engine, "/metrics", "read")
        if refused is not None:
            return refused
        body, content_type = service.metrics.exposition(http.headers.get("accept"))
        return Response(body, media_type=content_type)

    async def spec(http: HTTPRequest) -> Response:
        return _denied(engine, "/openapi.json", "read") or JSONResponse(openapi(list(READ_TOOLS.items())))

    routes: list[BaseRoute] = [Route("/search", _answer(service, "/search", search), methods=["POST"]),
              Route("/tools/{name}", _answer(service, "/tools", tool), methods=["POST"]),
              Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics),
              Route("/openapi.json", spec)]
    if mcp_app is not None:
        routes.append(Mount("/", app=mcp_app))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        service.batcher = Batcher(engine, service.settings, service.metrics, lambda: service.requests <= 1)
        worker = asyncio.create_task(service.batcher.run())
        loading = asyncio.create_task(service.start())
        async with contextlib.AsyncExitStack() as stack:
            if mcp_app is not None:
                await stack.enter_async_context(mcp_app.lifespan(mcp_app))
            try:
                yield
            finally:
                for task in (loading, worker):
                    task.cancel()
                service.batcher.close()

    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(Counted, service=service), front_door(engine.base_config, host, port, OPEN_PATHS)])
    app.state.service = service
    return app
