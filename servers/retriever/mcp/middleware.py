"""FastMCP's side of the gate (core.py): one middleware that turns every failure of a call into a
tool error with a message, and hides the tools the loaded configuration cannot serve (and, in a
`mode`, the kinds it cannot answer: registry.listed_input); over HTTP, the 403 scope challenge of a
call outside the caller's scopes (ScopeChallenge); and MCP tasks (tasks.py) on FastMCP's server, which
has none of its own without the fastmcp-tasks package (the 2026 extension's, on a task queue):
serve_tasks."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as ArgumentError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from mcp.shared.exceptions import MCPError
from mcp.types import ToolListChangedNotification
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..api import resources
from ..api.tool import Tool
from ..compute import CALLER
from ..errors import InvalidInputError
from ..security.http_guard import parsed, read_body, replay
from ..security.oauth import insufficient_scope
from ..security.principals import PRINCIPAL
from . import tasks
from .core import Gate, Refused
from .eras import MODERN
from .jsonrpc import INVALID_REQUEST  # in the body of the 403 (MCP names no code for it)
from .serving import REACHED

if TYPE_CHECKING:
    from ..engine.retriever import Retriever


class ToolErrors(Middleware):
    """Every failure of a tool call becomes a tool error with a message, in one place (core.Gate).
    A tool the loaded configuration cannot serve (a web tool without a key, ...) is not listed;
    when a call changes that (retriever_init), the client is told the list changed."""

    def __init__(self, engine: Retriever, tools: Sequence[Tool] = ()) -> None:
        self.gate = Gate(engine, tools)
        self.tasks = tasks.Tasks()

    async def on_list_tools(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        hidden = self.gate.withheld()
        return [t.model_copy(update={"parameters": self.gate.listed(t.name, t.parameters)})
                for t in await call_next(context) if t.name not in hidden]

    async def on_list_resource_templates(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        """The documents' template only to a caller that may read them (resources.refusal)."""
        templates = await call_next(context)
        return templates if resources.refusal(self.gate.engine) is None else []

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        name = context.message.name
        arguments = context.message.arguments or {}
        why = self.gate.refusal(name, arguments)
        if why is not None:
            raise ToolError(why)
        before = self.gate.hidden()
        reached: list[str] = []  # serve_call notes the call here: from then on it audits the call itself
        token = REACHED.set(reached)
        try:
            return await call_next(context)
        except Exception as raised:
            # FastMCP wraps what a tool raises in a ToolError (`from` it): judge by that cause
            e = raised.__cause__ if isinstance(raised, ToolError) and raised.__cause__ is not None else raised
            if not reached and isinstance(e, (ArgumentError, ValidationError, InvalidInputError)):
                self.gate.invalid(name, arguments)  # the signature's refusal, or NaN (Request.check_finite)
            told = self.gate.failure(name, Refused(str(e)) if isinstance(e, ToolError) else e, (ArgumentError,))
            raise ToolError(told) from (None if isinstance(e, ToolError) else e)
        finally:
            REACHED.reset(token)
            if self.gate.hidden() != before and context.fastmcp_context is not None:
                await context.fastmcp_context.send_notification(ToolListChangedNotification())


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class ScopeChallenge:
    """ASGI middleware inside FastMCP's HTTP app (server.py: `serve --transport http` and `deploy --mcp`),
    behind the HTTP guard that set the caller (security/http_guard.py): a `tools/call` of a tool this server
    serves whose scope the caller lacks (Gate.scope_refusal, which audits a write) is answered HTTP 403 with
    `WWW-Authenticate: Bearer error="insufficient_scope", scope="<the tool's scope>"` (and, in OAuth mode,
    `resource_metadata`): the MCP authorization spec's scope challenge, as the deploy service's routes answer
    (security/oauth.py insufficient_scope). Its body is a JSON-RPC error with the request's id and the refusal,
    which the MCP client hands to its caller. A call its grants or security.visibility refuse depends on the
    collection its arguments name and stays a tool error (serve_call). Anything else passes through as sent;
    a caller holding every scope the served tools need passes without its body being read."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app, self.gate = app, gate
        self.needed = frozenset(t.scope for t in gate.tools.values())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or self.needed <= PRINCIPAL.get().scopes:
            await self.app(scope, receive, send)
            return
        messages = await read_body(receive) or []  # the guard has read it whole and bounded it: a replay
        refused = await self._refused(b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request"))
        if refused is None:
            await self.app(scope, replay(messages, receive), send)
            return
        rid, needed, why = refused
        header = insufficient_scope(self.gate.engine.base_config.security.http.oauth, needed)
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": INVALID_REQUEST, "message": why}}).encode()
        await send({"type": "http.response.start", "status": 403, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", header.encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _refused(self, body: bytes) -> tuple[Any, str, str] | None:
        """(the request's id, the scope it needs, why) for a tools/call the caller's scopes do not reach."""
        if b"tools/call" not in body:
            return None
        try:
            message = await parsed(body, json.loads)
        except (ValueError, RecursionError):
            return None  # the transport answers what it cannot read
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return None
        refused = self.gate.scope_refusal(params["name"], params.get("arguments") or {})
        return None if refused is None else (message.get("id"), *refused)


def _owner(ctx: Any) -> str:
    """Whose tasks: the caller a token tells apart (compute.CALLER), else the MCP session."""
    from fastmcp.server.dependencies import bind_request_context, get_context

    with bind_request_context(ctx):
        return CALLER.get() or f"session:{get_context().session_id}"


class _UpdateTaskParams(BaseModel):
    """tasks/update's params (the tasks extension's; no SDK type has them)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")
    input_responses: Any = Field(default=None, alias="inputResponses")


