"""What every web search provider shares: the Protocol, the hit and result values, the errors a
provider raises, and the runner (bounded concurrency, retries by the house's policy: retry.py).

A provider turns one query into hits or raises one of three errors:
- `TransientError` (timeout, 408, 409, 429, 5xx, connection lost): retried with backoff;
- `QueryError` (any other refusal, a malformed response): that query fails, not retried;
- `WebsearchAuthError` (missing or rejected key): the whole call fails.
A query that still fails after its retries gets an empty hit list and an error that says why;
the other queries keep their results.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import LimitError, RetrieverError
from ..retry import Retryable, RetryPolicy, retried_status
from ..security.limits import Budget
from ..security.redaction import detail

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebHit:
    text: str
    url: str | None = None
    title: str | None = None
    score: float | None = None  # the provider's score, where it gives one


@dataclass(frozen=True)
class QueryResult:
    hits: tuple[WebHit, ...] = ()
    error: str | None = None  # why this query has no hits; None when it succeeded


class WebsearchAuthError(RetrieverError):
    """The API key is missing or the provider rejected it: no query can succeed."""


class TransientError(Retryable):
    """A failure worth retrying: timeout, 408, 409, 429, 5xx, a dropped connection."""


class QueryError(Exception):
    """A failure of this query that a retry would not fix: a refusal, a malformed response."""


class WebSearcher(Protocol):
    """One provider's client, open for one tool call."""

    provider: str

    async def search(self, query: str, top_k: int) -> list[WebHit]:
        """At most `top_k` hits, best first; raises the errors of the module doc."""
        ...

    async def aclose(self) -> None: ...


def redact(text: str, secret: str | None) -> str:
    """`text` with the secret replaced, then cut: anything a provider's message might echo."""
    return detail(text, [secret])


async def search_one(searcher: WebSearcher, index: int, query: str, top_k: int, policy: RetryPolicy,
                     slots: asyncio.Semaphore, secret: str | None = None,
                     budget: Budget | None = None) -> QueryResult:
    """One query with retries. A slot is held only while a request is in flight, not while
    backing off, so a query waiting to retry does not hold back the others. Each request takes
    one from the call's `budget` (limits.max_provider_requests); none left: the query fails."""
    async def attempt() -> list[WebHit]:
        if budget is not None:
            budget.take()
        async with slots:
            return await searcher.search(query, top_k)

    def note(retry: int, wait: float, e: Retryable) -> None:
        log.warning("%s: query %d: %s; retry %d/%d in %.2f s", searcher.provider, index, redact(str(e), secret),
                    retry, policy.max_retries, wait)

    try:
        hits: list[WebHit] = await policy.async_retrying(note)(attempt)
        return QueryResult(tuple(hits[:top_k]))
    except TransientError as e:  # still failing after every retry
        reason, attempts = redact(str(e), secret), policy.max_retries + 1
        log.warning("%s: query %d failed after %d attempts: %s", searcher.provider, index, attempts, reason)
        return QueryResult(error=f"{searcher.provider}: {reason} (gave up after {attempts} attempts)")
    except (QueryError, LimitError) as e:
        return _failed(searcher.provider, index, redact(str(e), secret))
    except WebsearchAuthError:
        raise
    except Exception as e:  # a bug or a library surprise: visible in the result, not swallowed
        return _failed(searcher.provider, index, redact(f"unexpected {type(e).__name__}: {e}", secret))


def _failed(provider: str, index: int, reason: str) -> QueryResult:
    log.warning("%s: query %d failed: %s", provider, index, reason)
    return QueryResult(error=f"{provider}: {reason}")


async def run_queries(searcher: WebSearcher, queries: Sequence[str], top_k: int, concurrency: int,
                      policy: RetryPolicy, secret: str | None = None,
                      budget: Budget | None = None) -> list[QueryResult]:
    """Every query concurrently, at most `concurrency` requests in flight; results in query order.
    A `WebsearchAuthError` from any query cancels the rest and is raised."""
    slots = asyncio.Semaphore(concurrency)
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(search_one(searcher, i, q, top_k, policy, slots, secret, budget))
                     for i, q in enumerate(queries)]
    except* WebsearchAuthError as eg:
        raise eg.exceptions[0] from None
    return [t.result() for t in tasks]


ENV_VARS = {"exa": "EXA_API_KEY", "tavily": "TAVILY_API_KEY", "zhipuai": "ZHIPUAI_API_KEY"}


def key_hint(provider: str) -> str:
    return f"set the environment variable {ENV_VARS[provider]} (or websearch_backend_configs.{provider}.api_key)"


def resolve_key(provider: str, configured: str | None, env: dict[str, str]) -> str:
    """The key from parameter.yaml, else from the provider's environment variable."""
    key = configured or env.get(ENV_VARS[provider], "")
    if not key.strip():
        raise WebsearchAuthError(f"{provider}: no API key; {key_hint(provider)}")
    return key.strip()


def status_error(provider: str, status: int, detail: str, retry_after: str | None = None) -> Exception:
    """The error for an HTTP status: 401/403 fail the call, those retry.py retries are retried (after
    the server's `retry_after`, where the client library lets it be seen), the rest fail the query."""
    detail = " ".join(str(detail).split())  # cut only after redaction (search_one), never here
    if status in (401, 403):
        return WebsearchAuthError(f"{provider} rejected the API key (HTTP {status}); {key_hint(provider)} "
                                  f"to a valid key")
    if retried_status(status):
        return TransientError(f"HTTP {status}" + (f": {detail}" if detail else ""), retry_after)
    return QueryError(f"HTTP {status}" + (f": {detail}" if detail else ""))
