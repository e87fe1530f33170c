"""The server as a subprocess: over stdio (stdout carries only the protocol) and streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BIN
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from retriever.testing.projects import write_project

Q = "what causes earthquakes"


def test_stdio_plain_serve_is_the_agent_face(built_project: Path) -> None:
    """A plain `retriever serve` (no flags) over stdio: the agent profile's tools, our version,
    instructions for that profile, and `search` answering without an init call."""
    async def run() -> tuple:
        transport = StdioTransport(command=str(BIN / "retriever"), args=["serve", "--config", str(built_project)])
        async with Client(transport, timeout=120) as client:
            init = (client.server_info, client.instructions)
            tools = {t.name for t in await client.list_tools()}
            hits = await client.call_tool("search", {"query": Q, "top_k": 2})
            return init, tools, hits.structured_content

    init, tools, out = asyncio.run(run())
    from retriever import package_version as server_version

    assert tools == {"search", "get_document", "add_documents", "ingest_document", "delete_documents",
                     "list_collections"}  # web_search: no provider key here
    info, instructions = init
    assert info.version == server_version() != "0+unknown"
    assert "retriever_init" not in instructions and "search" in instructions
    assert out["results"][0]["hits"][0]["id"] == "doc11"


def test_stdio_full_profile_with_the_fastmcp_client(built_project: Path) -> None:
    async def run() -> dict:
        transport = StdioTransport(command=str(BIN / "retriever"),
                                   args=["serve", "--config", str(built_project), "--tools", "full"])
        async with Client(transport, timeout=120) as client:
            tools = {t.name for t in await client.list_tools()}
            assert {"retriever_init", "retriever_embed", "retriever_index", "retriever_search",
                    "retriever_batch_search", "bm25_index", "bm25_search"} <= tools
            await client.call_tool("retriever_init", {})
            dense = await client.call_tool("retriever_search", {"query_list": [Q], "top_k": 2})
            sparse = await client.call_tool("bm25_search", {"query_list": [Q], "top_k": 2})
            return {"dense": dense.structured_content, "bm25": sparse.structured_content}

    out = asyncio.run(run())
    assert out["dense"]["ret_ids"][0][0] == "doc11"
    assert out["bm25"]["ret_ids"][0][0] == "doc11"


def _rpc(id_: int | None, method: str, params: dict) -> bytes:
    msg = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        msg["id"] = id_
    return (json.dumps(msg) + "\n").encode()


@pytest.mark.slow  # seconds: a subprocess, a crash loop or a SciFact pass; the full suite runs it
def test_stdout_carries_nothing_but_json_rpc(built_project: Path, tmp_path: Path) -> None:
    """Raw stdio: every byte on stdout is a JSON-RPC message, while logs go to stderr."""
    stderr = (tmp_path / "stderr.log").open("w+b")
    proc = subprocess.Popen(
        [str(BIN / "retriever"), "serve", "--config", str(built_project), "--tools", "full"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
    )
    messages = []

    def ask(id_: int | None, method: str, params: dict) -> None:
        proc.stdin.write(_rpc(id_, method, params))
        proc.stdin.flush()
        while id_ is not None:
            line = proc.stdout.readline()
            assert line, (tmp_path / "stderr.log").read_text()[-2000:]
            messages.append(json.loads(line))  # fails on any stray non-JSON line
            if messages[-1].get("id") == id_:
                return

    try:
        ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "raw", "version": "0"}})
        ask(None, "notifications/initialized", {})
        ask(2, "tools/call", {"name": "retriever_init", "arguments": {}})
        ask(3, "tools/call", {"name": "retriever_search", "arguments": {"query_list": Q, "top_k": 1}})
        ask(4, "tools/call", {"name": "bm25_search", "arguments": {"query_list": Q, "top_k": 0}})
        proc.stdin.close()
        rest = proc.stdout.read()
        proc.wait(60)
    finally:
        proc.kill()
    err = (tmp_path / "stderr.log").read_bytes()
    messages += [json.loads(line) for line in rest.decode().splitlines()]
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert by_id[3]["result"]["structuredContent"]["ret_ids"] == [["doc11"]]
    assert by_id[4]["result"]["isError"] is True
    assert b"Loading" in err or b"INFO" in err  # the logs went to stderr


def test_stdio_calls_sent_during_init_wait_and_are_answered(built_project: Path) -> None:
    """`serve --init` opens the collection on a thread while the MCP layer is imported: requests
    written at once, before it could have finished, wait for it and are answered from it (the
    search without a retriever_init call, so from the session the start-up opened)."""
    requests = (_rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "raw", "version": "0"}})
                + _rpc(None, "notifications/initialized", {})
                + _rpc(2, "tools/call", {"name": "bm25_search", "arguments": {"query_list": Q, "top_k": 1}})
                + _rpc(3, "tools/call", {"name": "retriever_search", "arguments": {"query_list": Q, "top_k": 1}}))
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(built_project), "--init", "--tools",
                             "full"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(requests)
        proc.stdin.flush()
        by_id: dict = {}
        while not {2, 3} <= by_id.keys():
            line = proc.stdout.readline()
            assert line, proc.stderr.read().decode()[-2000:]
            message = json.loads(line)
            by_id[message.get("id")] = message
        proc.stdin.close()
        proc.wait(60)
    finally:
        proc.kill()
    assert by_id[1]["result"]["serverInfo"]["name"] == "retriever"
    assert by_id[2]["result"]["structuredContent"]["ret_ids"] == [["doc11"]], by_id[2]
    assert by_id[3]["result"]["structuredContent"]["ret_ids"] == [["doc11"]], by_id[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(built_project: Path):
    port = _free_port()
    proc = subprocess.Popen(
        [str(BIN / "retriever"), "serve", "--config", str(built_project), "--transport", "http",
         "--host", "127.0.0.1", "--port", str(port), "--init", "--tools", "full"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode()[-2000:])
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(30)


def test_streamable_http_on_localhost(http_server: str) -> None:
    async def run() -> dict:
        async with Client(http_server, timeout=120) as client:
            batch = await client.call_tool(
                "retriever_batch_search", {"batch_query_list": [[Q], ["black holes"]], "top_k": 1})
            return batch.structured_content

    out = asyncio.run(run())
    assert out["ret_ids_ls"] == [[["doc11"]], [["doc07"]]]


BAD_CONFIGS = [
    pytest.param({"corpus_path": "no-such-corpus.jsonl"}, "no-such-corpus.jsonl", id="missing-corpus"),
    pytest.param({"topk": 3}, "topk", id="unknown-key"),
]


@pytest.mark.parametrize(("edit", "says"), BAD_CONFIGS)
def test_stdio_start_up_failure_reaches_the_client(tmp_path: Path, edit: dict, says: str) -> None:
    """`serve --init` with a bad config: the client's initialize is answered with the config problem
    (it used to see only "Connection closed", the message on stderr alone), whether it is found
    reading the YAML (unknown-key) or by the init on its start-up thread (missing-corpus)."""
    config = write_project(tmp_path / "p", **edit)

    async def run() -> None:
        transport = StdioTransport(command=str(BIN / "retriever"), args=["serve", "--config", str(config), "--init"])
        async with Client(transport, timeout=60):
            pass

    with pytest.raises(Exception) as raised:  # noqa: PT011 - the client's own exception type; its text is the point
        asyncio.run(run())
    assert says in str(raised.value), repr(raised.value)


@pytest.mark.parametrize(("edit", "says"), BAD_CONFIGS)
def test_stdio_start_up_failure_answers_then_exits_non_zero(tmp_path: Path, edit: dict, says: str) -> None:
    config = write_project(tmp_path / "p", **edit)
    init = _rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "raw", "version": "0"}})
    done = subprocess.run([str(BIN / "retriever"), "serve", "--config", str(config), "--init"], input=init,
                          capture_output=True, timeout=60)
    reply = json.loads(done.stdout.decode().splitlines()[0])
    assert reply["id"] == 1 and says in reply["error"]["message"], reply
    assert done.returncode != 0 and says in done.stderr.decode()
