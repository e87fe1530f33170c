"""`retriever deploy`: real service processes on 127.0.0.1 over the built sample project, driven
with httpx (UltraRAG's request shape and ours) and through retriever_deploy_search."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import BIN, MCP
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import engine_for

TOKEN = "deploy-secret-7f3a9c"
QUERIES = [
    "what is BM25?", "how do vaccines work", "dense retrieval with embeddings", "photosynthesis in plants",
    "the history of the printing press", "how do transformers attend", "black holes and gravity",
    "climate change and oceans", "the immune system", "inverse document frequency", "neural networks",
    "plate tectonics", "the French revolution", "protein folding", "solar panels", "antibiotic resistance",
]


class Deploy:
    """A `retriever deploy` process; stopped (and its log checked for the token) at the end."""

    def __init__(self, config: Path, log_dir: Path, *sets: str, mcp: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"deploy-{self.port}.log"
        env = {**os.environ, "RETRIEVER_HTTP_TOKENS": TOKEN}
        args = [str(BIN / "retriever"), "deploy", "--config", str(config), "--port", str(self.port)]
        args += [a for s in sets for a in ("--set", s)] + (["--mcp"] if mcp else [])
        self.proc = subprocess.Popen(args, stderr=self.log_path.open("w"), env=env)
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
        self._wait_ready()

    def _wait_ready(self) -> None:
        wait_http(f"{self.url}/readyz", self.proc, lambda: self.log_path.read_text()[-3000:])

    def search(self, **body: Any) -> dict[str, Any]:
        r = self.client.post("/search", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    def metric(self, line_start: str) -> float:
        text = self.client.get("/metrics").text
        values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)]
        return sum(values)

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(30)
        assert TOKEN not in self.log_path.read_text()


@pytest.fixture(scope="module")
def service(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deploy]:
    d = Deploy(built_project, tmp_path_factory.mktemp("deploy"), mcp=True)
    yield d
    d.stop()


def test_ultrarag_request_shape_gets_ret_psg(service: Deploy) -> None:
    # exactly what UltraRAG's retriever_deploy_search posts
    r = service.client.post("/search", json={"query_list": ["what is BM25?"], "top_k": 3, "query_instruction": ""})
    assert r.status_code == 200
    body = r.json()
    assert len(body["ret_psg"]) == 1 and len(body["ret_psg"][0]) == 3
    assert "BM25" in body["ret_psg"][0][0]
    assert len(body["ret_ids"][0]) == len(body["ret_scores"][0]) == 3
    # UltraRAG's deploy script also takes collection_name ("" = the service's collection)
    same = service.search(query_list=["what is BM25?"], top_k=3, query_instruction="", collection_name="")
    assert same["ret_ids"] == body["ret_ids"]


def test_search_modes_filters_and_metadata(service: Deploy, built_project: Path) -> None:
    engine = engine_for(built_project)
    engine.init()
    for mode, method in (("dense", engine.search), ("bm25", engine.bm25_search), ("hybrid", engine.hybrid_search)):
        got = service.search(query_list=QUERIES[:3], top_k=4, mode=mode)
        assert got["ret_ids"] == [[h.id for h in hits] for hits in method(QUERIES[:3], 4)], mode
    flt = {"field": "id", "operator": "in", "value": ["doc15", "doc16", "doc17"]}
    got = service.search(query_list=["what is BM25?"], top_k=5, mode="hybrid", filters=flt, return_metadata=True)
    assert set(got["ret_ids"][0]) <= {"doc15", "doc16", "doc17"} and "ret_meta" in got and "ret_sources" in got
    batch = service.client.post("/tools/retriever_batch_search", json={"batch_query_list": [QUERIES[:2], QUERIES[2:3]],
                                                                       "top_k": 2})
    assert batch.status_code == 200 and [len(g) for g in batch.json()["ret_ids_ls"]] == [2, 1]


@pytest.mark.parametrize(("body", "status", "says"), [
    pytest.param({"query_list": ["x"], "top_k": 0}, 422, "top_k", id="top_k-0"),
    pytest.param({"query_list": ["x"], "mode": "keyword"}, 422, "mode", id="unknown-mode"),
    pytest.param({"query_list": ["x"], "unknown": 1}, 422, "unknown", id="unknown-key"),
    pytest.param({"query_list": ["x"], "mode": "dense", "fusion": "rrf"}, 400, "hybrid", id="fusion-not-hybrid"),
    pytest.param({"query_list": ["x"], "collection_name": "nope"}, 404, "nope", id="no-such-collection"),
    pytest.param({"query_list": []}, 400, "query_list", id="no-queries"),
])
def test_bad_requests_are_named(service: Deploy, body: dict[str, Any], status: int, says: str) -> None:
    r = service.client.post("/search", json=body)
    assert r.status_code == status, r.text
    assert says in r.json()["error"]


def test_not_json_and_write_tools_refused(service: Deploy) -> None:
    assert service.client.post("/search", content=b"{nope").status_code == 400
    r = service.client.post("/tools/retriever_add", json={"documents": [{"id": "x", "contents": "y"}]})
    assert r.status_code == 404 and "read-only" in r.json()["error"]


def _pieces(body: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    """`body` as an iterator: httpx sends it chunked, with no Content-Length."""
    for start in range(0, len(body), size):
        yield body[start:start + size]


@pytest.mark.parametrize(("body", "status"), [
    pytest.param(json.dumps({"query_list": ["what is BM25?"], "top_k": 1}).encode(), 200, id="within-the-limit"),
    pytest.param(b" " * (16 * 1024 * 1024 + 1), 413, id="over-the-limit"),  # limits.max_request_bytes: 16 MiB
])
def test_a_chunked_body_is_held_to_the_limit(service: Deploy, body: bytes, status: int) -> None:
    r = service.client.post("/search", content=_pieces(body), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers and r.request.headers["transfer-encoding"] == "chunked"
    assert r.status_code == status, r.text[:300]


def test_tokens(service: Deploy) -> None:
    search = {"query_list": ["what is BM25?"], "top_k": 1}
    assert httpx.post(f"{service.url}/search", json=search).status_code == 401
    wrong = httpx.post(f"{service.url}/search", json=search, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and TOKEN not in wrong.text
    assert service.client.post("/search", json=search).status_code == 200
    assert httpx.get(f"{service.url}/metrics").status_code == 401
    # health checks answer without a token, and say nothing about the collection
    assert httpx.get(f"{service.url}/healthz").json() == {"status": "alive"}
    assert httpx.get(f"{service.url}/readyz").json()["status"] == "ready"


def test_health_metrics_and_openapi(service: Deploy) -> None:
    service.search(query_list=["what is BM25?"], top_k=1)
    text = service.client.get("/metrics").text
    for name in ("retriever_requests_total", "retriever_errors_total", "retriever_request_seconds_bucket",
                 "retriever_queue_depth", "retriever_batch_queries_bucket"):
        assert f"\n{name}" in text, name
    assert '# TYPE retriever_request_seconds histogram' in text
    spec = service.client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    assert "query_list" in spec["paths"]["/search"]["post"]["requestBody"]["content"]["application/json"]["schema"][
        "properties"]
    assert "/tools/bm25_search" in spec["paths"] and "/tools/retriever_add" not in spec["paths"]


def test_concurrent_clients_each_get_their_own_results(service: Deploy) -> None:
    """32 clients at once, single queries of three modes: every caller gets exactly what it gets
    alone (ids and order), and the service merged requests into fewer batches."""
    jobs = [(QUERIES[i % len(QUERIES)], ("dense", "bm25", "hybrid")[i % 3]) for i in range(32)]
    alone = {job: service.search(query_list=[job[0]], top_k=5, mode=job[1]) for job in set(jobs)}
    batches_before = service.metric("retriever_batch_requests_count")
    start = threading.Barrier(32)

    def one(job: tuple[str, str]) -> dict[str, Any]:
        with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as c:
            start.wait()
            r = c.post("/search", json={"query_list": [job[0]], "top_k": 5, "mode": job[1]})
            assert r.status_code == 200, r.text
            return r.json()

    with ThreadPoolExecutor(32) as pool:
        together = list(pool.map(one, jobs))
    for job, got in zip(jobs, together):
        assert got["ret_ids"] == alone[job]["ret_ids"], job
        assert got["ret_scores"][0] == pytest.approx(alone[job]["ret_scores"][0], abs=1e-5), job
    assert service.metric("retriever_batch_requests_count") - batches_before < len(jobs)


def test_mcp_mounted_in_the_same_process(service: Deploy) -> None:
    async def run() -> Any:
        transport = StreamableHttpTransport(f"{service.url}/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
        async with Client(transport) as client:
            names = {t.name for t in await client.list_tools()}
            result = await client.call_tool("search", {"query": ["what is BM25?"], "top_k": 1, "mode": "bm25"})
            return names, json.loads(result.content[0].text)

    import asyncio

    names, body = asyncio.run(run())
    # the YAML's profile (agent), read-only: no tool that writes
    assert names == {"search", "get_document", "list_collections"}
    assert body["results"][0]["hits"][0]["id"] == "doc15"


# ---- queue bounds, timeouts and callers that go away: a service kept busy by a heavy request ------


@pytest.fixture(scope="module")
def busy_service(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deploy]:
    d = Deploy(built_project, tmp_path_factory.mktemp("busy"), "deploy.max_queue=2", "deploy.request_timeout=2")
    yield d
    d.stop()


def wait_until(check: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@contextmanager
def heavy(service: Deploy) -> Iterator[None]:
    """While inside: the compute side is searching 8,000 queries (seconds on 2 cores), so later
    requests wait in the queue. Its own caller gets a 504 (request_timeout) while it still runs."""
    def idle() -> bool:  # no batch running (a batch is counted in queries when it starts, in seconds when done)
        return (service.metric("retriever_batch_queries_count") == service.metric("retriever_batch_seconds_count")
                and service.metric("retriever_queue_depth") == 0)

    wait_until(idle, "the service never went idle")
    batches = service.metric("retriever_batch_queries_count")
    queries = [f"heavy query number {i}" for i in range(8000)]
    body = {"query_list": queries, "mode": "dense"}
    thread = threading.Thread(target=lambda: httpx.post(f"{service.url}/search", json=body,
                                                         headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120))
    thread.start()
    wait_until(lambda: service.metric("retriever_batch_queries_count") > batches, "the heavy batch never started")
    try:
        yield
    finally:
        thread.join()


def test_full_queue_answers_503_with_retry_after(busy_service: Deploy) -> None:
    with heavy(busy_service), ThreadPoolExecutor(5) as pool:
        replies = list(pool.map(lambda q: busy_service.client.post("/search", json={"query_list": [q], "top_k": 1}),
                                QUERIES[:5]))
    codes = sorted(r.status_code for r in replies)
    assert codes.count(503) == 3, codes  # two wait in the queue (max_queue=2), three are refused
    busy = next(r for r in replies if r.status_code == 503)
    assert busy.headers["retry-after"] == "1" and "max_queue" in busy.json()["error"]
    assert busy_service.metric("retriever_rejected_total") >= 3


def one_query_seconds(service: Deploy) -> float:
    """How long a one-query search takes to be answered (200)."""
    t = time.perf_counter()
    r = service.client.post("/search", json={"query_list": ["what is BM25?"], "top_k": 1})
    assert r.status_code == 200, r.text
    return time.perf_counter() - t


def still(service: Deploy) -> bool:
    """No piece of any request runs any more: the batch count stands still for a second."""
    before = service.metric("retriever_batch_queries_count")
    time.sleep(1.0)
    return service.metric("retriever_batch_queries_count") == before


def start_large(service: Deploy, n: int, timeout: float) -> threading.Thread:
    """A request of `n` queries whose client gives up after `timeout` s; started once its first
    piece has run."""
    batches = service.metric("retriever_batch_queries_count")
    queries = [f"abandoned query number {i}" for i in range(n)]

    def post() -> None:
        with contextlib.suppress(httpx.TimeoutException):
            httpx.post(f"{service.url}/search", json={"query_list": queries, "mode": "dense"},
                       headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout)

    thread = threading.Thread(target=post)
    thread.start()
    wait_until(lambda: service.metric("retriever_batch_queries_count") > batches, "the large request never started")
    return thread


def test_a_search_after_an_abandoned_large_request_is_answered_within_a_piece(busy_service: Deploy) -> None:
    before = busy_service.metric('retriever_dropped_total{reason="disconnected"}')
    start_large(busy_service, 4000, timeout=0.5).join()  # the client leaves after 0.5 s
    time.sleep(0.2)  # the service sees the connection close
    assert one_query_seconds(busy_service) < 3.0  # one piece of 64 queries at most (59 s before)
    assert busy_service.metric('retriever_dropped_total{reason="disconnected"}') == before + 1
    wait_until(lambda: still(busy_service), "the abandoned request kept running", 10)


def test_a_large_request_past_request_timeout_gets_504_and_stops(busy_service: Deploy) -> None:
    before = busy_service.metric('retriever_dropped_total{reason="timeout"}')
    t = time.perf_counter()
    r = busy_service.client.post("/search", json={"query_list": [f"timed out query {i}" for i in range(8000)],
                                                   "mode": "dense"})
    assert r.status_code == 504 and "request_timeout" in r.json()["error"]
    assert time.perf_counter() - t < 6.0  # request_timeout is 2 s
    assert one_query_seconds(busy_service) < 3.0  # was a 504 too: the work went on for nobody
    assert busy_service.metric('retriever_dropped_total{reason="timeout"}') == before + 1
    wait_until(lambda: still(busy_service), "the timed-out request kept running", 10)


def test_a_large_request_takes_turns_with_small_ones(service: Deploy) -> None:
    queries = [f"{q} ({i})" for i in range(150) for q in QUERIES]  # 2,400 queries, 38 pieces of 64
    reply: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: reply.update(service.search(query_list=queries, top_k=2, max_bytes=0)))
    batches = service.metric("retriever_batch_queries_count")
    thread.start()
    wait_until(lambda: service.metric("retriever_batch_queries_count") > batches, "the large request never started")
    took = [one_query_seconds(service) for _ in range(3)]
    assert max(took) < 3.0, took  # each waited one piece at most, not for the large request
    assert thread.is_alive(), "the large request finished before the small ones were answered"
    thread.join(120)
    assert len(reply["ret_ids"]) == len(queries)
    sample = [0, 63, 64, 1000, len(queries) - 1]  # across piece boundaries
    alone = service.search(query_list=[queries[i] for i in sample], top_k=2)
    assert [reply["ret_ids"][i] for i in sample] == alone["ret_ids"]


def test_off_loopback_without_a_token_refuses_to_start(built_project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RETRIEVER_HTTP_TOKENS"}
    proc = subprocess.run([str(BIN / "retriever"), "deploy", "--config", str(built_project), "--host", "0.0.0.0",
                           "--port", str(free_port())], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "not loopback" in proc.stderr


# ---- retriever_deploy_search: the client tool ----------------------------------------------------


def client_engine(tmp_path: Path, url: str, **remote: Any) -> MCP:
    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "parameter.yaml").read_text())
    cfg.update(retriever_url=url, remote={"token_env": "TEST_REMOTE_TOKEN", **remote})
    path = tmp_path / "client.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return MCP(engine_for(path))


def test_deploy_search_tool(service: Deploy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TEST_REMOTE_TOKEN", TOKEN)
    mcp = client_engine(tmp_path, f"127.0.0.1:{service.port}")  # no scheme: http:// as UltraRAG does
    got = mcp.ok("retriever_deploy_search", {"query_list": ["what is BM25?"], "top_k": 3, "query_instruction": ""})
    direct = service.search(query_list=["what is BM25?"], top_k=3, query_instruction="")
    assert got["ret_psg"] == direct["ret_psg"] and got["ret_ids"] == direct["ret_ids"]
    hybrid = mcp.ok("retriever_deploy_search", {"query_list": ["what is BM25?"], "mode": "hybrid", "top_k": 2,
                                                "return_text": False})
    assert "ret_psg" not in hybrid and "ret_sources" in hybrid
    # the URL is the operator's: a call may name the YAML's own, not another
    assert mcp.ok("retriever_deploy_search", {"query_list": ["x"], "retriever_url": f"127.0.0.1:{service.port}"})
    err = mcp.error("retriever_deploy_search", {"query_list": ["x"], "retriever_url": "127.0.0.1:1"})
    assert "client_endpoints" in err
    assert TOKEN not in caplog.text


def test_deploy_search_without_token_names_url_and_status(service: Deploy, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_REMOTE_TOKEN", raising=False)
    err = client_engine(tmp_path, service.url).error("retriever_deploy_search", {"query_list": ["x"]})
    assert f"{service.url}/search" in err and "401" in err


class Flaky:
    """A server on 127.0.0.1 that answers `codes` in turn (with `retry_after` as Retry-After), then
    a correct reply; `seen` records each request and `times` when it came."""

    def __init__(self, codes: list[int], retry_after: str = "0") -> None:
        self.codes, self.seen, self.times = list(codes), [], []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                flaky.seen.append((self.path, body, self.headers.get("Authorization")))
                flaky.times.append(time.monotonic())
                code = flaky.codes.pop(0) if flaky.codes else 200
                reply = {"ret_psg": [["p"] for _ in body["query_list"]]} if code == 200 else {"error": "boom"}
                data = json.dumps(reply).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/any/path?x=1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.parametrize(("codes", "ok"), [
    pytest.param([503, 502, 429], True, id="fails-thrice-then-answers"),
    pytest.param([500, 500, 500, 500], False, id="still-failing-after-3-retries"),
    pytest.param([400], False, id="400-not-retried"),
])
def test_deploy_search_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codes: list[int], ok: bool) -> None:
    monkeypatch.setenv("TEST_REMOTE_TOKEN", TOKEN)
    flaky = Flaky(codes)
    try:
        mcp = client_engine(tmp_path, flaky.url, max_retries=3)
        if ok:
            assert mcp.ok("retriever_deploy_search", {"query_list": ["a", "b"]})["ret_psg"] == [["p"], ["p"]]
        else:
            err = mcp.error("retriever_deploy_search", {"query_list": ["a"]})
            assert f"answered {codes[-1]}" in err and "/search" in err and TOKEN not in err
        expected_calls = len(codes) + 1 if ok else min(len(codes), 4)
        assert len(flaky.seen) == expected_calls
        path, body, auth = flaky.seen[0]
        assert path == "/search" and body["query_list"] in (["a", "b"], ["a"]) and auth == f"Bearer {TOKEN}"
    finally:
        flaky.server.shutdown()


def test_deploy_search_waits_as_retry_after_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry-After: 2 makes the client wait 2 s; its own first backoff would be 0.5 .. 0.75 s."""
    monkeypatch.setenv("TEST_REMOTE_TOKEN", TOKEN)
    flaky = Flaky([503], retry_after="2")
    try:
        mcp = client_engine(tmp_path, flaky.url, max_retries=3)
        assert mcp.ok("retriever_deploy_search", {"query_list": ["a"]})["ret_psg"] == [["p"]]
        assert len(flaky.times) == 2
        assert 1.95 <= flaky.times[1] - flaky.times[0] < 5, flaky.times
    finally:
        flaky.server.shutdown()


