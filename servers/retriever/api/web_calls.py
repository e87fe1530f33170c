"""The web search calls (websearch/): they need no `retriever_init`; each reads the engine's
current config. Replies: `ret_psg`, `ret_urls`, `ret_titles`, `ret_scores` (null where the
provider gives none), one list per query, best first, and `errors`: per query null, or why it
failed (its lists are then empty). A missing or rejected key fails the whole call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..search.results import as_groups, as_queries, pick, regroup
from ..security.guard import FROM_CLIENT, check_client_config
from ..websearch import PROVIDERS, QueryResult, check_provider, web_search
from .models import ProviderSearchRequest, WebBatchSearchRequest, WebSearchRequest

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

__all__ = ["PROVIDERS", "batch", "format_web", "provider", "search", "websearch"]


def format_web(results: Sequence[QueryResult]) -> dict[str, Any]:
    return {
        "ret_psg": [[h.text for h in r.hits] for r in results],
        "ret_urls": [[h.url for h in r.hits] for r in results],
        "ret_titles": [[h.title for h in r.hits] for r in results],
        "ret_scores": [[h.score for h in r.hits] for r in results],
        "errors": [r.error for r in results],
    }


async def search(engine: Retriever, provider: str | None, queries: list[str], top_k: int | None,
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


def provider(name: str) -> Callable[[Retriever, ProviderSearchRequest], Awaitable[dict[str, Any]]]:
    async def one(engine: Retriever, r: ProviderSearchRequest) -> dict[str, Any]:
        return format_web(await search(engine, name, as_queries(r.query_list), r.top_k, r.retrieve_thread_num))

    return one


async def websearch(engine: Retriever, r: WebSearchRequest) -> dict[str, Any]:
    return format_web(await search(engine, r.websearch_backend, as_queries(r.query_list), r.top_k,
                                   r.retrieve_thread_num, r.websearch_backend_configs))


async def batch(engine: Retriever, r: WebBatchSearchRequest) -> dict[str, Any]:
    groups = as_groups(r.batch_query_list)
    flat = await search(engine, r.websearch_backend, [q for g in groups for q in g], r.top_k, r.retrieve_thread_num,
                        r.websearch_backend_configs)
    per_group = [format_web(g) for g in regroup(flat, [len(g) for g in groups])]
    return {f"{k}_ls": [g[k] for g in per_group] for k in format_web([])}
