"""What the three framework retrievers share: the search options, the hits they turn into their own
types, and the three places a search runs: this library in process (`Library`), a running
`retriever deploy` service (`Service`, over HTTP with its bearer token) or a running MCP server's
agent `search` tool (`McpServer` in over_mcp.py, over streamable HTTP with its bearer token, one MCP session kept
open across calls).

A search here is the MCP agent's `search` (api/agent.py): the same request models and searches
(api/models.py SEARCH_REQUESTS, api/hits.py hits), mode hybrid and scores scaled to 0..1 by
default, and a file's chunk cites its place in `source` as the agent's hit does. Scores are the
engine's, unrounded (the service's to 6 decimals, the MCP agent's to 4, as they send them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from ..api.agent import BOOKKEEPING, CITATION
from ..api.models import SEARCH_REQUESTS, argument_problems
from ..api.resources import uri
from ..errors import InvalidInputError, RemoteError
from ..retry import Retryable, RetryPolicy, retried_status
from ..search.kinds import DEFAULT_MODE
from ..security.redaction import detail

if TYPE_CHECKING:
    import httpx

    from ..engine.retriever import Retriever
    from ..types import Hit

log = logging.getLogger("retriever.integrations")


@dataclass(frozen=True, slots=True)
class Found:
    """One hit as the frameworks get it: `source` is a file chunk's citation (else None)."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] | None = None

    def meta(self) -> dict[str, Any]:
        """The metadata a framework's document carries: the hit's, and `source` where it cites a file."""
        return self.metadata if self.source is None else {**self.metadata, "source": self.source}


def found(doc_id: str, text: str, score: float, metadata: dict[str, Any], collection: str | None) -> Found:
    """A hit split as the agent's (api/agent.py `_hit`): a file's chunk (it has `path` and
    `source_id`) cites document, path, page, heading... in `source`, with the document's MCP
    resource URI where the served collection was searched; sync's bookkeeping is left out."""
    if "path" not in metadata or "source_id" not in metadata:
        return Found(doc_id, text, score, dict(metadata))
    source = {"document": metadata["source_id"], **{k: metadata[k] for k in CITATION if k in metadata}}
    if collection is None:
        source["uri"] = uri(str(metadata["source_id"]))
    rest = {k: v for k, v in metadata.items() if k not in CITATION and k not in BOOKKEEPING}
    return Found(doc_id, text, score, rest, source)


@dataclass(frozen=True)
class SearchOptions:
    """A search's options, the agent's names (filters in our language: filters.py). None: the
    YAML's value (the service's for `from_url`)."""

    mode: str = DEFAULT_MODE  # a kind of search/kinds.py: hybrid, dense, bm25 or sparse
    top_k: int | None = None
    filters: dict[str, Any] | None = None
    score_threshold: float | None = None
    scale_score: bool = True  # 0..1, higher is better, as the agent's scores
    collection: str | None = None
    query_instruction: str | None = None
    fusion: str | None = None  # hybrid only: rrf or weighted, with vector_weight, rrf_k, candidate_depth
    vector_weight: float | None = None
    rrf_k: float | None = None
    candidate_depth: int | None = None

    @classmethod
    def of(cls, where: str, **given: Any) -> SearchOptions:
        """Options by name; an unknown name is an error that lists the known ones."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise InvalidInputError(f"{where}: unknown search option(s) {', '.join(unknown)}; the options are "
                                    f"{', '.join(names)}")
        return cls(**given)

    def changed(self, **changes: Any) -> SearchOptions:
        """These options with `changes` (a None leaves an option as it is)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def request(self, queries: list[str]) -> dict[str, Any]:
        """The search request's fields (api/models.py, the deploy service's /search): the options
        set, under the request's names."""
        out = {k: v for k, v in asdict(self).items() if v is not None and k not in ("mode", "collection")}
        out["query_list"] = queries
        if self.collection is not None:
            out["collection_name"] = self.collection
        return out