def _with_meta(ctx: Any) -> dict[str, Any]:
    """A request's params with its `_meta` (the SDK hands the two apart), as tasks.py reads them."""
    params = dict(ctx.params or {})
    meta = ctx.meta
    if meta is not None and "_meta" not in params:
        params["_meta"] = meta if isinstance(meta, dict) else meta.model_dump(by_alias=True, exclude_none=True)
    return params


def serve_tasks(server: Any, errors: ToolErrors) -> None:
    """MCP tasks on FastMCP's server, kept in `errors.tasks`, where the revision has them: a tools/call
    with `task` answered by a middleware of the SDK's low-level server (FastMCP's own middleware cannot
    answer it: the SDK holds a tools/call answer of the 2025-11-25 revision to CallToolResult, except
    one a low-level middleware gives), tasks/get, /result, /cancel and /list as its request handlers,
    and the `tasks` capability in its initialize answer. On 2026-07-28 the tasks extension (SEP-2663)
    the same way: the middleware answers a long tool's call from a client that declared it with a
    CreateTaskResult (the SDK passes a result of an extension's resultType through unchecked),
    tasks/get, /update and /cancel answer as the extension has them, and server/discover declares it
    in capabilities.extensions. (FastMCP's own ServerExtension would do too, but its interceptor runs
    after FastMCP's middleware, and its tasks/get would clash with these handlers.)"""
    from mcp.types import PaginatedRequestParams, ServerTasksCapability
    from mcp_types import CancelTaskRequestParams, GetTaskPayloadRequestParams, GetTaskRequestParams

    low = server._mcp_server

    async def start(ctx: Any, call_next: Any) -> Any:
        """A tools/call the client asked to run as a task: the task at once, the call on in the
        background (its progress is the task's statusMessage: the request that could carry
        notifications has been answered)."""
        params = _with_meta(ctx)
        legacy = ctx.protocol_version in tasks.VERSIONS and params.get("task") is not None
        extension = ctx.protocol_version in MODERN and tasks.as_task(errors.gate.tools, params)
        if ctx.method != "tools/call" or not (legacy or extension):
            return await call_next(ctx)
        try:
            return errors.tasks.start(_owner(ctx), errors.gate, params, extension=extension)
        except tasks.TaskError as e:
            raise MCPError(code=e.code, message=str(e), data=e.data) from None

    def handler(method: str) -> Callable[[Any, Any], Awaitable[dict[str, Any]]]:
        async def answer(ctx: Any, params: Any) -> dict[str, Any]:
            extension = ctx.protocol_version in MODERN
            if (ctx.protocol_version not in tasks.VERSIONS or method not in tasks.METHODS) and not extension:
                raise MCPError(code=tasks.METHOD_NOT_FOUND, message=f"Method not found: {method} (revision "
                                                                    f"{ctx.protocol_version} has no such tasks)")
            try:
                if extension and method in tasks.EXTENSION_METHODS and not tasks.declared(_with_meta(ctx)):
                    raise tasks.undeclared(method)
                return await errors.tasks.answer(_owner(ctx), method,
                                                 params.model_dump(by_alias=True, exclude_none=True), extension)
            except tasks.TaskError as e:
                raise MCPError(code=e.code, message=str(e), data=e.data) from None
        return answer

    low.middleware.append(start)
    kinds: tuple[Any, ...] = (GetTaskRequestParams, GetTaskPayloadRequestParams, CancelTaskRequestParams,
                              PaginatedRequestParams, _UpdateTaskParams)
    for method, kind in zip((*tasks.METHODS, "tasks/update"), kinds, strict=True):
        low.add_request_handler(method, kind, handler(method))
    declared = low.get_capabilities

    def capabilities(*args: Any, protocol_version: str | None = None, **kw: Any) -> Any:
        out = declared(*args, protocol_version=protocol_version, **kw)
        if protocol_version is None or protocol_version in tasks.VERSIONS:
            out.tasks = ServerTasksCapability.model_validate(tasks.CAPABILITY)
        if protocol_version in MODERN:  # the tasks extension (SEP-2663) in server/discover
            out.extensions = {**(out.extensions or {}), tasks.EXTENSION: {}}
        return out

    low.get_capabilities = capabilities
