"""The web search tools: a FastMCP server of their own, mounted by the main one (errors become
tool errors in the parent's middleware). They need no `retriever_init`: each call reads the
engine's current config. Replies: `ret_psg`, `ret_urls`, `ret_titles`, `ret_scores` (null where
the provider gives none), one list per query, best first, and `errors`: per query null, or why
it failed (its lists are then empty). A missing or rejected key fails the whole call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastmcp import FastMCP

from ..api.models import ProviderSearchRequest, Request, WebBatchSearchRequest, WebSearchRequest
from ..guard import FROM_CLIENT, check_client_config
from ..results import as_groups, as_queries, pick, regroup
from ..websearch import PROVIDERS, QueryResult, check_provider, web_search
from .table import OPEN_WORLD, tool_function

if TYPE_CHECKING:
    from ..engine import Retriever



def format_web(results: Sequence[QueryResult]) -> dict[str, Any]:
    return {
        "ret_psg": [[h.text for h in r.hits] for r in results],
        "ret_urls": [[h.url for h in r.hits] for r in results],
        "ret_titles": [[h.title for h in r.hits] for r in results],
        "ret_scores": [[h.score for h in r.hits] for r in results],
        "errors": [r.error for r in results],
    }


def build_web_server(engine: Retriever) -> FastMCP:
    mcp = FastMCP("retriever-web")

    async def search(provider: str | None, queries: list[str], top_k: int | None,
                     threads: int | None, configs: dict[str, Any] | None = None) -> list[QueryResult]:
        cfg = engine.config
        if configs:  # UltraRAG passes its YAML's; keys and URLs of a client's own are refused (guard.py)
            FROM_CLIENT.set(True)  # this call's context only
            changed = cfg.with_overrides({"websearch_backend_configs": configs}, engine.base_dir)
            check_client_config(engine.base_config, changed, engine.base_dir, http=engine.shared)
            cfg = changed
        name = check_provider(pick(provider, cfg.websearch_backend))
        # top_k and retrieve_thread_num were checked by the request model or the YAML's
        return await web_search(cfg, name, queries, pick(top_k, cfg.top_k), pick(threads, cfg.retrieve_thread_num))

    def add(name: str, title: str, model: type[Request], doc: str, serve: Any) -> None:
        mcp.tool(tool_function(name, model, doc, serve), output_schema=None, annotations=OPEN_WORLD, title=title)

    for provider in PROVIDERS:
        async def one(r: ProviderSearchRequest, provider: str = provider) -> dict[str, Any]:
            return format_web(await search(provider, as_queries(r.query_list), r.top_k, r.retrieve_thread_num))

        add(f"retriever_{provider}_search", f"Web search ({provider})", ProviderSearchRequest,
            f"Web search through {provider}, at most retrieve_thread_num queries at a time. Returns ret_psg, "
            "ret_urls, ret_titles, ret_scores (one list per query) and errors (per query null or why it failed).", one)

    async def websearch(r: WebSearchRequest) -> dict[str, Any]:
        return format_web(await search(r.websearch_backend, as_queries(r.query_list), r.top_k, r.retrieve_thread_num,
                                       r.websearch_backend_configs))

    add("retriever_websearch", "Web search", WebSearchRequest,
        "Web search through websearch_backend (default: parameter.yaml's). Returns ret_psg, ret_urls, ret_titles, "
        "ret_scores and errors (per query null or why it failed).", websearch)

    async def batch(r: WebBatchSearchRequest) -> dict[str, Any]:
        groups = as_groups(r.batch_query_list)
        flat = await search(r.websearch_backend, [q for g in groups for q in g], r.top_k, r.retrieve_thread_num,
                            r.websearch_backend_configs)
        per_group = [format_web(g) for g in regroup(flat, [len(g) for g in groups])]
        return {f"{k}_ls": [g[k] for g in per_group] for k in format_web([])}

    for name in ("retriever_websearch_batch", "retriever_batch_websearch"):  # the second: UltraRAG's newer name
        add(name, "Web search, grouped", WebBatchSearchRequest,
            "Web search for groups of queries, all in one concurrent pool. Returns ret_psg_ls, ret_urls_ls, "
            "ret_titles_ls, ret_scores_ls and errors_ls.", batch)
    return mcp
