"""The HTTP front door (pure ASGI, before the MCP app): bearer tokens, Host and Origin checks
(DNS rebinding, as the MCP transport spec asks), and a bound on the request body.

Tokens come from the environment variable `security.http.tokens_env` (comma-separated) or the
file `security.http.tokens_file` (one per line); several may be valid at once, for rotation.
They are compared in constant time and never logged. A server bound to anything but loopback
refuses to start without a token.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.middleware import Middleware

from .config import Config
from .errors import ConfigError

log = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_tokens(cfg: Config) -> list[str]:
    h = cfg.security.http
    tokens = [t.strip() for t in os.environ.get(h.tokens_env, "").split(",")]
    if h.tokens_file is not None:
        try:
            tokens += [line.strip() for line in h.tokens_file.read_text(encoding="utf-8").splitlines()]
        except OSError as e:
            raise ConfigError(f"security.http.tokens_file: cannot read {h.tokens_file} ({e.strerror})") from None
    return [t for t in tokens if t]


def front_door(cfg: Config, host: str, port: int, open_paths: tuple[str, ...] = ()) -> Middleware:
    """The HTTPGuard of a server bound to `host`:`port`, with the YAML's tokens and hosts;
    refuses to serve off loopback without a token. `open_paths` need no token (health checks)."""
    tokens = load_tokens(cfg)
    if not tokens and not is_loopback(host):
        raise ConfigError(f"--host {host} is not loopback: set bearer tokens first "
                          f"(${cfg.security.http.tokens_env}, or security.http.tokens_file)")
    h = cfg.security.http
    log.info("HTTP on %s:%d (%s)", host, port, f"{len(tokens)} bearer token(s)" if tokens else "no token: loopback only")
    return Middleware(HTTPGuard, tokens=tokens, host=host, port=port, allowed_hosts=h.allowed_hosts,
                      allowed_origins=h.allowed_origins, max_bytes=cfg.limits.max_request_bytes, open_paths=open_paths)


class HTTPGuard:
    """ASGI middleware: 401 without a valid token (when tokens are set; not for `open_paths`),
    403 for a foreign Host or Origin, 413 for a body over `max_bytes`."""

    def __init__(self, app: Any, tokens: list[str], host: str, port: int, allowed_hosts: list[str],
                 allowed_origins: list[str], max_bytes: int, open_paths: tuple[str, ...] = ()) -> None:
        self.app = app
        self.open_paths = set(open_paths)
        self.tokens = [t.encode() for t in tokens]
        names = {*LOOPBACK_NAMES, host, *allowed_hosts}
        self.hosts = {h.lower() for h in names} | {f"{h.lower()}:{port}" for h in names}
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        problem = self._check(headers, scope.get("path", ""))
        if problem is not None:
            await _refuse(send, *problem)
            return
        if not headers.get("content-length", "").isdigit():  # chunked: read it here, within the bound
            messages = await self._read_body(receive)
            if messages is None:
                await _refuse(send, 413, f"request body over {self.max_bytes} bytes (limits.max_request_bytes)")
                return
            receive = _replay(messages, receive)
        await self.app(scope, self._bounded(receive, send), send)

    def _check(self, headers: dict[str, str], path: str) -> tuple[int, str] | None:
        if headers.get("host", "").lower() not in self.hosts:
            return 403, "Host not allowed"
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin.rstrip("/").lower()):
            return 403, "Origin not allowed"
        if self.tokens and path not in self.open_paths:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not any(hmac.compare_digest(given.strip().encode(), t)
                                                     for t in self.tokens):
                return 401, "a valid bearer token is required (Authorization: Bearer <token>)"
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return 413, f"request body over {self.max_bytes} bytes (limits.max_request_bytes)"
        return None

    def _origin_ok(self, origin: str) -> bool:
        if origin in self.origins:
            return True
        scheme, _, rest = origin.partition("://")
        host = rest.rsplit(":", 1)[0] if not rest.endswith("]") else rest
        return scheme in ("http", "https") and is_loopback(host)

    async def _read_body(self, receive: Receive) -> list[MutableMapping[str, Any]] | None:
        """The messages of a body sent without Content-Length, read whole; None once it passes
        `max_bytes` (the app never sees it, so the client gets 413, not the app's error)."""
        messages, seen = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # a disconnect: the app hears it in turn
                return messages
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                return None
            if not message.get("more_body", False):
                return messages

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


def _replay(messages: list[MutableMapping[str, Any]], receive: Receive) -> Receive:
    """`messages` first, then the connection's own (a disconnect after the body)."""
    pending = list(messages)

    async def replay() -> MutableMapping[str, Any]:
        return pending.pop(0) if pending else await receive()

    return replay


class RequestTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"request body over {limit} bytes (limits.max_request_bytes)")


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="retriever"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