class Searcher(Protocol):
    """Where a search runs: per query, its hits best first."""

    def search(self, queries: list[str], options: SearchOptions) -> list[list[Found]]: ...

    async def asearch(self, queries: list[str], options: SearchOptions) -> list[list[Found]]: ...


class Library:
    """This library in process: the agent's search of `engine` (its collection opened on first use)."""

    def __init__(self, engine: Retriever, parameter_file: Path | None = None) -> None:
        self.engine = engine
        self.parameter_file = parameter_file  # what a Haystack pipeline's YAML records, if known

    @classmethod
    def from_yaml(cls, path: str | Path) -> Library:
        from ..engine.retriever import Retriever

        return cls(Retriever.from_yaml(path), Path(path))

    def search(self, queries: list[str], options: SearchOptions) -> list[list[Found]]:
        from ..api.calls import filter_warnings, opened
        from ..api.hits import hits as kind_hits

        if options.mode not in SEARCH_REQUESTS:
            raise InvalidInputError(f"unknown mode {options.mode!r}; the modes are {', '.join(SEARCH_REQUESTS)}")
        try:
            request = SEARCH_REQUESTS[options.mode](**options.request(queries), return_metadata=True)
        except ValidationError as e:
            raise InvalidInputError(f"search options of mode {options.mode!r}: {argument_problems(e)}") from None
        opened(self.engine)
        hits: list[list[Hit]] = kind_hits(self.engine, request)
        for warning in filter_warnings(self.engine, options.collection, options.filters):
            log.warning("%s", warning)
        return [[found(h.id, h.text, h.score, h.metadata, options.collection) for h in row] for row in hits]

    async def asearch(self, queries: list[str], options: SearchOptions) -> list[list[Found]]:
        return await asyncio.to_thread(self.search, queries, options)  # the engine's calls block