def test_deploy_search_connection_refused(tmp_path: Path) -> None:
    err = client_engine(tmp_path, f"127.0.0.1:{free_port()}", max_retries=1).error(
        "retriever_deploy_search", {"query_list": ["a"]})
    assert "cannot reach it" in err and "after 1 retries" in err


def test_every_read_tool_answers_at_tools(service: Deploy) -> None:
    """`/tools/<tool>` serves every read-only tool of the registry (service.app.READ_TOOLS): each
    answers, or says what it lacks (an LLM, a graph, a user collection) with a 4xx, never a 500."""
    from retriever.api.registry import BY_NAME
    from retriever.service.app import READ_TOOLS
    from test_agent import minimal

    statuses = {name: service.client.post(f"/tools/{name}", json=minimal(BY_NAME[name])).status_code
                for name in READ_TOOLS}
    assert all(code < 500 for code in statuses.values()), statuses
    assert {n for n, c in statuses.items() if c == 200} >= {"search", "get_document", "list_collections",
                                                           "retriever_search", "bm25_search", "retriever_batch_search",
                                                           "retriever_hybrid_search", "retriever_fanout_search"}


def test_callers_take_turns_and_none_fills_the_queue_alone(built_project: Path) -> None:
    """One token's burst used to fill the whole queue (503 for every other caller) and be served
    before a later caller's request; now a caller holds at most deploy.max_queue_per_caller
    waiting requests, and the queue takes callers in turn."""
    import asyncio

    from retriever.api.models import BM25SearchRequest
    from retriever.compute import CALLER
    from retriever.config import DeployConfig
    from retriever.service.batcher import Batcher, QueueFull
    from retriever.service.metrics import Metrics

    engine = engine_for(built_project)
    engine.init()

    async def run() -> tuple[list[str], str]:
        batcher = Batcher(engine, DeployConfig(max_queue=8, max_queue_per_caller=3), Metrics(lambda: 0.0))

        def submit(caller: str, top_k: int) -> None:  # each top_k its own batch: no two are merged
            CALLER.set(caller)
            batcher.submit(BM25SearchRequest(query_list=["what is BM25?"], top_k=top_k))

        for top_k in (1, 2, 3):
            submit("a", top_k)
        with pytest.raises(QueueFull) as refused:
            submit("a", 4)
        submit("b", 5)  # the queue has room for another caller
        return [batcher._take()[0].caller for _ in range(4)], str(refused.value)

    order, refused = asyncio.run(run())
    assert order == ["a", "b", "a", "a"] and "deploy.max_queue_per_caller" in refused


