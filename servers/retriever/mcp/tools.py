"""Tools from the registry (api/registry.py) on a FastMCP server: a tool's signature (and so its
input schema) is made from its request model, whose fields are described (core.tool_function);
its annotations from its effects."""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from fastmcp.tools.function_tool import FunctionTool
from mcp.types import TextContent, ToolAnnotations, ToolExecution

from ..api.models import Request
from ..api.registry import TOOLS
from ..api.replies import reply
from ..api.tool import Tool
from .core import tool_function
from .definitions import PATH
from .serving import serve_call

if TYPE_CHECKING:
    from ..engine.retriever import Retriever


def tool_annotations(tool: Tool) -> ToolAnnotations:
    e = tool.effects
    return ToolAnnotations(read_only_hint=e.read_only, destructive_hint=e.destructive, idempotent_hint=e.idempotent,
                           open_world_hint=e.open_world)


def result(payload: dict[str, Any], structured: bool = False) -> ToolResult:
    """The reply as MCP's tool result: its JSON as text, and as structured content where
    api/replies.py says (always for a tool with an output schema)."""
    text, content = reply(payload, structured)
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=content)


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
        from fastmcp.server.dependencies import get_context, get_server

        server = get_server()
        payload = await serve_call(server.engine, spec, request,  # type: ignore[attr-defined]
                                   progress=_progress(get_context(), asyncio.get_running_loop()))
        return result(payload, spec.output_schema is not None)

    return tool_function(spec.name, spec.request, serve, ToolResult)


def _progress(ctx: Context, loop: asyncio.AbstractEventLoop) -> Callable[[int, int, str], None] | None:
    """The call's progress, sent by FastMCP's context from the call's thread; None where the client
    gave no progressToken."""
    request = ctx.request_context
    meta = request.meta if request is not None else None  # a dict under the 2026-07-28 revision
    token = meta.get("progressToken") if isinstance(meta, dict) else getattr(meta, "progressToken", None)
    if token is None:
        return None

    def send(done: int, total: int, what: str) -> None:
        asyncio.run_coroutine_threadsafe(ctx.report_progress(done, total, what), loop)

    return send


def register(mcp: FastMCP, tools: Sequence[Tool]) -> None:
    for spec in tools:
        tool = FunctionTool.from_function(registered(spec), description=inspect.cleandoc(spec.doc), title=spec.title,
                                          output_schema=spec.output_schema, annotations=tool_annotations(spec))
        if spec.long:  # a client may run it as an MCP task (tasks.py), served by our handlers (server.py), not FastMCP's
            tool.execution = ToolExecution(task_support="optional")
        mcp.add_tool(tool)


def listed() -> dict[str, dict[str, Any]]:
    """FastMCP's listing of every tool of the registry: what definitions.PATH must hold."""
    from fastmcp import Client

    async def listing() -> dict[str, dict[str, Any]]:
        server = FastMCP("definitions")
        register(server, TOOLS)
        async with Client(server, mode="legacy") as client:  # 2025-11-25, whose listing has `execution`
            tools = await client.list_tools()
        dumped = (t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools)
        return {t["name"]: {k: v for k, v in t.items() if k != "_meta"} for t in dumped}  # _meta: FastMCP's own tags

    return asyncio.run(listing())


if __name__ == "__main__":  # python -m retriever.mcp.tools: write definitions.PATH
    PATH.write_text(json.dumps(listed(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {PATH}", file=sys.stderr)


__all__ = ["RetrieverMCP", "listed", "register", "result", "tool_annotations"]
