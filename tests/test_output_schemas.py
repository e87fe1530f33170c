"""Issue 44, the MCP surface: every structured reply of every listed agent tool validates against
the outputSchema its tools/list declares (jsonschema, over a real client on FastMCP's server and
on our stdio server), and what a client is told names only what can work with the configuration:
the instructions name web_search only where it is listed, `mode` offers sparse only where
parameter.yaml names a sparse model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import BIN, copy_built
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from retriever.mcp.core import served_tools
from retriever.mcp.server import build_server
from retriever.testing.fake_web import FakeProvider, start, stop
from retriever.testing.projects import engine_for

Q = "what causes earthquakes"
NO_MATCH = {"field": "meta.nope", "operator": "==", "value": 1}  # a filter no document can match: a warning
# Every agent tool, with arguments that work (several calls where the reply has optional parts).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": Q}),
    ("search", {"query": [Q, "black holes"], "mode": "bm25", "top_k": 2, "filters": NO_MATCH}),
    ("search", {"query": Q, "mode": "dense", "window": 1, "top_k": 50}),
    ("get_document", {"ids": ["doc11", "nope"], "around": 1}),
    ("add_documents", {"documents": [{"id": "n1", "contents": "Zanzibar spice markets", "year": 2021}]}),
    ("ingest_document", {"text": "# Kelp\n\nKelp forests grow fast.", "format": "markdown", "source_id": "kelp"}),
    ("ingest_document", {"text": "Kelp forests grow very fast.", "source_id": "kelp"}),  # replaces it
    ("delete_documents", {"ids": ["n1", "never-there"]}),
    ("list_collections", {}),
    ("web_search", {"query": ["tides", "moons"], "top_k": 2}),
]


def configured(built_project: Path, dest: Path, **changes: Any) -> Path:
    config = copy_built(built_project, dest)
    cfg = yaml.safe_load(config.read_text())
    cfg.update(changes)
    config.write_text(yaml.safe_dump(cfg))
    return config


@pytest.fixture
def web() -> Iterator[FakeProvider]:
    fake = start(FakeProvider("tavily", "tvly-operator-key"))
    yield fake
    stop(fake)


@pytest.fixture
def with_web(built_project: Path, tmp_path: Path, web: FakeProvider) -> Path:
    """The shipped parameter.yaml over a built copy of the sample corpus, with a web provider (a
    local server speaking Tavily's wire format), so that every agent tool is listed."""
    section = {"api_key": web.key, "base_url": web.base_url, "timeout": 5, "max_retries": 0}
    return configured(built_project, tmp_path / "p", websearch_backend="tavily",
                      websearch_backend_configs={"tavily": section})


async def _replies(client: Client) -> tuple[dict[str, dict[str, Any] | None], list[tuple[str, Any]]]:
    listed = {t.name: t.output_schema for t in await client.list_tools()}
    replies = [(name, await client.call_tool_mcp(name, arguments)) for name, arguments in CALLS]
    return listed, replies


def _transport(kind: str, config: Path) -> Any:
    if kind == "memory":
        return build_server(engine_for(config))
    return StdioTransport(command=str(BIN / "retriever"), args=["serve", "--config", str(config)])


def schema_problems(listed: dict[str, dict[str, Any] | None], replies: list[tuple[str, Any]]) -> list[str]:
    """What in `replies` does not match the outputSchema its tool lists: an error or a missing
    structured reply, a value jsonschema refuses, a key the schema does not name."""
    problems = []
    for name, result in replies:
        schema = listed[name]
        if result.is_error or schema is None or result.structured_content is None:
            problems.append(f"{name}: error {result.is_error}, schema {schema is not None}, structured "
                            f"{result.structured_content is not None}: {result.content[0].text[:300]}")
            continue
        jsonschema.Draft202012Validator.check_schema(schema)
        problems += [f"{name}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
                     for e in jsonschema.Draft202012Validator(schema).iter_errors(result.structured_content)]
        extra = set(result.structured_content) - set(schema.get("properties", {}))
        if extra:  # allowed by the schema (no additionalProperties: false), but a typed client drops them
            problems.append(f"{name}: keys outside outputSchema: {sorted(extra)}")
    return problems


def _called(server: Any) -> tuple[dict[str, dict[str, Any] | None], list[tuple[str, Any]]]:
    async def run() -> tuple[dict[str, dict[str, Any] | None], list[tuple[str, Any]]]:
        async with Client(server, timeout=120) as client:
            return await _replies(client)

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["memory", "stdio"])
def test_every_structured_reply_matches_its_declared_schema(with_web: Path, kind: str) -> None:
    listed, replies = _called(_transport(kind, with_web))
    assert set(listed) == {name for name, _ in CALLS}, "a listed tool without a call here, or a call of none"
    assert schema_problems(listed, replies) == []


def test_the_check_catches_a_declared_schema_off_its_reply(with_web: Path) -> None:
    """The check above, shown catching a planted bug: ingest_document declaring the keys it
    declared before issue 44 (added, replaced, documents) while its reply has source_id and ids."""
    engine = engine_for(with_web)
    tools = [replace(t, output_schema={"type": "object", "properties": {k: {"type": "integer"} for k in (
        "added", "replaced", "documents")}}) if t.name == "ingest_document" else t for t in served_tools(engine)]
    problems = schema_problems(*_called(build_server(engine, tools=tools)))
    assert problems and all(p.startswith("ingest_document: keys outside outputSchema") for p in problems)
    assert "'ids'" in problems[0] and "'source_id'" in problems[0]


async def _surface(client: Client) -> tuple[str | None, list[str]]:
    tools = {t.name: t for t in await client.list_tools()}
    return client.instructions, tools["search"].input_schema["properties"]["mode"]["enum"]


def _listed(kind: str, config: Path) -> tuple[str | None, list[str]]:
    async def run() -> tuple[str | None, list[str]]:
        async with Client(_transport(kind, config), timeout=120) as client:
            return await _surface(client)

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["memory", "stdio"])
def test_the_shipped_configuration_is_told_only_what_works(built_project: Path, tmp_path: Path, kind: str) -> None:
    """No provider key: web_search is not listed, so the instructions do not name it; no sparse
    model: `mode` does not offer sparse."""
    instructions, modes = _listed(kind, configured(built_project, tmp_path / "p"))
    assert instructions is not None and "search" in instructions and "web_search" not in instructions
    assert modes == ["hybrid", "dense", "bm25"]


@pytest.mark.parametrize("kind", ["memory", "stdio"])
def test_a_configured_server_names_what_it_has(with_web: Path, tmp_path: Path, kind: str) -> None:
    config = yaml.safe_load(with_web.read_text())
    config["sparse"] = {**config.get("sparse", {}), "model_name_or_path": str(tmp_path / "some-splade")}
    with_web.write_text(yaml.safe_dump(config))
    instructions, modes = _listed(kind, with_web)
    assert instructions is not None and "web_search" in instructions
    assert modes == ["hybrid", "dense", "bm25", "sparse"]
