"""Web search over Exa, Tavily and ZhipuAI: `build_websearch(cfg, provider)` and `web_search(...)`.

Provider modules import their client libraries lazily (`pip install 'mcp-retriever[web]'`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..config import Config, WebProvider
from ..errors import ConfigError
from ..security.limits import Budget, check_count, check_limits
from .base import (
    ENV_VARS,
    QueryResult,
    RetryPolicy,
    WebHit,
    WebsearchAuthError,
    WebSearcher,
    resolve_key,
    run_queries,
)

PROVIDERS: tuple[str, ...] = tuple(ENV_VARS)

__all__ = ["PROVIDERS", "QueryResult", "RetryPolicy", "WebHit", "WebSearcher", "WebsearchAuthError",
           "build_websearch", "web_search"]


def check_provider(provider: str | None) -> WebProvider:
    if provider not in PROVIDERS:
        raise ConfigError(f"websearch_backend must be one of {', '.join(PROVIDERS)}, got {provider!r}; "
                          "pass websearch_backend or set it in parameter.yaml")
    return provider  # type: ignore[return-value]


def build_websearch(cfg: Config, provider: str, env: Mapping[str, str] | None = None) -> tuple[WebSearcher, str]:
    """The provider's client, open, and the key it uses (for redaction). Fails on a missing key."""
    name = check_provider(provider)
    pcfg = getattr(cfg.websearch_backend_configs, name)
    configured = pcfg.api_key.get_secret_value() if pcfg.api_key else None
    if pcfg.url_from_call and not (configured or "").strip():  # guard.py: never the operator's key
        raise WebsearchAuthError(f"{name}: base_url comes from this tool call, so it is sent only an api_key from "
                                 f"the same call, never the operator's; pass websearch_backend_configs.{name}.api_key")
    key = resolve_key(name, configured, {} if pcfg.url_from_call else dict(os.environ if env is None else env))
    match name:
        case "exa":
            from .exa import ExaSearcher

            return ExaSearcher(pcfg, key), key
        case "tavily":
            from .tavily import TavilySearcher

            return TavilySearcher(pcfg, key), key
        case "zhipuai":
            from .zhipuai import ZhipuAISearcher

            return ZhipuAISearcher(pcfg, key), key


async def web_search(cfg: Config, provider: str, queries: Sequence[str], top_k: int,
                     concurrency: int) -> list[QueryResult]:
    """Every query through `provider`, at most `concurrency` in flight; one result per query, in order.
    Within limits: queries (max_queries, max_results) and requests, retries included
    (max_provider_requests), refused before any is sent."""
    check_limits(cfg.limits, len(queries), top_k)
    limit = cfg.limits.max_provider_requests
    check_count("web search requests in one call (one per query)", len(queries), "max_provider_requests", limit,
                "split the call")
    searcher, key = build_websearch(cfg, provider)
    pcfg = getattr(cfg.websearch_backend_configs, searcher.provider)
    try:
        return await run_queries(searcher, queries, top_k, concurrency,
                                 RetryPolicy(pcfg.max_retries, pcfg.base_delay), secret=key,
                                 budget=Budget(f"{searcher.provider} web search", "max_provider_requests", limit))
    finally:
        await searcher.aclose()
