"""Malformed input is a client's mistake on every face (issue 30): a 5,000-digit integer, a filter
nested hundreds of levels deep, a client that goes away mid-body, a file that is not UTF-8, an LLM
that answers with a filter 100 levels deep. `retriever deploy` answers 4xx (or drops the request
quietly) with one log line and no traceback; MCP gives a tool error naming the problem."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import BIN, MCP, copy_built
from fastmcp import Client
from retriever.testing.fake_llm import FakeLLM
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import engine_for

HUGE = "9" * 5000  # over Python's 4,300-digit limit for int <-> str
LEAF = {"field": "id", "operator": "==", "value": "doc01"}


def nested(levels: int) -> dict[str, Any]:
    f: dict[str, Any] = LEAF
    for _ in range(levels):
        f = {"operator": "AND", "conditions": [f]}
    return f


def nested_text(levels: int) -> str:
    """The same as JSON text, for depths that json.dumps itself cannot write."""
    return '{"operator": "AND", "conditions": [' * levels + json.dumps(LEAF) + "]}" * levels


# ---- retriever deploy ------------------------------------------------------------------------------


class Service:
    def __init__(self, config: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = subprocess.Popen([str(BIN / "retriever"), "deploy", "--config", str(config), "--port",
                                      str(self.port)], stderr=log.open("w"))
        wait_http(f"{self.url}/readyz", self.proc, lambda: log.read_text()[-3000:])

    def post(self, body: str) -> httpx.Response:
        return httpx.post(f"{self.url}/search", content=body, headers={"content-type": "application/json"},
                          timeout=60)

    def log_since(self, start: int) -> str:
        time.sleep(0.3)  # the log line follows the reply
        return self.log.read_text()[start:]


@pytest.fixture(scope="module")
def deploy(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = Service(built_project, tmp_path_factory.mktemp("malformed") / "deploy.log")
    yield service
    service.proc.terminate()
    service.proc.wait(30)


@pytest.mark.parametrize(("body", "says"), [
    pytest.param('{"query_list": ["x"], "top_k": ' + HUGE + "}", "digits", id="5000-digit-top_k"),
    pytest.param('{"query_list": ["x"], "filters": ' + nested_text(500) + "}", "nested", id="filter-500-deep"),
    pytest.param('{"query_list": ["x"], "filters": ' + nested_text(100) + "}", "32 levels", id="filter-100-deep"),
])
def test_deploy_answers_malformed_json_with_400_and_one_log_line(deploy: Service, body: str, says: str) -> None:
    start = len(deploy.log.read_text())
    r = deploy.post(body)
    assert r.status_code == 400, r.text[:300]
    assert says in r.json()["error"]
    logged = deploy.log_since(start)
    assert "Traceback" not in logged and "ERROR" not in logged, logged[-2000:]
    lines = [line for line in logged.splitlines() if "/search" in line]
    assert len(lines) == 1 and lines[0].endswith(r.json()["error"]), logged


def test_deploy_drops_a_client_gone_mid_body_quietly(deploy: Service) -> None:
    start = len(deploy.log.read_text())
    with socket.create_connection(("127.0.0.1", deploy.port)) as s:
        s.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"query_list\": ")
        time.sleep(0.3)
    time.sleep(0.5)
    logged = deploy.log_since(start)
    assert "Traceback" not in logged and "ERROR" not in logged, logged[-2000:]
    lines = [line for line in logged.splitlines() if "/search" in line]
    assert len(lines) == 1 and lines[0].endswith("went away before its request was read; dropped"), logged
    assert deploy.post('{"query_list": ["what is BM25?"], "top_k": 1}').status_code == 200


# ---- MCP: in memory and `retriever serve --transport http` ---------------------------------------


@pytest.mark.parametrize(("tool", "args", "says"), [
    pytest.param("retriever_search", {"query_list": ["x"], "top_k": int("9" * 4000) ** 2}, "digits",
                 id="huge-top_k-classic"),
    pytest.param("search", {"query": "x", "top_k": int("9" * 4000) ** 2}, "digits", id="huge-top_k-agent"),
    pytest.param("retriever_search", {"query_list": ["x"], "top_k": 1, "filters": nested(100)}, "32 levels",
                 id="filter-100-deep-classic"),
    pytest.param("search", {"query": "x", "top_k": 1, "filters": nested(100)}, "32 levels",
                 id="filter-100-deep-agent"),
])
def test_mcp_in_memory_malformed_arguments_are_tool_errors(built: Any, tool: str, args: dict[str, Any],
                                                           says: str) -> None:
    mcp = MCP(built)
    error = mcp.error(tool, args)
    assert says in error and "internal" not in error, error


def test_mcp_over_http_a_deep_filter_is_a_tool_error(built_project: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(built_project), "--transport", "http",
                             "--host", "127.0.0.1", "--port", str(port), "--init", "--tools", "full"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    async def run() -> list[Any]:
        async with Client(f"http://127.0.0.1:{port}/mcp", timeout=30) as client:
            return [await client.call_tool(tool, args, raise_on_error=False) for tool, args in (
                ("retriever_search", {"query_list": ["x"], "top_k": 1, "filters": nested(100)}),
                ("search", {"query": "x", "top_k": 1, "filters": nested(100)}))]

    try:
        wait_http(f"http://127.0.0.1:{port}/mcp", proc, lambda: "", any_status=True)
        results = asyncio.run(run())
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    for result in results:
        assert result.is_error and "32 levels" in result.content[0].text, result.content[0].text
    assert b"Traceback" not in err, err.decode()[-2000:]


# ---- a file that is not UTF-8, and one that is not text ---------------------------------------------


@pytest.mark.parametrize("tool", ["retriever_ingest", "ingest_document"])
def test_a_latin1_file_is_read_in_its_charset_and_a_binary_one_is_named(built_project: Path, tmp_path: Path,
                                                                         tool: str) -> None:
    """Issue 42: Latin-1 text is read (charset-normalizer finds it), not refused; a file that is no
    text is refused naming the file, never the server's folder."""
    config = copy_built(built_project, tmp_path / "p")
    (config.parent / "notes").mkdir()
    (config.parent / "notes" / "latin1.txt").write_bytes(("Café au lait, crème brûlée. " * 20).encode("latin-1"))
    (config.parent / "notes" / "blob").write_bytes(b"\x00\x01binary\x00" * 64)
    mcp = MCP(engine_for(config))
    mcp.ok("retriever_init")
    ids = mcp.ok(tool, {"path": "notes/latin1.txt"})["ids"]
    assert ids[0] == "notes/latin1.txt:0" and all(i.startswith("notes/latin1.txt:") for i in ids)
    got = mcp.ok("retriever_get_neighbors", {"id": ids[0], "before": 0, "after": 0})
    assert "crème brûlée" in got["merged"]
    error = mcp.error(tool, {"path": "notes/blob"})
    assert "notes/blob" in error and "binary" in error and "internal" not in error, error
    assert str(config.parent) not in error, error