class Service:
    """A running `retriever deploy` service: `POST <url>/search` with the bearer token, retried by
    the house's policy (retry.py); the token never appears in a log, an error or a repr."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0, max_retries: int = 3) -> None:
        from ..search.deployed import search_url

        self.url = search_url(url)
        self._token = token
        self.timeout = timeout
        self.policy = RetryPolicy(max_retries, base_delay=0.5, max_delay=10.0)

    def __repr__(self) -> str:
        return f"Service({self.url!r}, token={'***' if self._token else None})"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def _body(self, queries: list[str], options: SearchOptions, offset: int) -> dict[str, Any]:
        return {**options.request(queries), "mode": options.mode, "return_metadata": True, "max_chars": 0,
                "offset": offset}

    def search(self, queries: list[str], options: SearchOptions) -> list[list[Found]]:
        import httpx

        pages: list[dict[str, Any]] = []
        with httpx.Client(timeout=self.timeout, headers=self._headers()) as client:
            offset: int | None = 0
            while offset is not None:
                try:
                    response = self.policy.retrying(self._note)(self._post, client, self._body(queries, options, offset))
                except Retryable as e:
                    raise self._gave_up(e) from None
                pages.append(self._checked(response))
                offset = next_offset(pages, _ids)
        return _hits(pages, options.collection)

    async def asearch(self, queries: list[str], options: SearchOptions) -> list[list[Found]]:
        import httpx

        pages: list[dict[str, Any]] = []
        async with httpx.AsyncClient(timeout=self.timeout, headers=self._headers()) as client:
            offset: int | None = 0
            while offset is not None:
                try:
                    response: httpx.Response = await self.policy.async_retrying(self._note)(
                        self._apost, client, self._body(queries, options, offset))
                except Retryable as e:
                    raise self._gave_up(e) from None
                pages.append(self._checked(response))
                offset = next_offset(pages, _ids)
        return _hits(pages, options.collection)

    def _gave_up(self, e: Retryable) -> RemoteError:
        hint = "; is `retriever deploy` running there?" if str(e).startswith("cannot reach") else ""
        return RemoteError(f"{self.url}: {e} (after {self.policy.max_retries} retries){hint}")

    def _note(self, retry: int, wait: float, e: Retryable) -> None:
        log.warning("%s: %s; retry %d/%d in %.2f s", self.url, e, retry, self.policy.max_retries, wait)

    def _post(self, client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
        import httpx

        try:
            return self._status(client.post(self.url, json=body))
        except httpx.TransportError as e:
            raise Retryable(f"cannot reach it ({type(e).__name__}: {detail(str(e), [self._token])})") from None

    async def _apost(self, client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
        import httpx

        try:
            return self._status(await client.post(self.url, json=body))
        except httpx.TransportError as e:
            raise Retryable(f"cannot reach it ({type(e).__name__}: {detail(str(e), [self._token])})") from None

    def _status(self, response: httpx.Response) -> httpx.Response:
        if response.status_code == 200:
            return response
        failure = f"answered {response.status_code}: {detail(response.text, [self._token])}"
        if retried_status(response.status_code):
            raise Retryable(failure, response.headers.get("retry-after"))
        hint = " (give the service's token: from_url(url, token=...))" if response.status_code == 401 else ""
        raise RemoteError(f"{self.url} {failure}{hint}")

    def _checked(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "ret_ids" not in body or "ret_psg" not in body:
            raise RemoteError(f"{self.url} answered 200 without ret_ids and ret_psg: is it a `retriever deploy` "
                              f"service? {detail(response.text, [self._token])}")
        for warning in body.get("warnings", []):
            log.warning("%s: %s", self.url, warning)
        if (body.get("truncated") or {}).get("hits_cut"):
            raise RemoteError(f"{self.url}: a hit is larger than the service's reply budget (deploy: reply.max_bytes); "
                              "ask for fewer hits (top_k) or raise the service's budget")
        return body


def wanted_rows(pages: list[dict[str, Any]]) -> list[int] | None:
    """Per query, the hits the search found, where the service's reply budget left some out of the
    first page (api/replies.py `truncated`); None where the first page holds them all."""
    note = pages[0].get("truncated") or {}
    return note.get("hits_found") if "next_offset" in note else None


def _ids(page: dict[str, Any]) -> list[list[Any]]:
    """A deploy service's page: per query, its hits' ids."""
    return list(page["ret_ids"])


def next_offset(pages: list[dict[str, Any]], rows: Callable[[dict[str, Any]], list[list[Any]]]) -> int | None:
    """Where the next page starts (a page holds `top_k` hits from its offset on, within the budget),
    or None when every query has the hits its first page said were found (`rows`: a page's hits,
    per query)."""
    wanted = wanted_rows(pages)
    if wanted is None:
        return None
    have = [sum(len(rows(page)[q]) for page in pages) for q in range(len(wanted))]
    if all(h >= w for h, w in zip(have, wanted)):
        return None
    return (pages[-1].get("truncated") or {}).get("next_offset")


def _hits(pages: list[dict[str, Any]], collection: str | None) -> list[list[Found]]:
    """The pages of a reply joined, one list per query (as many hits as the first page said were found)."""
    out: list[list[Found]] = [[] for _ in pages[0]["ret_ids"]]
    for page in pages:
        metas = page.get("ret_meta") or [[{} for _ in row] for row in page["ret_ids"]]
        for row, ids, texts, scores, meta in zip(out, page["ret_ids"], page["ret_psg"], page["ret_scores"], metas):
            row.extend(found(i, t, s, m or {}, collection) for i, t, s, m in zip(ids, texts, scores, meta))
    wanted = wanted_rows(pages)
    return out if wanted is None else [row[:n] for row, n in zip(out, wanted)]


def one(searcher: Searcher, query: str, options: SearchOptions) -> list[Found]:
    return searcher.search([query], options)[0]


async def aone(searcher: Searcher, query: str, options: SearchOptions) -> list[Found]:
    return (await searcher.asearch([query], options))[0]
