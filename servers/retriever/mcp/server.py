"""The FastMCP server (streamable HTTP, and in-memory clients): the registry's tools of one
profile, the gate's middleware (core.py), the HTTP app's scope challenge, and instructions that match
the server's state."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .. import package_version
from ..api import resources
from ..api.registry import instructions
from ..api.tool import Tool
from .core import Gate, served_tools
from .middleware import ScopeChallenge, ToolErrors, serve_tasks
from .tools import RetrieverMCP, register

if TYPE_CHECKING:
    from ..engine.retriever import Retriever


class _OneLine(logging.Filter):
    """FastMCP logs every failed call itself (a traceback for each, a client's mistake included);
    the gate logs each once, as one line, with the traceback for our own bugs only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Error calling tool", "Invalid arguments for tool"))


class RetrieverServer(RetrieverMCP):
    """The server build_server makes: its HTTP app (`serve --transport http` runs it, `deploy --mcp` mounts
    it) answers a tools/call outside the caller's scopes with 403 and the scope challenge, before FastMCP
    (middleware.ScopeChallenge, inside any middleware the caller passes: the HTTP guard that sets the caller)."""

    gate: Gate

    def http_app(self, *args: Any, **kwargs: Any) -> Any:
        from starlette.middleware import Middleware

        kwargs["middleware"] = [*(kwargs.get("middleware") or []), Middleware(ScopeChallenge, gate=self.gate)]
        return super().http_app(*args, **kwargs)


def build_server(engine: Retriever, read_only: bool | None = None, ultrarag: bool = False,
                 profile: str | None = None, include: Iterable[str] | None = None,
                 exclude: Iterable[str] | None = None, tools: Sequence[Tool] | None = None) -> RetrieverServer:
    """The MCP server over `engine` with the tools core.served_tools picks for these arguments
    (`tools`: picked already)."""
    if tools is None:
        tools = served_tools(engine, read_only, ultrarag, profile, include, exclude)
    fastmcp_log = logging.getLogger("fastmcp.server.server")
    if not any(isinstance(f, _OneLine) for f in fastmcp_log.filters):
        fastmcp_log.addFilter(_OneLine())
    errors = ToolErrors(engine, tools)
    server = RetrieverServer("retriever", version=package_version(), middleware=[errors],
                             instructions=instructions(engine, tools))
    server.engine = engine
    server.gate = errors.gate
    serve_tasks(server, errors)
    register(server, tools)
    if resources.served(t.name for t in tools):  # documents by URI (api/resources.py)
        add_documents_template(server, engine)
    return server


def add_documents_template(server: RetrieverMCP, engine: Retriever) -> None:
    """retriever://documents/<id>: read (and listed, middleware.py) only for a caller with the read scope
    and a read grant on the session's collection (resources.refusal), as the read tools are."""
    from fastmcp.exceptions import ResourceError

    from ..errors import ForbiddenError

    template = resources.TEMPLATE

    # the function outlived its server (an engine it closed over stayed alive after the server was
    # dropped and collected: the fast tier peaked at 4.4 GB); a weak reference frees the engine with it
    held = weakref.ref(engine)

    @server.resource(template["uriTemplate"], name=template["name"], description=template["description"],
                     mime_type=template["mimeType"])
    def document(id: str) -> str:  # noqa: A002 - the template's variable
        engine = held()
        if engine is None:
            raise ResourceError("the server has shut down")
        try:
            out = resources.read(engine, id)
        except ForbiddenError as e:
            raise ResourceError(str(e)) from None
        if out is None:
            raise ResourceError(f"no document {id!r} in the served collection")
        return str(out["text"])


__all__ = ["RetrieverServer", "build_server"]
