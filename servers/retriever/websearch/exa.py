"""Exa through exa-py's AsyncExa: POST /search with page text as contents."""

from __future__ import annotations

import re
from typing import Any

from ..config import ExaConfig
from ..errors import MissingDependencyError
from .base import QueryError, TransientError, WebHit, status_error

EXA_URL = "https://api.exa.ai"
_STATUS = re.compile(r"status code (\d{3})")  # exa-py raises ValueError("Request failed with status code N: body")


class ExaSearcher:
    provider = "exa"

    def __init__(self, cfg: ExaConfig, api_key: str) -> None:
        try:
            from exa_py import AsyncExa
        except ImportError as e:
            raise MissingDependencyError("exa_py", "mcp-retriever[web]") from e
        self.cfg = cfg
        self.client = AsyncExa(api_key=api_key, api_base=cfg.base_url or EXA_URL, timeout=cfg.timeout)

    async def search(self, query: str, top_k: int) -> list[WebHit]:
        import httpx

        options: dict[str, Any] = {"type": self.cfg.search_type}
        if self.cfg.category:
            options["category"] = self.cfg.category
        options |= self.cfg.search_kwargs
        try:
            response = await self.client.search(
                query, num_results=top_k, contents={"text": {"max_characters": self.cfg.max_characters}}, **options)
        except httpx.TimeoutException as e:  # exa-py's ExaTimeoutError is one
            raise TransientError(f"timed out after {self.cfg.timeout:g} s") from e
        except httpx.TransportError as e:
            raise TransientError(f"connection failed: {type(e).__name__}") from e
        except ValueError as e:
            raise _from_value_error(e) from e
        except (KeyError, TypeError, AttributeError) as e:
            raise QueryError(f"malformed response: {type(e).__name__}: {e}") from e
        return [hit for r in response.results if (hit := _hit(r)) is not None]

    async def aclose(self) -> None:
        await self.client.aclose()


def _from_value_error(e: ValueError) -> Exception:
    message = str(e)
    m = _STATUS.search(message)
    if m:
        return status_error("exa", int(m.group(1)), message.split(":", 1)[-1])
    prefix = "malformed response: " if "JSON" in message else ""  # exa-py's words for a body it cannot decode
    return QueryError(prefix + message)  # cut after redaction, in the runner


def _hit(r: Any) -> WebHit | None:
    """A result with page text (or, failing that, highlights); None for one without any."""
    text = r.text or " ".join(r.highlights or [])
    if not text:
        return None
    return WebHit(text=text, url=r.url, title=r.title, score=r.score)
