"""Stateless replicas (issue 29): two `retriever deploy` processes over one Milvus 2.3.5 server, on a
collection where Milvus holds the documents (`is_demo: true`: the mode a 2.3 server runs; dense
only, the server has no BM25 function). Neither replica has a corpus or an index file: its folder
holds its parameter.yaml and nothing else, before and after. Writes go through a third process,
`retriever serve --transport http` with the write tools (`retriever deploy` serves the read-only
tools only), and both replicas see them: replica A reads Strong (at once), replica B Bounded
(within the server's graceful time). /readyz follows Milvus: with the server frozen (SIGSTOP to its
process group) it answers 503 with the reason within its time limit, and 200 once the server runs
again. Every process is real, on 127.0.0.1, inside the test's network namespace."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import BIN
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import ROOT, SAMPLE

pytestmark = pytest.mark.milvus_server

TOKEN = "replica-secret-5d2e8a"
COLLECTION = "replicas"
NEW = {"id": "n1", "contents": "Quokkas are small wallabies living on Rottnest Island near Perth.", "topic": "zoology"}
QUERY = "quokkas on Rottnest Island"
BOUNDED_WITHIN_S = 15.0  # Bounded reads lag writes by the server's graceful time (5 s on 2.3.5)


def project(folder: Path, uri: str, consistency: str, corpus: Path | None = None) -> Path:
    """A parameter.yaml alone in `folder`: Milvus demo mode on the server, no corpus unless given."""
    folder.mkdir(parents=True)
    cfg = yaml.safe_load((ROOT / "parameter.yaml").read_text())
    cfg.update(corpus_path=str(corpus) if corpus else None, index_backend="milvus", is_demo=True,
               collection_name=COLLECTION)
    cfg["index_backend_configs"]["milvus"] = {"uri": uri, "read_consistency": consistency}
    path = folder / "parameter.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Process:
    """A `retriever` subprocess on a free 127.0.0.1 port, its stderr in a log."""

    def __init__(self, log_dir: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"{args[0]}-{self.port}.log"
        self.proc = subprocess.Popen([str(BIN / "retriever"), *args, "--port", str(self.port)],
                                     stderr=self.log_path.open("w"), env={**os.environ, "RETRIEVER_HTTP_TOKENS": TOKEN})
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(30)
        assert TOKEN not in self.log()


class Replica(Process):
    def __init__(self, config: Path, log_dir: Path) -> None:
        super().__init__(log_dir, "deploy", "--config", str(config))
        wait_http(f"{self.url}/readyz", self.proc, lambda: self.log()[-3000:])

    def ids(self, query: str = QUERY, k: int = 3) -> list[str]:
        r = self.client.post("/search", json={"query_list": [query], "top_k": k})
        assert r.status_code == 200, r.text
        return r.json()["ret_ids"][0]

    def passages(self, query: str = QUERY, k: int = 1) -> list[str]:
        r = self.client.post("/search", json={"query_list": [query], "top_k": k})
        assert r.status_code == 200, r.text
        return r.json()["ret_psg"][0]

    def ready(self) -> httpx.Response:
        return httpx.get(f"{self.url}/readyz", timeout=30)


class Writer(Process):
    """`retriever serve --transport http --tools full`: the MCP tools, writes included, over HTTP."""

    def __init__(self, config: Path, log_dir: Path) -> None:
        super().__init__(log_dir, "serve", "--config", str(config), "--tools", "full", "--transport", "http", "--init")
        wait_http(f"{self.url}/mcp", self.proc, lambda: self.log()[-3000:], any_status=True)

    def call(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        from fastmcp import Client
        from fastmcp.client.transports import StreamableHttpTransport

        async def run() -> Any:
            transport = StreamableHttpTransport(f"{self.url}/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
            async with Client(transport, timeout=300) as client:
                return await client.call_tool(tool, args or {}, raise_on_error=False)

        result = asyncio.run(run())
        assert not result.is_error, result.content[0].text
        return result.structured_content


def until(check: Callable[[], bool], seconds: float) -> float:
    """Seconds until `check()` holds; fails past `seconds`."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, f"not within {seconds} s"
        time.sleep(0.2)
    return time.monotonic() - start


