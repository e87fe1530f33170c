"""NaN, Infinity and 1e400 (issue 45): refused in every input (a document's metadata, a filter's
value, a tool's number) with an error that says so, nothing stored; and replies are strict JSON
even where the operator's corpus file holds such a number. Raw JSON-RPC bodies over
`retriever serve --transport http` on 127.0.0.1 (a stock client would write NaN as null)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import BIN, MCP
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import engine_for, write_project

TOKEN = "finite-51be07"
ACCEPT = "application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def strict(text: str) -> Any:
    """JSON as the standard says it: NaN and Infinity are not numbers of it."""
    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


class Session:
    """One MCP session over HTTP, its requests written as raw bytes."""

    def __init__(self, url: str) -> None:
        self.url, self.ids = url, 1
        r = httpx.post(url, json=INIT, headers=self._headers(), timeout=30)
        assert r.status_code == 200, r.text[:300]
        self.session = r.headers["mcp-session-id"]
        self.post(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def _headers(self, **more: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}", "Accept": ACCEPT, "Content-Type": "application/json", **more}

    def post(self, body: bytes) -> httpx.Response:
        return httpx.post(self.url, content=body, timeout=60, headers=self._headers(
            **{"mcp-session-id": self.session, "mcp-protocol-version": "2025-03-26"}))

    def call(self, tool: str, arguments: str) -> tuple[bool, str]:
        """tools/call with `arguments` as raw JSON text; whether it failed, and its text."""
        self.ids += 1
        body = f'{{"jsonrpc": "2.0", "id": {self.ids}, "method": "tools/call", "params": {{"name": "{tool}", ' \
               f'"arguments": {arguments}}}}}'
        r = self.post(body.encode())
        data = next((line[5:] for line in r.text.splitlines() if line.startswith("data:")), r.text)
        reply = strict(data)
        if "error" in reply:
            return True, reply["error"]["message"]
        return reply["result"].get("isError", False), reply["result"]["content"][0]["text"]


@pytest.fixture(scope="module")
def session(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    folder = tmp_path_factory.mktemp("finite")
    shutil.copytree(built_project.parent, folder / "p")
    port, log = free_port(), (folder / "serve.log").open("w+")
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(folder / "p" / "parameter.yaml"),
                             "--tools", "full", "--transport", "http", "--port", str(port), "--init"], stderr=log,
                            env={**os.environ, "RETRIEVER_HTTP_TOKENS": TOKEN})
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_http(url, proc, lambda: log.seek(0) or log.read()[-3000:], timeout=120, any_status=True)
        yield Session(url)
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_non_finite_number_in_metadata_is_refused_and_nothing_stored(session: Session, number: str) -> None:
    failed, text = session.call("add_documents", f'{{"documents": [{{"id": "bad", "contents": "a bad number", '
                                                 f'"score": {{"v": [1, {number}]}}}}]}}')
    assert failed and "documents[0].score.v[1]: NaN and infinite numbers are refused" in text, text
    failed, text = session.call("get_document", '{"ids": ["bad"]}')
    assert not failed and strict(text)["missing"] == ["bad"]


@pytest.mark.parametrize("tool, arguments, where", [
    pytest.param("search", '{"query": "x", "filters": {"field": "meta.year", "operator": ">", "value": NaN}}',
                 "filters.value", id="filter-order"),
    pytest.param("search", '{"query": "x", "filters": {"field": "meta.year", "operator": "in", "value": [1e400]}}',
                 "filters.value[0]", id="filter-in"),
    pytest.param("retriever_search", '{"query_list": ["x"], "score_threshold": -Infinity}', "score_threshold",
                 id="tool-number"),
])
def test_a_non_finite_number_in_a_tool_argument_is_refused(session: Session, tool: str, arguments: str,
                                                            where: str) -> None:
    failed, text = session.call(tool, arguments)
    assert failed and ("NaN and infinite" in text or "finite number" in text) and where.split(".")[0] in text, text
    failed, text = session.call("search", '{"query": "earthquakes", "top_k": 1}')
    assert not failed and strict(text)["results"][0]["hits"]  # served after it


def test_replies_are_strict_json_where_the_corpus_holds_nan(tmp_path: Path) -> None:
    corpus = tmp_path / "nan.jsonl"
    corpus.write_text('{"id": "n1", "contents": "Kelp forests grow fast.", "v": NaN, "w": [Infinity]}\n'
                      '{"id": "n2", "contents": "Coral reefs bleach in warm water.", "v": 1}\n')
    mcp = MCP(engine_for(write_project(tmp_path / "p", corpus)))
    for tool, args in (("get_document", {"ids": ["n1"]}),
                       ("bm25_search", {"query_list": ["kelp forests"], "return_metadata": True})):
        if tool == "bm25_search":
            mcp.ok("retriever_init")
            mcp.ok("bm25_index")
        result = mcp.call(tool, args)
        assert not result.is_error, result.content[0].text
        out = strict(result.content[0].text)
        meta = out["documents"][0]["metadata"] if tool == "get_document" else out["ret_meta"][0][0]
        assert meta == {"v": None, "w": [None]}, meta
