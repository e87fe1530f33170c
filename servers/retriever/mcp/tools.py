"""Tools from the registry (api/registry.py): a tool's signature (and so its input schema) is made
from its request model, whose fields are described; its annotations from its effects."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from mcp.types import ToolAnnotations

from ..api.models import Request
from ..api.replies import reply
from ..api.tool import Tool
from ..api.ultrarag import adapt
from .middleware import run

if TYPE_CHECKING:
    from ..engine.retriever import Retriever


def tool_annotations(tool: Tool) -> ToolAnnotations:
    e = tool.effects
    return ToolAnnotations(read_only_hint=e.read_only, destructive_hint=e.destructive, idempotent_hint=e.idempotent,
                           open_world_hint=e.open_world)


def tool_function(name: str, model: type[Request],
                  serve: Callable[[Request], Awaitable[ToolResult]]) -> Callable[..., Awaitable[ToolResult]]:
    """An async function whose keyword parameters are `model`'s fields (with their descriptions,
    defaults and ranges), so FastMCP's input schema is the model's; it validates into the model
    and serves it. No docstring: the description is given to FastMCP as such (register), which
    otherwise imports griffe and parses every docstring at start-up (0.03-0.13 s of build_server here)."""
    fields = sorted(model.model_fields.items(), key=lambda item: not item[1].is_required())
    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[f.annotation, f],
                                default=inspect.Parameter.empty if f.is_required() else f.default)
              for n, f in fields]

    async def tool(**arguments: Any) -> ToolResult:
        return await serve(model.model_validate(arguments))

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=ToolResult)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": ToolResult}
    return tool


def structured(payload: dict[str, Any]) -> ToolResult:
    """A tool with an output schema always sends its structured content (MCP structured output),
    and the same JSON as text for clients that read only text."""
    result = reply(payload)
    return ToolResult(content=result.content, structured_content=payload)


async def serve_call(engine: Retriever, tool: Tool, request: Request) -> dict[str, Any]:
    """One call: the web tools are coroutines; the rest block, so they run on a worker thread that
    the request's cancellation stops (middleware.run)."""
    if engine.ultrarag:
        request = adapt(request, engine.config.index_backend)
    if inspect.iscoroutinefunction(tool.call):
        from ..security.guard import FROM_CLIENT

        FROM_CLIENT.set(True)
        return await tool.call(engine, request)
    return await run(tool.name, tool.call, engine, request)


class RetrieverMCP(FastMCP):
    """A FastMCP server that knows its engine: the tool functions are made once per tool (FastMCP
    caches a function's schema adapter for the life of the process, so functions that closed over
    an engine kept every engine, and its model, alive) and find their engine here."""

    engine: Retriever


_FUNCTIONS: dict[str, Callable[..., Awaitable[ToolResult]]] = {}


def registered(spec: Tool) -> Callable[..., Awaitable[ToolResult]]:
    """The tool function of `spec`, the same object for every server."""
    if spec.name not in _FUNCTIONS:
        _FUNCTIONS[spec.name] = _function(spec)
    return _FUNCTIONS[spec.name]


def _function(spec: Tool) -> Callable[..., Awaitable[ToolResult]]:
    async def serve(request: Request) -> ToolResult:
        from fastmcp.server.dependencies import get_server

        server = get_server()
        payload = await serve_call(server.engine, spec, request)  # type: ignore[attr-defined]
        return structured(payload) if spec.output_schema else reply(payload)

    return tool_function(spec.name, spec.request, serve)


def register(mcp: FastMCP, tools: Sequence[Tool]) -> None:
    for spec in tools:
        mcp.tool(registered(spec), description=inspect.cleandoc(spec.doc), output_schema=spec.output_schema,
                 annotations=tool_annotations(spec), title=spec.title)


__all__ = ["RetrieverMCP", "tool_annotations", "register", "serve_call", "tool_function"]
