"""The web search tools of the MCP layer: thin async tools over `retriever.websearch`.

They need no `retriever_init`: each call reads the engine's current config (parameter.yaml, or
what `retriever_init` last set). Replies: `ret_psg`, `ret_urls`, `ret_titles`, `ret_scores` (null
where the provider gives none), one list per query, best first, and `errors`: per query null, or
why it failed (its lists are then empty). A missing or rejected key fails the whole call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from mcp.types import ToolAnnotations

from .engine import Retriever
from .errors import InvalidInputError
from .params import BatchQueries, Queries, ThreadNum, TopK, WebBackend
from .replies import reply
from .results import as_queries, check_top_k, pick
from .websearch import QueryResult, check_provider, web_search

log = logging.getLogger(__name__)


def format_web(results: Sequence[QueryResult]) -> dict[str, Any]:
    return {
        "ret_psg": [[h.text for h in r.hits] for r in results],
        "ret_urls": [[h.url for h in r.hits] for r in results],
        "ret_titles": [[h.title for h in r.hits] for r in results],
        "ret_scores": [[h.score for h in r.hits] for r in results],
        "errors": [r.error for r in results],
    }


def _threads(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"retrieve_thread_num must be an integer >= 1, got {value!r}")
    return value


WEB = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)


def build_web_server(engine: Retriever) -> FastMCP:
    """The web search tools, a server of their own (mounted by server.py). Errors become tool
    errors in the parent's middleware."""
    mcp = FastMCP("retriever-web")

    async def run(provider: str | None, queries: list[str], top_k: int | None,
                  threads: int | None) -> list[QueryResult]:
        cfg = engine.config
        name = check_provider(pick(provider, cfg.websearch_backend))
        return await web_search(cfg, name, queries, check_top_k(pick(top_k, cfg.top_k)),
                                _threads(pick(threads, cfg.retrieve_thread_num)))

    def provider_tool(provider: str) -> None:
        async def tool(query_list: Queries, top_k: TopK = None, retrieve_thread_num: ThreadNum = None) -> ToolResult:
            return reply(format_web(await run(provider, as_queries(query_list), top_k, retrieve_thread_num)))

        tool.__name__ = f"retriever_{provider}_search"
        tool.__doc__ = (f"Web search through {provider}, at most retrieve_thread_num queries at a time. Returns "
                        "ret_psg, ret_urls, ret_titles, ret_scores (one list per query) and errors (per query "
                        "null or why it failed).")
        mcp.tool(output_schema=None, annotations=WEB, title=f"Web search ({provider})")(tool)

    for provider in ("exa", "tavily", "zhipuai"):
        provider_tool(provider)

    @mcp.tool(output_schema=None, annotations=WEB, title="Web search")
    async def retriever_websearch(query_list: Queries, top_k: TopK = None, websearch_backend: WebBackend = None,
                                  retrieve_thread_num: ThreadNum = None) -> ToolResult:
        """Web search through websearch_backend (default: parameter.yaml's). Returns ret_psg, ret_urls,
        ret_titles, ret_scores and errors (per query null or why it failed)."""
        return reply(format_web(await run(websearch_backend, as_queries(query_list), top_k, retrieve_thread_num)))

    @mcp.tool(output_schema=None, annotations=WEB, title="Web search, grouped")
    async def retriever_websearch_batch(batch_query_list: BatchQueries, top_k: TopK = None,
                                        websearch_backend: WebBackend = None,
                                        retrieve_thread_num: ThreadNum = None) -> ToolResult:
        """Web search for groups of queries, all in one concurrent pool. Returns ret_psg_ls, ret_urls_ls,
        ret_titles_ls, ret_scores_ls and errors_ls."""
        groups = _groups(batch_query_list)
        flat = await run(websearch_backend, [q for g in groups for q in g], top_k, retrieve_thread_num)
        per_group, start = [], 0
        for g in groups:
            per_group.append(format_web(flat[start : start + len(g)]))
            start += len(g)
        return reply({f"{k}_ls": [g[k] for g in per_group] for k in format_web([])})

    return mcp


def _groups(batch: Any) -> list[list[str]]:
    if isinstance(batch, str) or not isinstance(batch, Sequence) or not batch:
        raise InvalidInputError("batch_query_list must be a non-empty list of query lists")
    return [as_queries(g, "batch_query_list item") for g in batch]
