"""The MCP layer: the tool table (table.py) over the api, one error middleware, and the web
tools as a server of their own, mounted. No retrieval logic lives here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastmcp import FastMCP

from .middleware import ToolErrors
from .table import register, register_build
from .web import build_web_server

if TYPE_CHECKING:
    from ..engine import Retriever

INSTRUCTIONS = (
    "Dense, BM25 and hybrid search over a local corpus. Call retriever_init first. Search tools take `filters`: "
    "{'field': 'meta.<key>' or 'id', 'operator': '==', '!=', '>', '>=', '<', '<=', 'in' or 'not in', 'value': ...} "
    "or {'operator': 'AND'|'OR'|'NOT', 'conditions': [...]}. Large replies are cut to a budget: the reply's "
    "`truncated` says what was left out and the `offset` to page on.")


def build_server(engine: Retriever, read_only: bool | None = None, ultrarag: bool = False) -> FastMCP:
    """The MCP server over `engine`. `read_only` (default: security.read_only in the YAML) leaves
    out the tools that write (embed, index, bm25_index, add, delete); `ultrarag` adds UltraRAG's
    `build` tool (pipeline/ultrarag.py)."""
    read_only = engine.base_config.security.read_only if read_only is None else read_only
    server = FastMCP("retriever", middleware=[ToolErrors(engine)], instructions=INSTRUCTIONS)
    register(server, engine, read_only)
    server.mount(build_web_server(engine))
    if ultrarag:
        register_build(server, engine)
    return server


__all__ = ["build_server"]