@pytest.fixture(scope="module")
def cluster(milvus_server_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The writer (sample corpus indexed into Milvus), then replica A (Strong) and B (Bounded)."""
    root = tmp_path_factory.mktemp("replicas")
    logs = root / "logs"
    logs.mkdir()
    writer = Writer(project(root / "writer", milvus_server_uri, "Strong", SAMPLE), logs)
    started = []
    try:
        assert writer.call("retriever_index", {"overwrite": True})["documents"] == 30
        folders = {"A": root / "a", "B": root / "b"}
        a = Replica(project(folders["A"], milvus_server_uri, "Strong"), logs)
        started.append(a)
        b = Replica(project(folders["B"], milvus_server_uri, "Bounded"), logs)
        started.append(b)
        yield {"writer": writer, "A": a, "B": b, "folders": folders}
    finally:
        for p in [writer, *started]:
            p.stop()


def only_the_yaml(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_write_through_one_process_is_seen_by_both_replicas(cluster: dict[str, Any]) -> None:
    writer, a, b = cluster["writer"], cluster["A"], cluster["B"]
    assert a.ready().json()["dense_index"] == 30 and "n1" not in a.ids() and "n1" not in b.ids()

    writer.call("retriever_add", {"documents": [NEW]})
    assert a.ids()[0] == "n1"  # Strong: the next search sees it
    seen_b = until(lambda: b.ids()[:1] == ["n1"], BOUNDED_WITHIN_S)
    assert a.ready().json()["dense_index"] == 31

    numbat = "Numbats eat termites in the woodlands of Western Australia."
    assert writer.call("retriever_add", {"documents": [{**NEW, "contents": numbat}]})["replaced"] == 1
    assert a.passages("numbats eating termites") == [numbat]
    until(lambda: b.passages("numbats eating termites") == [numbat], BOUNDED_WITHIN_S)

    assert writer.call("retriever_delete", {"ids": ["n1"]})["deleted"] == 1
    assert "n1" not in a.ids("numbats eating termites")
    until(lambda: "n1" not in b.ids("numbats eating termites"), BOUNDED_WITHIN_S)
    assert a.ready().json()["dense_index"] == 30
    print(f"replica B (Bounded) saw the add after {seen_b:.1f} s")

    for folder in cluster["folders"].values():  # stateless: nothing but the YAML, before and after
        assert only_the_yaml(folder) == ["parameter.yaml"]


def _server_group() -> int:
    """The process group of the Milvus server this session started (the one listening on 19530)."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == 19530 and conn.pid:
            return os.getpgid(conn.pid)
    raise AssertionError("no process listens on 127.0.0.1:19530")


def test_readyz_follows_milvus(cluster: dict[str, Any]) -> None:
    a, b = cluster["A"], cluster["B"]
    assert a.ready().status_code == 200 and b.ready().status_code == 200
    group = _server_group()
    assert group != os.getpgid(0)  # its own group (start_new_session): nothing else is frozen
    os.killpg(group, signal.SIGSTOP)  # the server stops answering
    try:
        t = time.monotonic()
        down = a.ready()
        took = time.monotonic() - t
        assert down.status_code == 503 and down.headers["retry-after"] == "1"
        reason = down.json()["error"]
        assert reason.startswith("not ready: the Milvus at http://127.0.0.1:19530 does not answer"), reason
        assert took < 10, took  # the check's own limit (5 s), not the client's
        assert httpx.get(f"{a.url}/healthz", timeout=5).status_code == 200  # the process itself is alive
    finally:
        os.killpg(group, signal.SIGCONT)
    back = until(lambda: a.ready().status_code == 200 and b.ready().status_code == 200, 60)
    assert a.ready().json()["dense_index"] == 30 and a.ids("what causes earthquakes")
    assert "not ready: the Milvus at http://127.0.0.1:19530 does not answer" in a.log()  # logged once, on change
    assert "ready again" in a.log()
    print(f"/readyz: 503 after {took:.1f} s with the server frozen; 200 again {back:.1f} s after it resumed")
