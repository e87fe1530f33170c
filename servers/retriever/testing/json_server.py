"""A local JSON-over-HTTP server on 127.0.0.1 for the tests that stand in for a server elsewhere
(a rerank server, a deployed retriever): each POST's body and headers go to `answer`, whose reply
is sent as JSON; the time each request arrived is kept."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[Any, Message], Any]  # (body, headers: case-insensitive, as http.server reads them) -> the reply's JSON


class JsonServer:
    def __init__(self, answer: Answer, delay: float = 0.0) -> None:
        self.times: list[float] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                outer.times.append(time.monotonic())
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(delay)
                data = json.dumps(answer(body, self.headers)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
