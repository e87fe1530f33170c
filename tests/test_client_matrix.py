"""Issue 44, the client matrix: clients nobody here wrote connect to our servers, list the agent
tools and call every one of them, over stdio (`retriever serve`, our own stdio server) and over
streamable HTTP with a bearer token (`retriever serve --transport http`, RETRIEVER_HTTP_TOKENS).

The clients: the official MCP Python SDK 2.x (`mcp.client.client.Client`, in .venv), the SDK 1.x
(`ClientSession`, in its own venv .cache/mcp1-venv made by `make mcp1-venv`, run as a subprocess:
tests/mcp_sdk1_client.py), FastMCP's `Client`, LlamaIndex's MCP tools (`llama-index-tools-mcp`: `BasicMCPClient` under
`McpToolSpec`'s FunctionTools, which opens one session per call) and Haystack's (`mcp-haystack`:
`MCPToolset`'s Tools). Each
reply must be a success whose structured content validates against the outputSchema the client
was given (jsonschema) and carries the work done (hits, the document asked for, the chunk ids).
Real server processes on 127.0.0.1 and real clients; a web provider is a local server speaking
Tavily's wire format (retriever.testing.fake_web), so that web_search is listed too."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from conftest import BIN, copy_built
from retriever.testing.fake_web import FakeProvider, start, stop
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import ROOT

Q = "what causes earthquakes"
TOKEN = "matrix-4f8e2a91"
SDK1_PYTHON = ROOT / ".cache" / "mcp1-venv" / "bin" / "python"
CALLS: list[tuple[str, dict[str, Any]]] = [  # every tool of the agent profile, in an order that builds on itself
    ("list_collections", {}),
    ("search", {"query": Q, "top_k": 3}),
    ("get_document", {"ids": ["doc11"]}),
    ("add_documents", {"documents": [{"id": "m1", "contents": "Zanzibar spice markets", "year": 2021}]}),
    ("ingest_document", {"text": "# Kelp\n\nKelp forests grow fast.", "format": "markdown", "source_id": "kelp"}),
    ("delete_documents", {"ids": ["m1"]}),
    ("web_search", {"query": "tides", "top_k": 2}),
]
AGENT_TOOLS = {name for name, _ in CALLS}
# the revision each client negotiates, the same over both transports (LlamaIndex's adapter does not say)
PROTOCOL = {"sdk1": "2025-11-25", "sdk2": "2026-07-28", "fastmcp": "2026-07-28", "llamaindex": None, "haystack": None}
# what each reply must carry beyond its schema: the work was done
DONE: dict[str, Callable[[dict[str, Any]], bool]] = {
    "list_collections": lambda s: bool(s["collections"]),
    "search": lambda s: bool(s["results"][0]["hits"]),
    "get_document": lambda s: [d["id"] for d in s["documents"]] == ["doc11"],
    "add_documents": lambda s: s["added"] == 1,
    "ingest_document": lambda s: s["source_id"] == "kelp" and bool(s["ids"]),
    "delete_documents": lambda s: s["deleted"] == 1 and not s.get("not_found"),
    "web_search": lambda s: bool(s["results"][0]["hits"]),
}


class Endpoint:
    """Where a client connects: a `retriever serve` command line (stdio) or a URL and its token."""

    def __init__(self, stdio: list[str] | None = None, url: str | None = None) -> None:
        self.stdio, self.url, self.token = stdio, url, TOKEN

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _reply(name: str, result: Any) -> dict[str, Any]:
    return {"name": name, "is_error": result.is_error, "structured": result.structured_content,
            "text": "".join(getattr(c, "text", "") for c in result.content)}


async def _sdk2(at: Endpoint, calls: list[tuple[str, dict[str, Any]]] = CALLS) -> dict[str, Any]:
    import httpx2
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=at.headers, timeout=120) as http:
        server: Any = (StdioServerParameters(command=at.stdio[0], args=at.stdio[1:]) if at.stdio
                       else streamable_http_client(str(at.url), http_client=http))
        async with Client(server) as client:
            tools = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            replies = [_reply(name, await client.call_tool(name, arguments)) for name, arguments in calls]
            return {"protocol": client.protocol_version, "tools": tools, "calls": replies}


async def _fastmcp(at: Endpoint) -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

    transport: Any = (StdioTransport(command=at.stdio[0], args=at.stdio[1:]) if at.stdio
                      else StreamableHttpTransport(str(at.url), auth=at.token))
    async with Client(transport, timeout=120) as client:
        tools = {t.name: t.output_schema for t in await client.list_tools()}
        calls = [_reply(name, await client.call_tool_mcp(name, arguments)) for name, arguments in CALLS]
        return {"protocol": client.protocol_version, "tools": tools, "calls": calls}


async def _llamaindex(at: Endpoint) -> dict[str, Any]:
    """LlamaIndex's FunctionTools over BasicMCPClient (a session per call: over stdio a server per call)."""
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    client = (BasicMCPClient(at.stdio[0], args=at.stdio[1:], timeout=120) if at.stdio
              else BasicMCPClient(str(at.url), headers=at.headers, timeout=120))
    tools = {t.metadata.name: t for t in await McpToolSpec(client).to_tool_list_async()}
    schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
    assert set(tools) == set(schemas)
    calls = []
    for name, arguments in CALLS:
        output = await tools[name].acall(**arguments)  # a ToolOutput; raw_output is the CallToolResult
        calls.append(_reply(name, output.raw_output))
    return {"protocol": None, "tools": schemas, "calls": calls}


