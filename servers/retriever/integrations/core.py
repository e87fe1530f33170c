"""What the three framework retrievers share: the search options, the hits they turn into their own
types, and the three places a search runs: this library in process (`Library`), a running
`retriever deploy` service (`Service`, over HTTP with its bearer token) or a running MCP server's
agent `search` tool (`McpServer`, over streamable HTTP with its bearer token, one MCP session kept
open across calls).

A search here is the MCP agent's `search` (api/agent.py): the same request models and searches
(api/models.py SEARCH_REQUESTS, api/hits.py HITS), mode hybrid and scores scaled to 0..1 by
default, and a file's chunk cites its place in `source` as the agent's hit does. Scores are the
engine's, unrounded (the service's to 6 decimals, the MCP agent's to 4, as they send them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError

from ..api.agent import BOOKKEEPING, CITATION
from ..api.models import SEARCH_REQUESTS, argument_problems
from ..api.resources import uri
from ..errors import InvalidInputError, RemoteError
from ..retry import Retryable, RetryPolicy, retried_status
from ..security.redaction import detail

if TYPE_CHECKING:
    import httpx
    from mcp_types import CallToolResult

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

    mode: str = "hybrid"  # hybrid, dense, bm25 or sparse
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
        from ..api.hits import HITS

        if options.mode not in SEARCH_REQUESTS:
            raise InvalidInputError(f"unknown mode {options.mode!r}; the modes are {', '.join(SEARCH_REQUESTS)}")
        try:
            request = SEARCH_REQUESTS[options.mode](**options.request(queries), return_metadata=True)
        except ValidationError as e:
            raise InvalidInputError(f"search options of mode {options.mode!r}: {argument_problems(e)}") from None
        opened(self.engine)
        hits: list[list[Hit]] = HITS[type(request)](self.engine, request)
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
                offset = _next_offset(pages, _ids)
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
                offset = _next_offset(pages, _ids)
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


def _wanted(pages: list[dict[str, Any]]) -> list[int] | None:
    """Per query, the hits the search found, where the service's reply budget left some out of the
    first page (api/replies.py `truncated`); None where the first page holds them all."""
    note = pages[0].get("truncated") or {}
    return note.get("hits_found") if "next_offset" in note else None


def _ids(page: dict[str, Any]) -> list[list[Any]]:
    """A deploy service's page: per query, its hits' ids."""
    return list(page["ret_ids"])


def _next_offset(pages: list[dict[str, Any]], rows: Callable[[dict[str, Any]], list[list[Any]]]) -> int | None:
    """Where the next page starts (a page holds `top_k` hits from its offset on, within the budget),
    or None when every query has the hits its first page said were found (`rows`: a page's hits,
    per query)."""
    wanted = _wanted(pages)
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
    wanted = _wanted(pages)
    return out if wanted is None else [row[:n] for row, n in zip(out, wanted)]


# ---- a running MCP server's agent `search` tool ------------------------------------------------

MCP_TAKES = ("mode", "top_k", "filters", "collection")  # the options the agent's `search` tool takes
MCP_REVISION = "legacy"  # the SDK client's 2025-11-25 handshake: a session the server keeps (Mcp-Session-Id)


def mcp_check(options: SearchOptions, where: str) -> None:
    """Refuse an option the agent's `search` tool does not take, naming it (`where`: whose options)."""
    default = SearchOptions()
    given = [f.name for f in fields(SearchOptions)
             if f.name not in MCP_TAKES and getattr(options, f.name) != getattr(default, f.name)]
    if given:
        raise InvalidInputError(
            f"{where}: the MCP agent's search tool takes no {', '.join(given)}; over MCP the options are "
            f"{', '.join(MCP_TAKES)} (scores always 0..1, the rest as the server's parameter.yaml says); "
            "from_url (a `retriever deploy` service) or from_yaml take the others")


def mcp_url(url: str) -> str:
    """The MCP endpoint: no scheme -> http://; a URL without a path gets `/mcp` (`retriever serve
    --transport http` and `retriever deploy --mcp` serve it there)."""
    given = url.strip()
    if not given.startswith(("http://", "https://")):
        given = f"http://{given}"
    parts = urlsplit(given)
    if not parts.hostname:
        raise InvalidInputError(f"MCP server URL {url!r} names no host")
    return urlunsplit(parts._replace(path=parts.path if parts.path.strip("/") else "/mcp", fragment=""))


