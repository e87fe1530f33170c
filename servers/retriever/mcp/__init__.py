"""The MCP face: the registry's tools of one profile (api/registry.py), one error middleware that
also hides the tools the loaded configuration cannot serve, and instructions that match the
server's state. No retrieval logic lives here."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from fastmcp import FastMCP

from ..api.registry import Tool, selected
from .middleware import ToolErrors
from .tools import register

if TYPE_CHECKING:
    from ..engine import Retriever

FILTERS = ("Filters: {'field': 'meta.<key>' or 'id', 'operator': '==', '!=', '>', '>=', '<', '<=', 'in' or 'not in', "
           "'value': ...} or {'operator': 'AND'|'OR'|'NOT', 'conditions': [...]}; a filter that cannot match (a field "
           "no document has, a value of another type) comes back with a warning. ")
BUDGET = ("Large replies are cut to a budget: the reply's `truncated` says what was left out and the offset to page "
          "on.")


def server_version() -> str:
    try:
        return version("mcp-retriever")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "0+unknown"


def instructions(engine: Retriever, tools: Iterable[Tool]) -> str:
    """What the tools are for, as this server is now: its profile's tools and whether a collection
    is open."""
    names = {t.name for t in tools}
    if "search" in names:
        text = ("Search a document collection. `search` finds passages (mode hybrid by default, the best; dense for "
                "meaning, bm25 for exact words); `get_document` reads a hit in full and the chunks around it")
        writes = [n for n in ("add_documents", "ingest_document", "delete_documents") if n in names]
        if writes:
            text += f"; {', '.join(writes)} change the collection"
        if "list_collections" in names:
            text += "; list_collections names the collections `search` can take"
        if "web_search" in names:
            text += "; web_search searches the web"
        return f"{text}. The server opens its collection on the first call. {FILTERS}{BUDGET}"
    start = ("A collection is open; retriever_init opens another. " if engine.session is not None
             else "Call retriever_init first (it opens the collection parameter.yaml names). ")
    return (f"Dense, BM25 and hybrid search over a local corpus, UltraRAG's retriever tools and more. {start}"
            "retriever_hybrid_search is the best ranking; retriever_search is dense only, bm25_search BM25 only. "
            f"Search tools take `filters`. {FILTERS}{BUDGET}")


def build_server(engine: Retriever, read_only: bool | None = None, ultrarag: bool = False,
                 profile: str | None = None, include: Iterable[str] | None = None,
                 exclude: Iterable[str] | None = None) -> FastMCP:
    """The MCP server over `engine` with the tools of `profile` (default: tools.profile in the YAML;
    `ultrarag` implies the ultrarag profile), plus `include`, less `exclude`. `read_only`
    (default: security.read_only in the YAML) leaves out every tool that writes."""
    cfg = engine.base_config
    read_only = cfg.security.read_only if read_only is None else read_only
    profile = profile or ("ultrarag" if ultrarag else cfg.tools.profile)
    tools = selected(profile, cfg.tools.include if include is None else include,
                     cfg.tools.exclude if exclude is None else exclude, read_only)
    server = FastMCP("retriever", version=server_version(), middleware=[ToolErrors(engine, tools)],
                     instructions=instructions(engine, tools))
    register(server, engine, tools)
    return server


__all__ = ["build_server", "server_version"]
