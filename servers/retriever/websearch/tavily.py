"""Tavily through tavily-python's AsyncTavilyClient: POST /search."""

from __future__ import annotations

from typing import Any

from ..config import TavilyConfig
from ..errors import MissingDependencyError
from .base import QueryError, TransientError, WebHit, WebsearchAuthError, key_hint, status_error

TAVILY_URL = "https://api.tavily.com"


class TavilySearcher:
    provider = "tavily"

    def __init__(self, cfg: TavilyConfig, api_key: str) -> None:
        try:
            from tavily import AsyncTavilyClient
        except ImportError as e:
            raise MissingDependencyError("tavily", "mcp-retriever[web]") from e
        self.cfg = cfg
        self.client = AsyncTavilyClient(api_key=api_key, api_base_url=cfg.base_url or TAVILY_URL)

    async def search(self, query: str, top_k: int) -> list[WebHit]:
        import httpx
        from tavily import errors

        try:
            response = await self.client.search(
                query, max_results=top_k, search_depth=self.cfg.search_depth, topic=self.cfg.topic,
                include_raw_content=self.cfg.include_raw_content or None, timeout=self.cfg.timeout,
                **self.cfg.search_kwargs)
        except errors.TimeoutError as e:
            raise TransientError(f"timed out after {self.cfg.timeout:g} s") from e
        except errors.UsageLimitExceededError as e:
            raise status_error("tavily", 429, str(e)) from e
        except errors.InvalidAPIKeyError as e:
            raise status_error("tavily", 401, "") from e
        except errors.ForbiddenError as e:  # 403, or 432/433: the plan's limit
            raise WebsearchAuthError(f"tavily refused the request (HTTP 403, 432 or 433: a rejected key or an "
                                     f"exhausted plan); {key_hint('tavily')} to a valid key with credit") from e
        except errors.BadRequestError as e:
            raise QueryError(f"HTTP 400: {e}") from e
        except httpx.HTTPStatusError as e:
            raise status_error("tavily", e.response.status_code, e.response.text,
                               e.response.headers.get("retry-after")) from e
        except httpx.TransportError as e:
            raise TransientError(f"connection failed: {type(e).__name__}") from e
        except (ValueError, AttributeError) as e:  # a 200 whose body is not JSON or not an object
            raise QueryError(f"malformed response: {type(e).__name__}") from e
        return self._hits(response.get("results"))

    def _hits(self, results: Any) -> list[WebHit]:
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            raise QueryError("malformed response: 'results' is not a list of objects")
        hits = []
        for r in results:
            text = (self.cfg.include_raw_content and r.get("raw_content")) or r.get("content")
            if text:
                hits.append(WebHit(text=str(text), url=r.get("url"), title=r.get("title"), score=_float(r.get("score"))))
        return hits

    async def aclose(self) -> None:
        await self.client.close()


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