def _haystack(at: Endpoint) -> dict[str, Any]:
    """Haystack's MCPToolset (mcp-haystack): its Tools' invoke returns the CallToolResult as JSON. The
    outputSchemas, which a Haystack Tool does not carry, come from the SDK 2.x's listing of the same server."""
    from haystack_integrations.tools.mcp import MCPToolset, StdioServerInfo, StreamableHttpServerInfo

    info: Any = (StdioServerInfo(command=at.stdio[0], args=at.stdio[1:]) if at.stdio
                 else StreamableHttpServerInfo(url=str(at.url), token=at.token, timeout=120))
    toolset = MCPToolset(info, eager_connect=True, invocation_timeout=120)
    try:
        tools = {t.name: t for t in toolset}
        calls = []
        for name, arguments in CALLS:
            result = json.loads(tools[name].invoke(**arguments))  # an error reply raises MCPInvocationError
            calls.append({"name": name, "is_error": bool(result.get("isError")), "structured": result.get(
                "structuredContent"), "text": "".join(c.get("text", "") for c in result["content"])})
    finally:
        toolset.close()
    schemas = asyncio.run(_sdk2(at, calls=[]))["tools"]
    assert set(schemas) == set(tools)
    return {"protocol": None, "tools": schemas, "calls": calls}


def _sdk1(at: Endpoint) -> dict[str, Any]:
    plan = {"calls": CALLS, **({"stdio": at.stdio} if at.stdio else {"url": at.url, "token": at.token})}
    done = subprocess.run([str(SDK1_PYTHON), str(Path(__file__).with_name("mcp_sdk1_client.py")), json.dumps(plan)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


CLIENTS: dict[str, Callable[[Endpoint], dict[str, Any]]] = {
    "sdk1": _sdk1,
    "sdk2": lambda at: asyncio.run(_sdk2(at)),
    "fastmcp": lambda at: asyncio.run(_fastmcp(at)),
    "llamaindex": lambda at: asyncio.run(_llamaindex(at)),
    "haystack": _haystack,
}


@pytest.fixture
def config(built_project: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the built sample corpus (the calls write to it), with a web provider."""
    web = start(FakeProvider("tavily", "tvly-matrix-key"))
    path = copy_built(built_project, tmp_path / "p")
    cfg = yaml.safe_load(path.read_text())
    cfg.update(websearch_backend="tavily", websearch_backend_configs={"tavily": {
        "api_key": web.key, "base_url": web.base_url, "timeout": 5, "max_retries": 0}})
    path.write_text(yaml.safe_dump(cfg))
    yield path
    stop(web)


@pytest.fixture
def endpoint(request: pytest.FixtureRequest, config: Path, tmp_path: Path) -> Iterator[Endpoint]:
    serve = [str(BIN / "retriever"), "serve", "--config", str(config)]
    if request.param == "stdio":
        yield Endpoint(stdio=serve)
        return
    port, log = free_port(), tmp_path / "serve.log"
    proc = subprocess.Popen([*serve, "--transport", "http", "--port", str(port)], stderr=log.open("w"),
                            env={**os.environ, "RETRIEVER_HTTP_TOKENS": TOKEN})
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_http(url, proc, lambda: log.read_text()[-3000:], any_status=True)
        assert httpx.post(url, json={}, timeout=30).status_code == 401, "the server must refuse a call without the token"
        yield Endpoint(url=url)
    finally:
        proc.terminate()
        proc.wait(30)
    assert TOKEN not in log.read_text()


def problems(seen: dict[str, Any]) -> list[str]:
    """What a client saw that is not the agent profile answering: a tool missing or extra, an error,
    a reply without structured content, off its outputSchema or without the work done."""
    found = [f"tools listed: {sorted(seen['tools'])}"] if set(seen["tools"]) != AGENT_TOOLS else []
    for reply in seen["calls"]:
        name, structured, schema = reply["name"], reply["structured"], seen["tools"].get(reply["name"])
        if reply["is_error"] or structured is None or schema is None or not reply["text"]:
            found.append(f"{name}: error {reply['is_error']}, structured {structured is not None}, "
                         f"schema {schema is not None}: {reply['text'][:300]}")
            continue
        found += [f"{name}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in jsonschema.Draft202012Validator(schema).iter_errors(structured)]
        if extra := set(structured) - set(schema.get("properties", {})):  # a typed client drops them
            found.append(f"{name}: keys outside outputSchema: {sorted(extra)}")
        if not found and not DONE[name](structured):
            found.append(f"{name}: the reply does not show the work done: {json.dumps(structured)[:300]}")
    return found


@pytest.mark.parametrize("endpoint", ["stdio", "http"], indirect=True)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_client_lists_and_calls_every_agent_tool(client: str, endpoint: Endpoint) -> None:
    if client == "sdk1" and not SDK1_PYTHON.exists():
        if os.environ.get("CI"):  # CI makes the venv (.ci/run's phase): its absence there is a failure
            pytest.fail(f"the MCP SDK 1.x venv is absent ({SDK1_PYTHON}): run `make mcp1-venv`")
        pytest.skip(f"the MCP SDK 1.x venv is absent ({SDK1_PYTHON}): `make mcp1-venv` makes it (make test and CI do)")
    seen = CLIENTS[client](endpoint)
    assert problems(seen) == []
    assert seen["protocol"] == PROTOCOL[client]
    if client == "sdk1":
        assert seen["sdk"].startswith("1."), seen["sdk"]