class McpServer:
    """A running MCP server's agent `search` tool (`retriever serve --transport http`, or `retriever
    deploy --mcp`), over streamable HTTP with the bearer token, by the official MCP SDK's client.

    One MCP session serves every call: a background thread's event loop owns it (the SDK's client
    is async); `search` waits there, `asearch` awaits it from any event loop. A session the server
    dropped (restarted, expired, closed) is opened again once per call. `close()`, the `with`
    block's end or the interpreter's exit closes it. The token never appears in a log, an error or
    a repr. Of the options the tool takes mode, top_k, filters and collection; another is refused."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0) -> None:
        self.url = mcp_url(url)
        self._token = token
        self.timeout = timeout
        self._runner = _Runner(self.url, token, timeout)
        self._finalizer = weakref.finalize(self, self._runner.close)  # when dropped, and at exit

    def __repr__(self) -> str:
        return f"McpServer({self.url!r}, token={'***' if self._token else None})"

    def __enter__(self) -> McpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the MCP session (the server is told) and the thread that holds it; later searches fail."""
        self._finalizer()

    @property
    def sessions(self) -> int:
        """How many MCP sessions this searcher opened (1, plus one for each the server dropped)."""
        return self._runner.opened

    def check(self, options: SearchOptions) -> None:
        """Refuse what the agent's `search` tool does not take (it ranks as the server's YAML says)."""
        mcp_check(options, self.url)

    def _arguments(self, queries: list[str], options: SearchOptions, offset: int) -> dict[str, Any]:
        given = {k: getattr(options, k) for k in MCP_TAKES if getattr(options, k) is not None}
        return {"query": queries, **given, "offset": offset}

    def search(self, queries: list[str], options: SearchOptions) -> list[list[Found]]:
        self.check(options)
        pages: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            pages.append(self._checked(self._runner.call(self._arguments(queries, options, offset))))
            offset = _next_offset(pages, _agent_rows)
        return _agent_hits(pages)

    async def asearch(self, queries: list[str], options: SearchOptions) -> list[list[Found]]:
        self.check(options)
        pages: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            pages.append(self._checked(await self._runner.acall(self._arguments(queries, options, offset))))
            offset = _next_offset(pages, _agent_rows)
        return _agent_hits(pages)

    def _checked(self, result: CallToolResult) -> dict[str, Any]:
        text = " ".join(str(getattr(c, "text", "")) for c in result.content)
        if result.is_error:
            raise RemoteError(f"{self.url}: its search tool answered an error: {detail(text, [self._token])}")
        body = result.structured_content
        if not isinstance(body, dict) or not isinstance(body.get("results"), list):
            raise RemoteError(f"{self.url}: its search tool answered without structured results: is it this "
                              f"retriever's agent search? {detail(text, [self._token])}")
        for warning in body.get("warnings", []):
            log.warning("%s: %s", self.url, warning)
        note = body.get("truncated") or {}
        if note.get("hits_cut"):
            raise RemoteError(f"{self.url}: a hit is larger than the server's reply budget (reply.max_bytes); ask for "
                              "fewer hits (top_k) or raise the server's budget")
        if note.get("passages_clipped"):
            log.warning("%s: %d passage(s) cut to the server's reply.max_chars (%s characters)", self.url,
                        note["passages_clipped"], note.get("max_chars"))
        return body


def _agent_rows(page: dict[str, Any]) -> list[list[Any]]:
    """The agent search's page: per query, its hits."""
    return [row["hits"] for row in page["results"]]


def _agent_hits(pages: list[dict[str, Any]]) -> list[list[Found]]:
    """The agent's pages joined, one list per query; its hits are split already (`source`)."""
    out: list[list[Found]] = [[] for _ in pages[0]["results"]]
    for page in pages:
        for row, hits in zip(out, _agent_rows(page)):
            row.extend(Found(h["id"], h["text"], h["score"], dict(h.get("metadata") or {}), h.get("source"))
                       for h in hits)
    wanted = _wanted(pages)
    return out if wanted is None else [row[:n] for row, n in zip(out, wanted)]


class _Lost(Exception):
    """The server no longer has the session (or the connection that carried it broke)."""