def test_a_long_whole_call_lets_another_caller_s_search_through(built_project: Path, tmp_path: Path) -> None:
    """A multi-query of 4,000 phrasings runs as one call (it cannot be cut into pieces): another
    caller's one-query search used to wait it out (29-44 s on SciFact). Now the service serves it
    between two chunks of the long call."""
    port = free_port()
    log = tmp_path / "deploy.log"
    proc = subprocess.Popen([str(BIN / "retriever"), "deploy", "--config", str(built_project), "--port", str(port)],
                            stderr=log.open("w"), env={**os.environ, "RETRIEVER_HTTP_TOKENS": "long-5d1,short-8e2"})
    url = f"http://127.0.0.1:{port}"
    done: dict[str, float] = {}
    try:
        wait_http(f"{url}/readyz", proc, lambda: log.read_text()[-3000:])
        phrasings = [f"question phrased the {i}th way about photosynthesis and light" for i in range(4000)]

        def long_call() -> None:
            r = httpx.post(f"{url}/tools/retriever_multi_query_search", timeout=300,
                           json={"question_list": [phrasings], "top_k": 3},
                           headers={"Authorization": "Bearer long-5d1"})
            assert r.status_code == 200, r.text[:300]
            done["long"] = time.monotonic()

        thread = threading.Thread(target=long_call)
        start = time.monotonic()
        thread.start()
        time.sleep(0.5)  # the long call is running
        r = httpx.post(f"{url}/search", json={"query_list": ["what is BM25?"], "top_k": 1}, timeout=300,
                       headers={"Authorization": "Bearer short-8e2"})
        done["short"] = time.monotonic()
        thread.join(300)
    finally:
        proc.terminate()
        proc.wait(30)
    assert r.status_code == 200 and r.json()["ret_ids"][0]
    print(f"long call {done['long'] - start:.1f} s; the short search answered at {done['short'] - start:.1f} s")
    assert done["short"] < done["long"], "the short search waited for the whole long call"


