"""Local stand-ins for the paid web search APIs: an HTTP server on 127.0.0.1 that speaks each
provider's wire format, so the real client libraries (exa-py, tavily-python, httpx) run against it.

Wire formats, as the providers document them and the client libraries send them:
- Exa: POST /search, header `x-api-key`, JSON {query, numResults, type, contents: {text:
  {maxCharacters}}}; reply {requestId, resolvedSearchType, results: [{id, url, title, score,
  publishedDate, author, text}]}; a bad key is 401 {"error": ...}.
- Tavily: POST /search, header `Authorization: Bearer KEY`, JSON {query, max_results,
  search_depth, topic}; reply {query, answer, images, results: [{title, url, content, score,
  raw_content}], response_time, request_id}; a bad key is 401 {"detail": {"error": ...}}.
- ZhipuAI: POST /api/paas/v4/web_search, header `Authorization: Bearer KEY`, JSON {search_query,
  search_engine, search_intent, count, search_recency_filter, content_size}; reply {id, created,
  request_id, search_intent, search_result: [{title, content, link, media, icon, refer,
  publish_date}]}; an error is {"error": {"code", "message"}}.

A test scripts the server per query: `plan[query] = [429, 200]` answers those statuses in turn
(the last one repeats; an error with `retry_after` as its Retry-After header, if set),
`slow[query] = seconds` waits before answering, `raw[query] = bytes` answers 200 with that body.
Every request is recorded (path, headers, body, time), and the number of requests in flight is
tracked (`max_in_flight`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = {"exa": "/search", "tavily": "/search", "zhipuai": "/api/paas/v4/web_search"}
QUERY_FIELD = {"exa": "query", "tavily": "query", "zhipuai": "search_query"}
COUNT_FIELD = {"exa": "numResults", "tavily": "max_results", "zhipuai": "count"}


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    at: float


def hit(query: str, i: int) -> dict[str, Any]:
    """The i-th result the fake gives for `query` (0-based)."""
    slug = query.replace(" ", "-")
    return {"url": f"https://example.org/{slug}/{i}", "title": f"{query} title {i}",
            "text": f"{query} passage {i}", "score": round(0.9 - 0.1 * i, 3)}


@dataclass
class FakeProvider:
    provider: str
    key: str
    delay: float = 0.0  # seconds each request takes
    extra: int = 0  # results beyond the count asked for (a provider that ignores the count)
    echo_key: bool = False  # error bodies quote the credential received (a careless proxy)
    pad: int = 0  # characters of filler before the quoted credential (to put it across a cut)
    plan: dict[str, list[int]] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)
    raw: dict[str, bytes] = field(default_factory=dict)
    retry_after: str | None = None  # the Retry-After header of every error reply
    requests: list[Recorded] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        port = self.server.server_address[1]  # type: ignore[union-attr]  # set by start(), bound to 127.0.0.1
        return f"http://127.0.0.1:{port}" + ("/api/paas/v4" if self.provider == "zhipuai" else "")

    def queries(self) -> list[str]:
        return [r.body[QUERY_FIELD[self.provider]] for r in self.requests]

    def times(self, query: str) -> list[float]:
        return [r.at for r in self.requests if r.body[QUERY_FIELD[self.provider]] == query]

    # ---- the answer to one request ------------------------------------------------------------

    def authorised(self, headers: dict[str, str]) -> bool:
        if self.provider == "exa":
            return headers.get("x-api-key") == self.key
        return headers.get("authorization") == f"Bearer {self.key}"

    def answer(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, bytes]:
        query = body[QUERY_FIELD[self.provider]]
        credential = headers.get("x-api-key") or headers.get("authorization", "")
        quoted = f" {'x' * self.pad}(received {credential})" if self.echo_key else ""
        if not self.authorised(headers):
            return self.error(401, "invalid api key" + quoted)
        statuses = self.plan.get(query)
        if statuses:
            status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
            if status != 200:
                return self.error(status, f"scripted {status}" + quoted)
        if query in self.raw:
            return 200, self.raw[query]
        return 200, json.dumps(self.success(query, int(body[COUNT_FIELD[self.provider]]) + self.extra)).encode()

    def error(self, status: int, message: str) -> tuple[int, bytes]:
        shapes = {"exa": {"error": message, "requestId": "r1"},
                  "tavily": {"detail": {"error": message}},
                  "zhipuai": {"error": {"code": "1001" if status == 401 else str(status), "message": message}}}
        return status, json.dumps(shapes[self.provider]).encode()

    def success(self, query: str, n: int) -> dict[str, Any]:
        hits = [hit(query, i) for i in range(n)]
        if self.provider == "exa":
            return {"requestId": "req-1", "resolvedSearchType": "neural",
                    "results": [{"id": h["url"], "url": h["url"], "title": h["title"], "score": h["score"],
                                 "publishedDate": "2024-01-01", "author": None, "text": h["text"]} for h in hits]}
        if self.provider == "tavily":
            return {"query": query, "answer": None, "images": [], "response_time": 0.01, "request_id": "req-1",
                    "results": [{"title": h["title"], "url": h["url"], "content": h["text"], "score": h["score"],
                                 "raw_content": None} for h in hits]}
        return {"id": "ws-1", "created": 1700000000, "request_id": "req-1",
                "search_intent": [{"query": query, "intent": "SEARCH_ALL", "keywords": query}],
                "search_result": [{"title": h["title"], "content": h["text"], "link": h["url"], "media": "example",
                                   "icon": "", "refer": f"ref_{i + 1}", "publish_date": "2024-01-01"}
                                  for i, h in enumerate(hits)]}


def make_handler(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            with fake.lock:
                fake.requests.append(Recorded(self.path, headers, body, time.monotonic()))
                fake.in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
            try:
                if self.path != PATHS[fake.provider]:
                    status, payload = 404, b'{"error": "not found"}'
                else:
                    time.sleep(fake.delay + fake.slow.get(body.get(QUERY_FIELD[fake.provider]), 0.0))
                    status, payload = fake.answer(headers, body)
            finally:
                with fake.lock:
                    fake.in_flight -= 1
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                if status != 200 and fake.retry_after is not None:
                    self.send_header("Retry-After", fake.retry_after)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64  # the default backlog of 5 delays a burst of connections by a SYN retry (1 s)


def start(fake: FakeProvider) -> FakeProvider:
    server = _Server(("127.0.0.1", 0), make_handler(fake))
    fake.server = server
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return fake


def stop(fake: FakeProvider) -> None:
    if fake.server is not None:
        fake.server.shutdown()
        fake.server.server_close()
