"""Connection limits for both HTTP servers (`serve --transport http`, `retriever deploy`), as
uvicorn settings: a request's headers must arrive within `security.http.header_timeout` seconds
of the connection (or of the previous reply on it), at most `security.http.max_connections`
connections are open at once, and an idle keep-alive connection closes after at most 5 s. The
body's own timeout is the HTTP guard's (http_guard.py), which reads it before the app.

At the cap, a new connection closes the one that has waited longest for its request's headers
(slow or idle), not itself: clients that open connections and send nothing (no token either)
then push each other out, while a client whose headers come at once is served. When every
connection is inside a request, the new one is closed.

The protocol is uvicorn's httptools one (a C parser: h11's pure-Python one cost about 0.1 ms more
per request, bench/LEAN.md call-overhead). httptools keeps only the path of an absolute-form
target (`POST http://host/x`) or `*`; the raw target is put back in `raw_path`, so the guard sees it
as it was sent and refuses it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..config import Config

log = logging.getLogger(__name__)
KEEP_ALIVE = 5.0  # uvicorn's default idle time between requests on one connection


def uvicorn_limits(cfg: Config) -> dict[str, Any]:
    """The uvicorn settings that bound connections, from the YAML's security.http."""
    h = cfg.security.http
    # uvicorn answers 503 once as many connections as limit_concurrency are open. With the cap full
    # of waiting connections, a request whose headers came must still be served, and a closed
    # connection leaves uvicorn's count a turn of the event loop later: room for both.
    return {"http": guarded_protocol(h.header_timeout, h.max_connections),
            "limit_concurrency": 2 * h.max_connections, "timeout_keep_alive": min(KEEP_ALIVE, h.header_timeout)}


def guarded_protocol(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a deadline for each request's headers and a cap on connections."""

    waiting: OrderedDict[Guarded, None] = OrderedDict()  # connections awaiting headers, longest first

    class Guarded(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                if not waiting:  # every other connection is inside a request
                    log.warning("closed a connection over security.http.max_connections (%d)", max_connections)
                    transport.close()
                    return
                oldest, _ = waiting.popitem(last=False)
                log.warning("closed the connection waiting longest for its headers: security.http.max_connections "
                            "(%d) reached", max_connections)
                oldest.transport.close()
            self._arm()

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            if not self.url.startswith(b"/"):  # absolute-form or `*`: httptools keeps only the path; the guard refuses it
                self.scope["raw_path"] = self.url

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                waiting.pop(self, None)  # its headers came

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's headers have the same time

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            waiting.pop(self, None)
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            waiting.pop(self, None)
            waiting[self] = None  # newest
            self._deadline = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.cycle is not None and not self.cycle.response_complete:
                return  # its headers came: a request is being answered
            if not self.transport.is_closing():
                log.debug("closed a connection: no request headers within %s s (security.http.header_timeout)",
                          header_timeout)
                self.transport.close()

    return Guarded
