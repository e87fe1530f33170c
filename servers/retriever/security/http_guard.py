"""The HTTP front door (pure ASGI, before the MCP app): bearer tokens (auth.py: static ones, or OAuth
access tokens; the caller's principal set in principals.PRINCIPAL), Host and Origin checks
(DNS rebinding, as the MCP transport spec asks), a bound on the request body and on the time it
takes to arrive (read here, before the app), one Host header and a path as the request target
(400 otherwise), MCP sessions bound to the principal that opened them, and in OAuth mode the
protected resource metadata (RFC 9728) at its well-known paths, without a token. Connection limits
(header timeout, open connections) are uvicorn's settings: http_limits.py.

Static tokens come from the environment variable `security.http.tokens_env` (comma-separated), the
file `security.http.tokens_file` (one per line) or security.http.principals' sha256 hashes; several
may be valid at once, for rotation. They are kept and looked up as sha256 digests and never logged.
A server bound to anything but loopback refuses to start without a token or OAuth.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from starlette.middleware import Middleware

from ..compute import CALLER
from ..config import Config
from ..errors import ConfigError
from .auth import Access, Denied
from .principals import PRINCIPAL, Principal

T = TypeVar("T")

log = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
SESSION_HEADER = "mcp-session-id"
MAX_SESSIONS = 10_000  # sessions whose token is remembered (the oldest forgotten first)
LONG_NUMBER = re.compile(rb"\d{4301}")  # more digits than Python turns into an int


def is_loopback(host: str) -> bool:
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# The MCP SDK's own bound on a streamable HTTP body (its bare 413 past it; FastMCP does not pass
# it on): MCP paths are held to it here, with the message every other refusal has.
MCP_SDK_BODY_BYTES = 4 * 1024 * 1024
MCP_PATH = "/mcp"


def front_door(cfg: Config, host: str, port: int, open_paths: tuple[str, ...] = ()) -> Middleware:
    """The HTTPGuard of a server bound to `host`:`port`, with the YAML's tokens and hosts;
    refuses to serve off loopback without a token. `open_paths` need no token (health checks)."""
    access = Access(cfg)
    if not access.closed and not is_loopback(host):
        raise ConfigError(f"--host {host} is not loopback: set bearer tokens first "
                          f"(${cfg.security.http.tokens_env}, security.http.tokens_file, security.http.principals) "
                          "or security.http.oauth")
    h = cfg.security.http
    log.info("HTTP on %s:%d (%s)", host, port, access.describe())
    return Middleware(HTTPGuard, access=access, host=host, port=port, allowed_hosts=h.allowed_hosts,
                      allowed_origins=h.allowed_origins, max_bytes=cfg.limits.max_request_bytes, open_paths=open_paths,
                      body_timeout=h.body_timeout)


class HTTPGuard:
    """ASGI middleware: 400 for a request target that is not a path or a request without exactly one
    Host header, 401 without a valid token (when tokens or OAuth are set; not for `open_paths`), 403
    for a foreign Host or Origin or for an MCP session opened by another principal, 413 for a body
    over `max_bytes`, 408 for one that takes longer than `body_timeout` seconds."""

    def __init__(self, app: Any, access: Access, host: str, port: int, allowed_hosts: list[str],
                 allowed_origins: list[str], max_bytes: int, open_paths: tuple[str, ...] = (),
                 body_timeout: float = 30.0) -> None:
        self.app = app
        self.open_paths = set(open_paths)
        self.access = access
        names = {*LOOPBACK_NAMES, host, *allowed_hosts}
        self.hosts = {h.lower() for h in names} | {f"{h.lower()}:{port}" for h in names}
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.max_bytes = max_bytes
        self.mcp_max_bytes = min(max_bytes, MCP_SDK_BODY_BYTES)
        self.body_timeout = body_timeout
        self.sessions: OrderedDict[str, str] = OrderedDict()  # MCP session id -> its principal (Principal.caller)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("headers", [])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
        path = scope.get("path", "")
        problem = _request_line(scope, raw) or self._origin_check(headers)
        if problem is None and path in self.access.metadata_paths and scope.get("method") in ("GET", "HEAD"):
            await _send_json(send, 200, self.access.metadata)  # RFC 9728: open, so a client can learn where to log in
            return
        caller = None
        if problem is None and self.access.closed and path not in self.open_paths:
            checked = await self.access.check(headers.get("authorization", ""))
            if isinstance(checked, Denied):
                await _refuse(send, checked.status, checked.message, checked.headers)
                return
            caller = self._enter(checked)
        problem = problem or self._length_check(headers, path)
        if problem is None and SESSION_HEADER in headers:
            problem = self._session_check(headers, caller)
        if problem is not None:
            await _refuse(send, *problem)
            return
        limit = self._limit(scope.get("path", ""))
        try:  # the whole body, here: within the bound in bytes and in time, before the app waits on it
            messages = await asyncio.wait_for(read_body(receive, limit), self.body_timeout)
        except TimeoutError:
            await _refuse(send, 408, f"request body not received within {self.body_timeout} s "
                                     "(security.http.body_timeout)")
            return
        if messages is None:
            await _refuse(send, 413, self._too_large(limit))
            return
        unreadable = _unreadable_json_rpc(messages)
        if unreadable is not None:
            await _send_json(send, 200, unreadable)
            return
        if caller is not None and scope.get("method") in ("GET", "POST") and SESSION_HEADER not in headers:
            send = self._remember_session(caller, send)
        await self.app(scope, self._bounded(replay(messages, receive), send), send)
        if scope.get("method") == "DELETE" and SESSION_HEADER in headers:
            self.sessions.pop(headers[SESSION_HEADER], None)  # closed by its own token

    def _origin_check(self, headers: dict[str, str]) -> tuple[int, str] | None:
        if headers.get("host", "").lower() not in self.hosts:
            return 403, "Host not allowed"
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin.rstrip("/").lower()):
            return 403, "Origin not allowed"
        return None

    @staticmethod
    def _enter(principal: Principal) -> str:
        """The request's task (its call, and an MCP session it opens) runs as `principal`."""
        PRINCIPAL.set(principal)
        CALLER.set(principal.caller)
        return principal.caller

    def _length_check(self, headers: dict[str, str], path: str) -> tuple[int, str] | None:
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._limit(path):
            return 413, self._too_large(self._limit(path))
        return None

    def _limit(self, path: str) -> int:
        return self.mcp_max_bytes if path == MCP_PATH or path.startswith(MCP_PATH + "/") else self.max_bytes

    def _too_large(self, limit: int) -> str:
        if limit < self.max_bytes:
            return (f"request body over {limit} bytes (the MCP SDK's bound for MCP over HTTP; "
                    f"limits.max_request_bytes, {self.max_bytes}, holds on the other routes)")
        return f"request body over {limit} bytes (limits.max_request_bytes)"

    def _origin_ok(self, origin: str) -> bool:
        if origin in self.origins:
            return True
        scheme, _, rest = origin.partition("://")
        host = rest.rsplit(":", 1)[0] if not rest.endswith("]") else rest
        return scheme in ("http", "https") and is_loopback(host)

    def _session_check(self, headers: dict[str, str], caller: str | None) -> tuple[int, str] | None:
        """An MCP session is used (or DELETEd) only by the principal that opened it (any of its tokens)."""
        opened_by = self.sessions.get(headers[SESSION_HEADER])
        if opened_by is not None and not hmac.compare_digest(opened_by, caller or ""):
            return 403, "this MCP session was opened with another token (another principal); open a session of your own"
        return None

    def _remember_session(self, caller: str, send: Send) -> Send:
        """`send` that notes the session id a reply hands out, with the principal of the request."""

        async def noting(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", []):
                    if key.decode("latin-1").lower() == SESSION_HEADER:
                        self.sessions[value.decode("latin-1")] = caller
                        while len(self.sessions) > MAX_SESSIONS:
                            self.sessions.popitem(last=False)
            await send(message)

        return noting

    def _bounded(self, receive: Receive, send: Send) -> Receive:
        seen = 0

        async def bounded() -> MutableMapping[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise RequestTooLarge(self.max_bytes)
            return message

        return bounded


async def read_body(receive: Receive, limit: int | None = None) -> list[MutableMapping[str, Any]] | None:
    """The messages of a request's body, read whole; None once it passes `limit` bytes (the guard's:
    the app never sees it, so the client gets 413, not the app's error)."""
    messages, seen = [], 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":  # a disconnect: the app hears it in turn
            return messages
        seen += len(message.get("body", b""))
        if limit is not None and seen > limit:
            return None
        if not message.get("more_body", False):
            return messages


INLINE_BODY = 64 * 1024  # bytes of a body parsed on the event loop; a larger one is parsed on a thread


async def parsed(body: bytes, parse: Callable[[bytes], T]) -> T:
    """`parse(body)`: on the event loop for a small body, on a thread for a large one (a filter of
    100,000 values is megabytes), so other callers' requests go on meanwhile."""
    return parse(body) if len(body) <= INLINE_BODY else await asyncio.to_thread(parse, body)


def replay(messages: list[MutableMapping[str, Any]], receive: Receive) -> Receive:
    """`messages` first, then the connection's own (a disconnect after the body)."""
    pending = list(messages)

    async def replay() -> MutableMapping[str, Any]:
        return pending.pop(0) if pending else await receive()

    return replay


class RequestTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"request body over {limit} bytes (limits.max_request_bytes)")


def _request_line(scope: Scope, raw: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
    """400 for a target that is not a path (absolute-form `POST http://host/x`, `*`) and for a
    request without exactly one Host header (RFC 9112, 3.2)."""
    if not str(scope.get("path", "")).startswith("/") or not bytes(scope.get("raw_path") or b"/").startswith(b"/"):
        return 400, "the request target must be a path (origin-form), not a URL"
    if sum(1 for k, _ in raw if k.lower() == b"host") != 1:
        return 400, "a request carries exactly one Host header"
    return None


def _unreadable_json_rpc(messages: list[MutableMapping[str, Any]]) -> dict[str, Any] | None:
    """A JSON-RPC error, with the request's id, for a request carrying a number Python will not read
    (over 4,300 digits): the MCP transport would answer a parse error with no id, which the stock
    client reads as a closed connection. None for anything else (the app judges it)."""
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    if body[:1] != b"{" or LONG_NUMBER.search(body) is None:
        return None  # the common case: no second parse
    long_numbers: list[int] = []

    def number(digits: str) -> Any:
        if len(digits.lstrip("-")) > 4300:
            long_numbers.append(len(digits))
            return 0
        return int(digits)

    try:
        request = json.loads(body, parse_int=number)
    except (ValueError, RecursionError):
        return None
    if not long_numbers or not isinstance(request, dict) or "jsonrpc" not in request:
        return None
    return {"jsonrpc": "2.0", "id": request.get("id"),
            "error": {"code": -32602, "message": f"invalid params: a number of {max(long_numbers)} digits; "
                                                 "numbers here have at most 4300 digits"}}


async def _refuse(send: Send, status: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    await _send_json(send, status, {"error": message}, list(headers))


async def _send_json(send: Send, status: int, content: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
