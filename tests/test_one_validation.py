"""An agent `search` over MCP validates its arguments once (issue 46): the tool's signature checks them
(the stdio server's adapter; FastMCP's, which the streamable HTTP server and in-memory clients share),
the request is built from them without a second validation (mcp/core.py tool_function), and the agent's
request becomes its kind's request the same way (api/agent.py as_kind).

Counted: each validation of a request model (api/models.py Request: __init__, model_validate,
model_validate_json) and each validation by a function's signature (a TypeAdapter of a 'call' schema:
a tool function's arguments). model_construct is not a validation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from retriever.api import agent
from retriever.api.models import Request
from retriever.api.registry import TOOLS
from retriever.errors import InvalidInputError
from retriever.mcp import definitions
from retriever.mcp.core import served_tools, tool_function
from retriever.mcp.server import build_server
from retriever.mcp.stdio import StdioServer
from retriever.testing.projects import engine_for
from schema_strategies import JSON, from_schema

SEARCHES = [pytest.param({"query": "what causes earthquakes", "top_k": 2}, id="hybrid-default"),
            pytest.param({"query": ["what causes earthquakes", "volcano"], "mode": "bm25", "window": 1}, id="bm25"),
            pytest.param({"query": "what causes earthquakes", "mode": "dense", "offset": 1}, id="dense")]


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The validations of request arguments from now on, one entry each."""
    seen: list[str] = []
    for method in ("validate_python", "validate_json"):
        original = getattr(TypeAdapter, method)

        def adapted(self: TypeAdapter[Any], *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            schema = self.core_schema
            if (schema["schema"] if schema["type"] == "definitions" else schema)["type"] == "call":
                seen.append(f"signature of {getattr(self._type, '__name__', self._type)}")
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(TypeAdapter, method, adapted)
    init = Request.__init__

    def initialised(self: Request, *args: Any, **kwargs: Any) -> None:
        seen.append(f"{type(self).__name__}()")
        init(self, *args, **kwargs)

    monkeypatch.setattr(Request, "__init__", initialised)
    for method in ("model_validate", "model_validate_json"):
        original = getattr(Request, method).__func__

        def validated(cls: type[Request], *args: Any, _original: Any = original, _name: str = method,
                      **kwargs: Any) -> Any:
            seen.append(f"{cls.__name__}.{_name}")
            return _original(cls, *args, **kwargs)

        monkeypatch.setattr(Request, method, classmethod(validated))
    return seen


@pytest.mark.parametrize("arguments", SEARCHES)
def test_an_agent_search_over_stdio_validates_its_arguments_once(built_project: Path, arguments: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    engine = engine_for(built_project)
    engine.init()
    written: list[dict[str, Any]] = []

    class Out:
        def write(self, data: bytes) -> int:
            written.extend(json.loads(line) for line in data.splitlines())
            return len(data)

        def flush(self) -> None:
            pass

    server = StdioServer(engine, served_tools(engine, profile="agent"), Out())  # type: ignore[arg-type]

    async def call(rid: int) -> None:
        await server.handle(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                        "params": {"name": "search", "arguments": arguments}}).encode())
        await asyncio.gather(*server.running.values())

    async def run() -> list[str]:
        await call(1)  # warm: the adapter and the models are built on first use
        seen = counting(monkeypatch)
        await call(2)
        return seen

    seen = asyncio.run(run())
    assert seen == ["signature of search"]
    assert [m["id"] for m in written] == [1, 2] and not written[1]["result"]["isError"], written[1]
    assert written[1]["result"]["structuredContent"]["results"][0]["hits"]


@pytest.mark.parametrize("arguments", SEARCHES)
def test_an_agent_search_through_fastmcp_validates_its_arguments_once(built_project: Path, arguments: dict[str, Any],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """FastMCP's server, as the streamable HTTP transport serves it, with its in-memory client."""
    engine = engine_for(built_project)
    engine.init()
    server = build_server(engine, profile="agent")

    async def run() -> tuple[list[str], Any]:
        async with Client(server) as client:
            await client.call_tool("search", arguments)  # warm
            seen = counting(monkeypatch)
            return seen, await client.call_tool("search", arguments)

    seen, result = asyncio.run(run())
    assert seen == ["signature of search"]
    assert not result.is_error and result.structured_content["results"][0]["hits"]


# ---- the request built without a second validation is the one a validation gives -----------------

def _finished(work: Coroutine[Any, Any, Any]) -> Any:
    """The value of a coroutine that awaits nothing (the tool function serving an echo)."""
    try:
        work.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the tool function awaited something")


def _outcome(validate: Any) -> Any:
    try:
        return validate()
    except (ValidationError, InvalidInputError) as e:
        return type(e).__name__


_SCHEMAS = definitions.load()
_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


async def _echo(request: Request) -> Request:
    return request


# anything at all under a parameter's name: NaN and infinities too, nested ones included
_FLOATS = st.floats() | st.sampled_from([float("nan"), float("inf")])
_ANYTHING = JSON | _FLOATS | st.lists(_FLOATS, max_size=2) | st.dictionaries(st.text(max_size=4), _FLOATS, max_size=2)


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_the_one_validation_gives_what_the_model_gives(tool: Any, data: st.DataObject) -> None:
    """Every tool: the request its function builds from arguments its signature validated (no second
    validation) equals the model's own validation of them, and a refusal is a refusal of the same kind."""
    schema = _SCHEMAS[tool.name]["inputSchema"]
    names = sorted(schema.get("properties", {})) + ["bogus"]
    valid, changed = data.draw(from_schema(schema)), data.draw(st.dictionaries(st.sampled_from(names), _ANYTHING,
                                                                                max_size=2))
    arguments = valid | changed  # valid ones, or with a value or two of anything (or an unknown argument)
    if tool.name not in _ADAPTERS:
        _ADAPTERS[tool.name] = TypeAdapter(tool_function(tool.name, tool.request, _echo))
    adapter = _ADAPTERS[tool.name]
    built = _outcome(lambda: _finished(adapter.validate_python(arguments)))
    assert built == _outcome(lambda: tool.request.model_validate(arguments)), arguments


def _edges() -> list[dict[str, Any]]:
    """The agent's arguments at each end of every range its schema gives, and of each mode."""
    props = agent.SearchRequest.model_json_schema()["properties"]
    out: list[dict[str, Any]] = [{"query": ["", "a"], "mode": mode, "filters": {"field": "id", "operator": "==",
                                  "value": 1.5}, "collection": ""} for mode in props["mode"]["enum"]]
    for name, prop in props.items():
        out += [{"query": "q", name: s[end]} for s in (prop, *prop.get("anyOf", ())) for end in ("minimum", "maximum")
                if end in s]
    return out


@pytest.mark.parametrize("arguments", _edges())
def test_the_agent_requests_kind_request_passes_its_own_validation(arguments: dict[str, Any]) -> None:
    """as_kind builds the kind's request from the agent's validated values without validating them
    again: validated as the kind's request, they give the same request (its ranges are no narrower)."""
    kind = agent.as_kind(agent.SearchRequest.model_validate(arguments))
    assert type(kind).model_validate(kind.model_dump()) == kind

