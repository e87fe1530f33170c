"""Strict-mode-friendly agent schemas (issue 44), checked against OpenAI's strict-mode rules where
we claim them: every object whose keys are known is closed (`additionalProperties: false`), no
untyped value anywhere (a document's metadata values are JSON scalars, lists of them or objects),
no keyword strict mode does not take. What is not claimed: every property `required` (optional
arguments stay optional; the OpenAI Agents SDK's strict conversion marks them required itself),
closed metadata (its keys are the caller's, so add_documents and ingest_document cannot be strict),
and a closed `filters` (search, delete_documents): listed closed it cost every agent 1,340 bytes of
definitions per turn, and listed recursively it stopped LlamaIndex's MCP adapter; it is an open
object with its shape in words, and the server refuses a malformed filter with a clear message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import MCP, copy_built
from retriever.mcp.server import build_server
from retriever.testing.projects import engine_for
from test_schemas import engine, listing

# Tools whose every object is closed: the Agents SDK's strict conversion takes them as they are.
STRICT = {"get_document", "list_collections", "web_search"}
OPEN_KEYS = {"add_documents", "ingest_document"}  # a document's metadata: the caller's keys, typed values
OPEN_FILTERS = {"search", "delete_documents"}  # `filters`: an open object, its shape in its description
SCALARS = ["string", "number", "boolean", "null"]
# JSON Schema keywords strict mode does not take (OpenAI's structured outputs: "Supported schemas")
UNSUPPORTED = {"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "patternProperties",
               "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties", "unevaluatedItems",
               "contains", "minContains", "maxContains", "uniqueItems", "prefixItems"}


def nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema inside `schema` (itself included)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for key in ("items", "additionalProperties"):
        yield from nodes(schema.get(key))
    for key in ("properties", "$defs"):
        for sub in schema.get(key, {}).values():
            yield from nodes(sub)
    for sub in schema.get("anyOf", []):
        yield from nodes(sub)


@pytest.fixture(scope="module")
def agent_tools() -> dict[str, Any]:
    return listing("agent", e=engine(everything=True))


def test_the_agent_schemas_follow_strict_modes_rules_where_claimed(agent_tools: dict[str, Any]) -> None:
    assert set(agent_tools) == STRICT | OPEN_KEYS | OPEN_FILTERS
    for name, tool in agent_tools.items():
        schema = json.loads(json.dumps(tool["input_schema"]))
        assert "$defs" not in json.dumps(schema), name  # nothing a client must resolve (or could recurse on)
        if name in OPEN_FILTERS:  # the one open object, left out of the walk below
            filters = schema["properties"].pop("filters")
            assert filters["anyOf"] == [{"additionalProperties": True, "type": "object"}, {"type": "null"}]
            assert "'operator': 'AND'|'OR'|'NOT'" in filters["description"]
        for node in nodes(schema):
            assert node != {} and not UNSUPPORTED & set(node), (name, node)  # nothing untyped, nothing unsupported
            assert "type" in node or "anyOf" in node or "$ref" in node, (name, node)
            if node.get("type") == "object":
                closed = node.get("additionalProperties")
                assert closed is False or (name in OPEN_KEYS and isinstance(closed, dict) and closed), (name, node)
        if name in STRICT:  # every object closed: a strict client sends nothing the server refuses
            assert all(n.get("additionalProperties") is False for n in nodes(schema) if n.get("type") == "object")
    # metadata values: scalars, lists of scalars or objects, in both tools that take metadata
    meta = agent_tools["ingest_document"]["input_schema"]["properties"]["metadata"]["anyOf"][0]["additionalProperties"]
    item = agent_tools["add_documents"]["input_schema"]["properties"]["documents"]["items"]
    assert meta == item["additionalProperties"] == {"type": [*SCALARS, "array", "object"], "items": {"type": SCALARS}}


GOOD_FILTERS = [
    {"field": "meta.year", "operator": ">=", "value": 2020},
    {"field": "meta.a.b", "operator": "in", "value": [1, "x", None]},
    {"operator": "NOT", "conditions": [{"operator": "OR", "conditions": [
        {"field": "id", "operator": "==", "value": "doc1"}, {"field": "meta.topic", "operator": "!=", "value": True}]}]},
]
BAD_FILTERS = [  # (the filter, what the server's refusal says)
    ({"field": "meta.year", "operator": "==", "value": 1, "boost": 2}, "exactly the keys field, operator and value"),
    ({"operator": "AND", "conditions": [{"field": "meta.year", "operator": "~", "value": 1}]}, "unknown operator"),
    ({"operator": "AND", "conditions": [], "note": "x"}, "exactly the keys operator and conditions"),
    ({"field": "meta.year", "operator": "==", "value": {"y": 1}}, "value must be a string, number"),
]


class Agent(MCP):
    """The MCP helper on the agent profile (what a plain `retriever serve` lists)."""

    def __init__(self, e: Any) -> None:
        self.server = build_server(e)


@pytest.fixture
def agent(built_project: Path, tmp_path: Path) -> Agent:
    return Agent(engine_for(copy_built(built_project, tmp_path / "p")))


def test_the_server_takes_good_filters_and_names_a_malformed_one_s_problem(agent: Agent) -> None:
    for f in GOOD_FILTERS:
        agent.ok("search", {"query": "earthquakes", "filters": f})
    for f, said in BAD_FILTERS:
        assert said in agent.error("search", {"query": "earthquakes", "filters": f}), f
        assert said in agent.error("delete_documents", {"filters": f}), f


def test_unknown_arguments_and_wrong_typed_metadata_are_refused_clearly(agent: Agent,
                                                                        agent_tools: dict[str, Any]) -> None:
    assert "bogus" in agent.error("search", {"query": "x", "bogus": 1})
    assert "bogus" in agent.error("delete_documents", {"ids": ["x"], "bogus": 1})
    add = jsonschema.Draft202012Validator(agent_tools["add_documents"]["input_schema"])
    ingest = jsonschema.Draft202012Validator(agent_tools["ingest_document"]["input_schema"])
    good = {"tags": ["a", 1, None], "place": {"city": "Oslo", "ids": [1, 2]}, "year": 2021, "draft": False}
    for bad, where in (({"authors": [{"name": "Ada"}]}, "authors"), ({"grid": [[1, 2]]}, "grid")):
        doc = {"id": "m1", "contents": "a document with metadata", **bad}
        assert not add.is_valid({"documents": [doc]}) and not add.is_valid({"documents": [{**doc, **good}]})
        said = agent.error("add_documents", {"documents": [doc]})
        assert f"documents.0.{where}" in said and "a metadata list holds strings, numbers" in said, said
        said = agent.error("add_documents", {"documents": [{"id": "m1", "contents": "x", "metadata": bad}]})
        assert "a metadata list holds strings, numbers" in said, said  # the `metadata` object's values too
        args = {"text": "a document with metadata", "source_id": "m", "metadata": bad}
        assert not ingest.is_valid(args)
        said = agent.error("ingest_document", args)
        assert f"metadata.{where}" in said and "a metadata list holds strings, numbers" in said, said
    doc = {"id": "m1", "contents": "Zanzibar spice markets", **good}
    assert add.is_valid({"documents": [doc]}) and agent.ok("add_documents", {"documents": [doc]})["added"] == 1
    assert ingest.is_valid({"text": "Zanzibar", "source_id": "m", "metadata": good})
    assert agent.ok("ingest_document", {"text": "Zanzibar spice", "source_id": "m", "metadata": good})["ids"]
    found = agent.ok("search", {"query": "Zanzibar spice markets", "mode": "bm25",
                                "filters": {"field": "meta.place.city", "operator": "==", "value": "Oslo"}})
    assert {h["id"] for h in found["results"][0]["hits"]} == {"m1", "m:0"}