class _Runner:
    """The thread and event loop that hold one MCP session; calls come from any thread or loop."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        self.url, self.token, self.timeout = url, token, timeout
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.session: _Session | None = None  # touched on the loop only
        self.opening: asyncio.Lock | None = None
        self.opened = 0
        self.closed = False

    def _submit(self, arguments: dict[str, Any]) -> concurrent.futures.Future[CallToolResult]:
        with self.lock:
            if self.closed:
                raise RemoteError(f"{self.url}: this MCP searcher was closed")
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                self.thread = threading.Thread(target=self.loop.run_forever, name="retriever-mcp-session",
                                               daemon=True)
                self.thread.start()
            if threading.current_thread() is self.thread:
                raise RuntimeError("McpServer.search was called from its own session's thread")
            return asyncio.run_coroutine_threadsafe(self._call(arguments), self.loop)

    def call(self, arguments: dict[str, Any]) -> CallToolResult:
        return self._submit(arguments).result()

    async def acall(self, arguments: dict[str, Any]) -> CallToolResult:
        return await asyncio.wrap_future(self._submit(arguments))

    async def _call(self, arguments: dict[str, Any]) -> CallToolResult:
        """The tool call on the session, the session opened (again) where there is none."""
        for attempt in (1, 2):
            session = await self._session()
            try:
                return await session.call(arguments)
            except _Lost as e:
                await self._drop(session)
                if attempt == 2:
                    raise RemoteError(f"{self.url}: the MCP session was lost again ({e})") from None
                log.warning("%s: the MCP session was lost (%s); opening a new one", self.url, e)
        raise AssertionError("unreachable")

    async def _drop(self, session: _Session) -> None:
        """Leave a session the server no longer has (the next call opens another)."""
        if self.session is session:
            self.session = None
        await session.end()

    async def _session(self) -> _Session:
        if self.opening is None:
            self.opening = asyncio.Lock()
        async with self.opening:
            if self.session is None or self.session.ended:
                self.session = await _Session.open(self.url, self.token, self.timeout)
                self.opened += 1
            return self.session

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            loop, thread = self.loop, self.thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._end(), loop).result(timeout=10)
        except Exception as e:  # closing: say why, never raise
            log.debug("%s: the MCP session did not end cleanly: %s", self.url, detail(repr(e), [self.token]))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()

    async def _end(self) -> None:
        if self.session is not None:
            await self.session.end()


class _Session:
    """One MCP session: a task on the runner's loop enters the SDK's client and holds it until told
    to end (the SDK's client is left in the task that entered it); calls run beside it."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url, self.token = url, token
        self.client: Any = None  # the SDK's mcp.client.client.Client, while open
        self.stop = asyncio.Event()
        self.status: int | None = None  # the last HTTP error status the server answered
        self.error: BaseException | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def ended(self) -> bool:
        return self.task is None or self.task.done()

    @classmethod
    async def open(cls, url: str, token: str | None, timeout: float) -> _Session:
        session = cls(url, token)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        session.task = asyncio.create_task(session._hold(timeout, ready))
        await ready
        return session

    async def _seen(self, response: Any) -> None:
        if response.status_code >= 400:
            self.status = response.status_code

    async def _hold(self, timeout: float, ready: asyncio.Future[None]) -> None:
        import httpx2
        from mcp.client.client import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with httpx2.AsyncClient(headers=headers, timeout=timeout,
                                          event_hooks={"response": [self._seen]}) as http, \
                    Client(streamable_http_client(self.url, http_client=http), mode=MCP_REVISION,
                           read_timeout_seconds=timeout) as client:
                self.client = client
                ready.set_result(None)
                await self.stop.wait()
        except BaseException as e:  # the handshake failed, or the transport broke under the session
            self.error = e
            if not ready.done():
                ready.set_exception(self._failed(e))
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            self.client = None

    def _failed(self, e: BaseException) -> RemoteError:
        """Why the session could not be opened, said plainly (the SDK's errors come in groups)."""
        leaf = _leaf(e)
        if self.status in (401, 403):
            return RemoteError(f"{self.url} answered {self.status} to the MCP handshake (give the server's token: "
                               "from_mcp(url, token=...))")
        import httpx2

        if isinstance(leaf, httpx2.TransportError):
            return RemoteError(f"{self.url}: cannot reach it ({type(leaf).__name__}: {detail(str(leaf), [self.token])}); "
                               "is `retriever serve --transport http` running there?")
        status = f" (HTTP {self.status})" if self.status else ""
        return RemoteError(f"{self.url}: no MCP session{status}: {type(leaf).__name__}: "
                           f"{detail(str(leaf), [self.token])}")

    async def call(self, arguments: dict[str, Any]) -> CallToolResult:
        """The agent's `search` with `arguments`; _Lost where the session went away under it."""
        from mcp.shared.exceptions import MCPError

        client, holder = self.client, self.task
        if client is None or holder is None or holder.done():
            raise _Lost(self._why())
        self.status = None
        call = asyncio.ensure_future(client.call_tool("search", arguments))
        await asyncio.wait({call, holder}, return_when=asyncio.FIRST_COMPLETED)
        if not call.done():  # the session's task ended first: its transport broke
            call.cancel()
            raise _Lost(self._why())
        try:
            result: CallToolResult = call.result()
        except MCPError as e:
            if e.error.message in ("Session terminated", "Connection closed") or self.status == 404:
                raise _Lost(f"{e.error.message}{f', HTTP {self.status}' if self.status else ''}") from None
            hint = " (give the server's token: from_mcp(url, token=...))" if self.status in (401, 403) else ""
            status = f" (HTTP {self.status})" if self.status else ""
            raise RemoteError(f"{self.url}: the search call failed{status}: {detail(e.error.message, [self.token])}"
                              f"{hint}") from None
        return result

    def _why(self) -> str:
        return "it ended" if self.error is None else f"{type(_leaf(self.error)).__name__}: " \
            f"{detail(str(_leaf(self.error)), [self.token])}"

    async def end(self) -> None:
        """Leave the SDK's client (it tells the server the session is over: DELETE)."""
        self.stop.set()
        if self.task is not None:
            await asyncio.wait({self.task}, timeout=10)


def _leaf(e: BaseException) -> BaseException:
    """The first error inside nested exception groups (anyio's task groups raise them)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def one(searcher: Searcher, query: str, options: SearchOptions) -> list[Found]:
    return searcher.search([query], options)[0]


async def aone(searcher: Searcher, query: str, options: SearchOptions) -> list[Found]:
    return (await searcher.asearch([query], options))[0]