def test_a_million_value_filter_is_refused_while_another_caller_is_served(built_project: Path,
                                                                         tmp_path: Path) -> None:
    """A 1,000,000-value `in` filter (a 14 MB request here) held a shared service for what extrapolated
    to 20 minutes, another token getting 504s. Refused by filters.MAX_VALUES before any document is
    read; another caller's searches are answered meanwhile."""
    port = free_port()
    log = tmp_path / "deploy.log"
    proc = subprocess.Popen([str(BIN / "retriever"), "deploy", "--config", str(built_project), "--port", str(port)],
                            stderr=log.open("w"), env={**os.environ, "RETRIEVER_HTTP_TOKENS": "big-3a7,small-9c4"})
    url = f"http://127.0.0.1:{port}"
    seconds: list[float] = []
    try:
        wait_http(f"{url}/readyz", proc, lambda: log.read_text()[-3000:])
        values = [f"doc{i:07d}" for i in range(1_000_000)]
        refused: list[httpx.Response] = []
        big = threading.Thread(target=lambda: refused.append(httpx.post(
            f"{url}/search", timeout=300, headers={"Authorization": "Bearer big-3a7"},
            json={"query_list": ["x"], "filters": {"field": "id", "operator": "in", "value": values}})))
        big.start()
        while big.is_alive():
            t = time.perf_counter()
            r = httpx.post(f"{url}/search", json={"query_list": ["what is BM25?"], "top_k": 1}, timeout=60,
                           headers={"Authorization": "Bearer small-9c4"})
            assert r.status_code == 200
            seconds.append(time.perf_counter() - t)
        big.join()
    finally:
        proc.terminate()
        proc.wait(30)
    assert refused[0].status_code == 400 and "100000" in refused[0].text.replace(",", ""), refused[0].text[:300]
    print(f"the other caller's {len(seconds)} searches meanwhile: at most {max(seconds, default=0):.2f} s")
    assert seconds and max(seconds) < 1.0
