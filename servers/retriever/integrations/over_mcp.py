"""A running MCP server's agent `search` tool as a framework retriever's searcher (`McpServer`,
core.py's third `Searcher`): over streamable HTTP with its bearer token, by the official MCP SDK's
client, one MCP session kept open across calls."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from dataclasses import fields
from typing import TYPE_CHECKING, Any
from urllib.parse import urlunsplit

from ..errors import InvalidInputError, RemoteError
from ..search.deployed import service_parts
from ..security.redaction import detail
from .core import Found, SearchOptions, next_offset, wanted_rows

if TYPE_CHECKING:
    from mcp_types import CallToolResult

log = logging.getLogger("retriever.integrations")

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
    parts = service_parts(url, "MCP server URL", InvalidInputError)
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
            offset = next_offset(pages, _agent_rows)
        return _agent_hits(pages)

    async def asearch(self, queries: list[str], options: SearchOptions) -> list[list[Found]]:
        self.check(options)
        pages: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            pages.append(self._checked(await self._runner.acall(self._arguments(queries, options, offset))))
            offset = next_offset(pages, _agent_rows)
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
    wanted = wanted_rows(pages)
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