# ---- an LLM that answers with a filter 100 levels deep -------------------------------------------


def test_an_llm_filter_100_levels_deep_is_refused_with_a_warning(
        built_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLLM()
    fake.script.append({"content": json.dumps({"filter": nested(100)})})
    monkeypatch.setenv("RETRIEVER_LLM_API_KEY", "llm-test-key")
    config = {"base_url": fake.url, "model": "tiny-judge", "timeout": 5, "max_retries": 1}
    mcp = MCP(engine_for(copy_built(built_project, tmp_path / "p"), {"llm": config}))

    async def run() -> Any:
        async with Client(mcp.server, timeout=15) as client:  # the stock client; it hung to its timeout
            await client.call_tool("retriever_init", {})
            return await client.call_tool("retriever_infer_filters", {"query_list": "papers about cells"})

    try:
        out = asyncio.run(run()).structured_content
    finally:
        fake.stop()
    assert out["filters"] == [None]
    assert "invalid filter" in out["warnings"][0] and "32 levels" in out["warnings"][0], out["warnings"]


def test_the_filter_depth_bound_is_32_levels() -> None:
    from retriever.errors import InvalidInputError
    from retriever.filters import MAX_NESTING, matches, parse

    assert MAX_NESTING == 32 and matches(parse(nested(32)), "doc01", {})
    with pytest.raises(InvalidInputError, match="nested more than 32 levels"):
        parse(nested(33))
