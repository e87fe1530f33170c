"""A local server speaking OpenAI's chat-completions wire format, for the LLM tools: no LLM weights
ship in a PyPI package we could find, and none can be downloaded here. The real `openai` client
talks to it. Each request is recorded (path, headers, JSON body); the answer comes from a script
(a queue of steps) or, when the queue is empty, from `respond(prompt) -> content`.

A step is one of: {"content": str} (the assistant's message), {"status": int, "body": str}, {"delay": s}
(then the next step), {"refusal": str}.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeLLM:
    def __init__(self, respond: Callable[[str], str] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: deque[dict[str, Any]] = deque()
        self.respond = respond or (lambda prompt: "{}")
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    step = fake.script.popleft() if fake.script else None
                while step is not None and "delay" in step:
                    time.sleep(step["delay"])
                    with fake._lock:
                        step = fake.script.popleft() if fake.script else None
                if step is not None and "status" in step:
                    return self._send(step["status"], {"error": {"message": step.get("body", "error")}})
                prompt = body["messages"][-1]["content"]
                content = step.get("content") if step else fake.respond(prompt)
                message = {"role": "assistant", "content": content, "refusal": (step or {}).get("refusal")}
                self._send(200, {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                                 "model": body["model"], "choices": [{"index": 0, "message": message,
                                                                      "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def prompts(self) -> list[str]:
        return [r["body"]["messages"][-1]["content"] for r in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
