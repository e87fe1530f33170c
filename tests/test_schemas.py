"""Every tool's schema as an agent reads it from `tools/list`: names, parameters, descriptions,
annotations; compared with the snapshot in tests/tool_schemas.json (regenerate it with
`python tests/test_schemas.py` after a deliberate change, and review the diff; it also
writes servers/retriever/mcp/tools.json, the same tools as the stdio server lists them)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from retriever import Retriever
from retriever.api.registry import PROFILES, TOOLS
from retriever.config import Config
from retriever.mcp.server import build_server
from retriever.search import MODES

SNAPSHOT = Path(__file__).with_name("tool_schemas.json")
WRITES = {"retriever_ingest", "retriever_embed", "retriever_index", "bm25_index", "sparse_index", "retriever_add", "retriever_delete",
          "retriever_build_image_corpus", "retriever_extract_triples", "add_documents", "ingest_document",
          "delete_documents", "build", "sync_sources"}


def engine(ultrarag: bool = False, everything: bool = False, **cfg: Any) -> Retriever:
    """An engine as `serve` makes it; `everything`: every tool's needs met (an llm section, keys
    from calls, a sparse model), so every tool is listed."""
    if everything:
        cfg |= {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}, "security": {"client_endpoints": True},
                "sparse": {"model_name_or_path": "splade"}, "sources": [{"path": "docs"}]}
    if ultrarag:
        cfg |= {"security": {"client_endpoints": True}}
    e = Retriever(Config.model_validate(cfg))
    e.ultrarag = ultrarag or everything
    return e


def listing(profile: str = "full", read_only: bool | None = None, e: Retriever | None = None) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        server = build_server(e or engine(everything=True), read_only=read_only, profile=profile)
        async with Client(server) as client:
            return {t.name: {"title": t.title, "description": t.description,
                             "annotations": t.annotations.model_dump(exclude_none=True) if t.annotations else None,
                             "input_schema": t.input_schema, "output_schema": t.output_schema}
                    for t in await client.list_tools()}

    return asyncio.run(run())


def test_every_parameter_is_described() -> None:
    tools = listing() | listing("ultrarag")  # full has every tool but UltraRAG's build
    params = [(name, p, schema) for name, t in tools.items() for p, schema in t["input_schema"]["properties"].items()]
    assert set(tools) == {t.name for t in TOOLS} and len(params) > 100
    assert [(n, p) for n, p, s in params if not s.get("description")] == []


def test_annotations_say_what_each_tool_does() -> None:
    tools = listing()
    for name, t in tools.items():
        a = t["annotations"]
        assert t["title"] and a is not None, name
        if "search" in name and name not in ("retriever_agentic_search",) or "list_collections" in name:
            assert a["read_only_hint"] is True and a["destructive_hint"] is False, name
        assert a["idempotent_hint"] is True, name
    # a tool that replaces or deletes documents or outputs says so
    assert {n for n, t in tools.items() if t["annotations"]["destructive_hint"]} == WRITES - {"build"}  # not in full
    # one that calls a server elsewhere (a web provider, an LLM, a deployed retriever) says so
    assert {n for n, t in tools.items() if t["annotations"].get("open_world_hint")} == {
        n for n in tools if "websearch" in n or n.startswith(("retriever_exa", "retriever_tavily", "retriever_zhipuai"))
    } | {"retriever_deploy_search", "web_search", "retriever_rewrite_query", "retriever_agentic_search",
         "retriever_extract_triples", "retriever_infer_filters"}


def test_read_only_serves_no_write_tool() -> None:
    full, read_only = set(listing()), set(listing(read_only=True))
    assert full - read_only == WRITES - {"build"}  # full has every tool but UltraRAG's build
    assert "build" in listing("ultrarag") and "build" not in listing("ultrarag", read_only=True)


def test_read_only_from_the_yaml() -> None:
    e = engine(security={"read_only": True})
    for profile in PROFILES:
        assert not WRITES & set(listing(profile, e=e)), profile


def test_modes_come_from_the_registry() -> None:
    tools = listing()
    for name in ("retriever_multi_query_search", "search"):
        assert tools[name]["input_schema"]["properties"]["mode"]["enum"] == list(MODES)


def test_every_mode_has_a_request_and_a_search() -> None:
    """A kind of search/kinds.py is a mode every face offers: its request (api/models.py
    SEARCH_REQUESTS, derived from the kind's record) asks for that kind, which api/hits.py searches."""
    from retriever.api.models import SEARCH_REQUESTS

    assert set(SEARCH_REQUESTS) == set(MODES)
    assert all(SEARCH_REQUESTS[mode].kind == mode for mode in MODES)


def test_every_agent_tool_has_an_output_schema() -> None:
    tools = listing("agent", e=engine(everything=True))
    assert len(tools) <= 8 and all(t["output_schema"] for t in tools.values())


def test_the_agent_profile_fits_its_token_budget() -> None:
    """At most 8 tools and 4,000 o200k tokens of tools/list (bench/agent_surface.py reports it)."""
    import bpe_openai

    async def run() -> list[dict[str, Any]]:
        async with Client(build_server(engine(everything=True), profile="agent")) as client:
            return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in await client.list_tools()]

    tools = asyncio.run(run())
    tokens = len(bpe_openai.get_encoding("o200k_base").encode(json.dumps(tools, separators=(",", ":"))))
    assert len(tools) <= 8 and tokens <= 4000, (len(tools), tokens)


def test_the_stdio_servers_definitions_are_fastmcps_listing() -> None:
    """mcp/tools.json (what the stdio server lists) is FastMCP's listing of every registry tool."""
    from retriever.mcp.definitions import HOW, load
    from retriever.mcp.tools import listed

    assert load() == listed(), f"the tools' definitions changed: run `{HOW}` (or `python {__file__}`)"


def snapshot() -> dict[str, Any]:
    """What each face's caller reads: the agent profile with the shipped settings, and UltraRAG's
    (as `serve --ultrarag` lists it: no llm section, keys from its calls)."""
    return {"agent": listing("agent", e=engine()), "ultrarag": listing("ultrarag", e=engine(ultrarag=True))}


def test_the_schemas_match_the_snapshot() -> None:
    if not SNAPSHOT.is_file():
        pytest.fail(f"no snapshot: run `python {__file__}` to write {SNAPSHOT.name}")
    assert snapshot() == json.loads(SNAPSHOT.read_text())


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "retriever.mcp.tools"], check=True)  # the stdio server's definitions
