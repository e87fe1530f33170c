"""Every tool's schema as an agent reads it from `tools/list`: names, parameters, descriptions,
annotations; compared with the snapshot in tests/tool_schemas.json (regenerate it with
`python tests/test_schemas.py` after a deliberate change, and review the diff)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from retriever import Retriever
from retriever.config import Config
from retriever.mcp import build_server
from retriever.search import MODES

SNAPSHOT = Path(__file__).with_name("tool_schemas.json")
WRITES = {"retriever_ingest", "retriever_embed", "retriever_index", "bm25_index", "retriever_add", "retriever_delete",
          "retriever_build_image_corpus", "retriever_extract_triples"}


def listing(read_only: bool = False) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with Client(build_server(Retriever(Config()), read_only=read_only)) as client:
            return {t.name: {"title": t.title, "description": t.description,
                             "annotations": t.annotations.model_dump(exclude_none=True) if t.annotations else None,
                             "input_schema": t.input_schema} for t in await client.list_tools()}

    return asyncio.run(run())


def test_every_parameter_is_described() -> None:
    tools = listing()
    params = [(name, p, schema) for name, t in tools.items() for p, schema in t["input_schema"]["properties"].items()]
    assert len(tools) == 30 and len(params) > 100
    assert [(n, p) for n, p, s in params if not s.get("description")] == []


def test_annotations_say_what_each_tool_does() -> None:
    tools = listing()
    for name, t in tools.items():
        a = t["annotations"]
        assert t["title"] and a is not None, name
        if "search" in name or name == "retriever_list_collections":
            assert a["read_only_hint"] is True and a["destructive_hint"] is False, name
        if name in ("retriever_delete", "retriever_embed", "retriever_index", "bm25_index"):
            assert a["read_only_hint"] is False and a["destructive_hint"] is True, name
        assert a["idempotent_hint"] is True, name
    assert {n for n, t in tools.items() if t["annotations"].get("open_world_hint")} == {
        n for n in tools if "websearch" in n or n.startswith(("retriever_exa", "retriever_tavily", "retriever_zhipuai"))
    } | {"retriever_deploy_search"}


def test_read_only_serves_no_write_tool() -> None:
    full, read_only = set(listing()), set(listing(read_only=True))
    assert WRITES <= full and full - read_only == WRITES


def test_read_only_from_the_yaml() -> None:
    async def run() -> set[str]:
        cfg = Config.model_validate({"security": {"read_only": True}})
        async with Client(build_server(Retriever(cfg))) as client:
            return {t.name for t in await client.list_tools()}

    assert not WRITES & asyncio.run(run())


def test_modes_come_from_the_registry() -> None:
    schema = listing()["retriever_multi_query_search"]["input_schema"]["properties"]["mode"]
    assert sorted(schema["enum"]) == sorted(MODES)


def test_the_schemas_match_the_snapshot() -> None:
    if not SNAPSHOT.is_file():
        pytest.fail(f"no snapshot: run `python {__file__}` to write {SNAPSHOT.name}")
    assert listing() == json.loads(SNAPSHOT.read_text())


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(listing(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
