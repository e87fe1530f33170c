"""ZhipuAI's web search API over httpx: POST {base_url}/web_search with a Bearer key.

Request: search_query, search_engine, search_intent, count, search_recency_filter, content_size.
Response: {"search_result": [{"title", "content", "link", "media", "refer", ...}], ...}; an error
is {"error": {"code", "message"}} with an HTTP status. (docs.bigmodel.cn, Web Search API)
"""

from __future__ import annotations

from typing import Any

from ..config import ZhipuAIConfig
from ..errors import MissingDependencyError
from .base import QueryError, TransientError, WebHit, status_error

ZHIPUAI_URL = "https://open.bigmodel.cn/api/paas/v4"


class ZhipuAISearcher:
    provider = "zhipuai"

    def __init__(self, cfg: ZhipuAIConfig, api_key: str) -> None:
        try:
            import httpx
        except ImportError as e:
            raise MissingDependencyError("httpx", "mcp-retriever[web]") from e
        self.cfg = cfg
        self.client = httpx.AsyncClient(
            base_url=(cfg.base_url or ZHIPUAI_URL).rstrip("/") + "/", timeout=cfg.timeout,
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})

    def body(self, query: str, top_k: int) -> dict[str, Any]:
        c = self.cfg
        return {"search_query": query, "search_engine": c.search_engine, "search_intent": c.search_intent,
                "count": top_k, "search_recency_filter": c.search_recency_filter, "content_size": c.content_size,
                **c.search_kwargs}

    async def search(self, query: str, top_k: int) -> list[WebHit]:
        import httpx

        try:
            response = await self.client.post("web_search", json=self.body(query, top_k))
        except httpx.TimeoutException as e:
            raise TransientError(f"timed out after {self.cfg.timeout:g} s") from e
        except httpx.TransportError as e:
            raise TransientError(f"connection failed: {type(e).__name__}") from e
        if response.status_code != 200:
            raise status_error("zhipuai", response.status_code, _error_message(response),
                               response.headers.get("retry-after"))
        try:
            data = response.json()
        except ValueError as e:
            raise QueryError("malformed response: the body is not JSON") from e
        return _hits(data)

    async def aclose(self) -> None:
        await self.client.aclose()


def _error_message(response: Any) -> str:
    try:
        err = response.json().get("error") or {}
        return f"{err.get('code', '')} {err.get('message', '')}".strip()
    except (ValueError, AttributeError):
        return response.text


def _hits(data: Any) -> list[WebHit]:
    results = data.get("search_result") if isinstance(data, dict) else None
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise QueryError("malformed response: 'search_result' is not a list of objects")
    return [WebHit(text=str(r["content"]), url=r.get("link"), title=r.get("title"))
            for r in results if r.get("content")]
