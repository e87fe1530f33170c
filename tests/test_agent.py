"""The agent's face (api/agent.py) through a real MCP client: the tools of the default profile
work with the shipped parameter.yaml, search defaults to hybrid with 0..1 scores, filters that
cannot match say so, tools appear once configured, and `retriever run` / `/tools` / the CLI reach
every tool the registry lists for them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import MCP, copy_built
from fastmcp import Client
from retriever.api.registry import BY_NAME, TOOLS, in_profile
from retriever.mcp.server import build_server
from retriever.testing.projects import ROOT, engine_for, write_project

Q = "what causes earthquakes"


class Agent(MCP):
    """The MCP helper on the default profile (what a plain `retriever serve` lists)."""

    def __init__(self, engine: Any) -> None:
        self.server = build_server(engine)

    def names(self) -> set[str]:
        async def run() -> set[str]:
            async with Client(self.server) as client:
                return {t.name for t in await client.list_tools()}

        return asyncio.run(run())


@pytest.fixture
def agent(built_project: Path, tmp_path: Path) -> Agent:
    """The shipped parameter.yaml (only the paths point at a built copy of the sample corpus); no
    init call: the agent's tools open the collection themselves."""
    return Agent(engine_for(copy_built(built_project, tmp_path / "p")))


def test_the_default_profile_is_the_agent_s(agent: Agent) -> None:
    assert agent.names() == {t.name for t in in_profile("agent") if t.needs is None}
    assert len(agent.names()) <= 8


def test_search_defaults_to_hybrid_with_scores_in_0_1(agent: Agent) -> None:
    out = agent.ok("search", {"query": Q})
    hits = out["results"][0]["hits"]
    assert out["results"][0]["query"] == Q and hits[0]["id"] == "doc11" and len(hits) == 5
    assert all(0 <= h["score"] <= 1 for h in hits) and [h["score"] for h in hits] == sorted(
        (h["score"] for h in hits), reverse=True)
    assert set(hits[0]) == {"id", "text", "score", "metadata"}


def test_search_modes_and_a_list_of_queries(agent: Agent, built: Any) -> None:
    for mode in ("hybrid", "dense", "bm25"):
        out = agent.ok("search", {"query": [Q, "black holes"], "mode": mode, "top_k": 3})
        sizes = [len(r["hits"]) for r in out["results"]]
        assert sizes == [3, 3] if mode != "bm25" else 1 <= min(sizes) and max(sizes) <= 3, (mode, sizes)
    hybrid = agent.ok("search", {"query": Q, "top_k": 5})["results"][0]["hits"]
    classic = MCP(built).ok("retriever_hybrid_search", {"query_list": Q, "top_k": 5})
    assert [h["id"] for h in hybrid] == classic["ret_ids"][0]


def test_get_document_reads_hits_by_id(agent: Agent) -> None:
    out = agent.ok("get_document", {"ids": ["doc11", "nope"]})
    assert [d["id"] for d in out["documents"]] == ["doc11"] and out["missing"] == ["nope"]
    assert "earthquake" in out["documents"][0]["text"].lower()


def test_writes_through_the_agent_tools(agent: Agent) -> None:
    added = agent.ok("add_documents", {"documents": [{"id": "n1", "contents": "Zanzibar spice markets", "year": 2021}]})
    assert added["added"] == 1
    assert agent.ok("search", {"query": "Zanzibar spice", "top_k": 1})["results"][0]["hits"][0]["id"] == "n1"
    ingested = agent.ok("ingest_document", {"text": "Kelp forests grow fast.", "source_id": "kelp"})
    assert ingested["ids"] == ["kelp:0"]
    assert agent.ok("delete_documents", {"ids": ["n1"]})["deleted"] == 1
    assert agent.ok("get_document", {"ids": "n1"})["missing"] == ["n1"]
    assert agent.ok("list_collections")["collections"]


@pytest.mark.parametrize("filters, says", [
    pytest.param({"field": "meta.yeer", "operator": "==", "value": 2021}, "no document of the collection has it",
                 id="misspelled-field"),
    pytest.param({"field": "meta.year", "operator": "==", "value": "2021"}, "holds number values", id="wrong-type"),
    pytest.param({"operator": "OR", "conditions": [{"field": "meta.year", "operator": "in", "value": ["x", "y"]}]},
                 "holds number values", id="nested-in"),
])
def test_a_filter_that_cannot_match_says_so(agent: Agent, filters: dict, says: str) -> None:
    agent.ok("add_documents", {"documents": [{"id": "y1", "contents": "a year document", "year": 2021}]})
    out = agent.ok("search", {"query": "year document", "filters": filters})
    assert out["results"][0]["hits"] == [] and says in " ".join(out["warnings"])


def test_a_filter_that_can_match_gives_no_warning(agent: Agent) -> None:
    agent.ok("add_documents", {"documents": [{"id": "e1", "contents": "an edition document", "edition": 2021}]})
    out = agent.ok("search", {"query": "edition document", "filters": {"field": "meta.edition", "operator": ">=",
                                                                        "value": 2000}})
    assert [h["id"] for h in out["results"][0]["hits"]] == ["e1"] and "warnings" not in out
    # a real "no match" of the right type: empty, no warning
    out = agent.ok("search", {"query": "edition document", "filters": {"field": "meta.edition", "operator": "==",
                                                                        "value": 1999}})
    assert out["results"][0]["hits"] == [] and "warnings" not in out


def test_the_classic_tools_warn_too(mcp_built: MCP) -> None:
    """Not UltraRAG's: its runner sends no filters, so its replies keep their keys."""
    out = mcp_built.ok("retriever_hybrid_search", {"query_list": Q, "filters": {"field": "meta.nope", "operator": "==",
                                                                                "value": 1}})
    assert "no document of the collection has it" in " ".join(out["warnings"])


def test_a_tool_appears_once_configured(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """web_search needs a provider with a key; with one it is listed, and a full server tells its
    client the list changed when retriever_init changes what can work."""
    assert "web_search" not in Agent(engine_for(project)).names()
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    configured = write_project(project.parent / "q", websearch_backend="tavily")
    assert "web_search" in Agent(engine_for(configured)).names()

    changed: list[str] = []

    async def run() -> tuple[set[str], set[str]]:
        async def handler(message: Any) -> None:
            if getattr(getattr(message, "root", message), "method", "") == "notifications/tools/list_changed":
                changed.append("tools")

        server = build_server(engine_for(project), profile="full")
        async with Client(server, message_handler=handler) as client:
            before = {t.name for t in await client.list_tools()}
            await client.call_tool("retriever_init", {"index_backend": "milvus",
                                                      "index_backend_configs": {"milvus": {"uri": "out/m.db"}}})
            after = {t.name for t in await client.list_tools()}
        return before, after

    monkeypatch.delenv("TAVILY_API_KEY")
    before, after = asyncio.run(run())
    assert "retriever_project_memory_search" not in before and "retriever_project_memory_search" in after
    assert changed == ["tools"]


def test_a_tool_the_configuration_cannot_serve_is_refused_by_name(project: Path) -> None:
    text = MCP(engine_for(project)).error("retriever_rewrite_query", {"query_list": "a"})
    assert "cannot work with this server's configuration" in text and "llm" in text


def test_the_parameter_file_may_carry_ultrarag_s_path_key(tmp_path: Path) -> None:
    """UltraRAG's client fills `path` in a server's parameter.yaml; the server still starts."""
    config = write_project(tmp_path / "p", path="servers/retriever/src/retriever.py")
    assert engine_for(config).init()["status"] == "ready"


# ---- every tool through every face that the registry names --------------------------------------


def test_retriever_run_knows_every_tool(built_project: Path) -> None:
    """`retriever run`'s in-process server has every tool of the registry but UltraRAG's build."""
    from retriever.pipeline.servers import InProcess

    server = InProcess(built_project, {}, {})
    assert set(server.tools) == {t.name for t in TOOLS} - {"build"}
    assert server.tools["retriever_get_neighbors"].outputs == ["ids", "texts", "merged"]


def test_retriever_run_ingests_and_reads_neighbours(built_project: Path, tmp_path: Path) -> None:
    """The two steps the hand-kept lists lacked: retriever_ingest and retriever_get_neighbors."""
    from retriever.pipeline.runner import run_pipeline

    config = write_project(tmp_path / "p", chunking={"by": "word", "length": 4, "overlap": 0, "levels": []})
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump({
        "servers": {"retriever": {"kind": "retriever", "config": str(config),
                                  "params": {"text": "one two three four five six seven eight nine ten",
                                             "source_id": "nums", "id": "nums:1"}}},
        "pipeline": ["retriever.retriever_init", "retriever.retriever_ingest", "retriever.retriever_get_neighbors"]}))
    out = asyncio.run(run_pipeline(path, None, tmp_path / "out.json"))
    v = out["variables"]
    assert v["ids"] == ["nums:0", "nums:1", "nums:2"] and "five six seven eight" in v["merged"]


def test_every_tool_is_reachable_where_the_registry_says(built_project: Path) -> None:
    """MCP lists each tool in each of its profiles (needs met); /tools serves every read-only tool
    that runs on the engine; the CLI command a tool names exists."""
    from retriever.main import parser
    from retriever.service.app import READ_TOOLS
    from test_schemas import engine, listing

    for profile in ("agent", "ultrarag", "full"):
        listed = set(listing(profile, e=engine(everything=True)))
        assert listed == {t.name for t in TOOLS if profile in t.profiles}, profile
    assert {n for n, t in BY_NAME.items() if t.effects.read_only and "web" not in n and not n.startswith(
        ("retriever_exa", "retriever_tavily", "retriever_zhipuai"))} == set(READ_TOOLS)
    commands = set(parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert {t.cli for t in TOOLS if t.cli} <= commands


def test_no_face_keeps_a_list_of_tools() -> None:
    """The faces read the registry: no tool-name table of their own."""
    faces = [ROOT / "servers" / "retriever" / p for p in ("mcp", "service", "pipeline", "cli.py")]
    files = [f for p in faces for f in ([p] if p.is_file() else p.rglob("*.py"))]
    for f in files:
        text = f.read_text()
        # "search" and "build" are words too; "bm25_index" is also a key of the engine's status
        quoted = [t.name for t in TOOLS if f'"{t.name}"' in text and t.name not in ("search", "build", "bm25_index")]
        assert quoted == [], f"{f.name} names tools {quoted}"


def test_the_docs_tool_reference_is_the_registry_s() -> None:
    from retriever.api.reference import PAGE, markdown, section

    assert section(PAGE.read_text()) == markdown(), "run .venv/bin/python -m retriever.api.reference"


def test_a_tool_left_out_is_named_not_an_internal_error(agent: Agent) -> None:
    text = agent.error("retriever_delete", {"ids": ["doc01"]})
    assert "no tool 'retriever_delete' on this server" in text and "internal" not in text


SAMPLES = {"query_list": "what is BM25?", "query": "what is BM25?", "batch_query_list": [["what is BM25?"]],
           "question_list": [["what is BM25?"]], "collections": [""], "id": "doc15", "ids": ["doc15"],
           "documents": [{"id": "w1", "contents": "walked through every face"}], "text": "a walked text",
           "source_id": "walk", "parse_file_path": "data", "image_corpus_save_path": "out/images.jsonl",
           "parameter_file": "parameter.yaml"}


def minimal(tool: Any) -> dict[str, Any]:
    """A tool's required arguments, from sample values by name (plus text for ingest)."""
    args = {n: SAMPLES[n] for n, f in tool.request.model_fields.items() if f.is_required()}
    if "ingest" in tool.name:
        args |= {"text": SAMPLES["text"], "source_id": "walk"}
    if "delete" in tool.name:
        args |= {"ids": ["walk-gone"]}
    return args


def test_retriever_run_calls_every_tool(built_project: Path, tmp_path: Path) -> None:
    """Through `retriever run`'s in-process server, every tool answers or fails with our error
    (a RetrieverError naming what is missing: an LLM, a graph, a provider), never anything else."""
    from retriever.errors import RetrieverError
    from retriever.pipeline.servers import InProcess

    config = copy_built(built_project, tmp_path / "p")
    server = InProcess(config, {}, {})
    answered, refused = [], {}

    undeclared = {}

    async def walk() -> None:
        for name in server.tools:
            try:
                reply = await server.call(name, minimal(BY_NAME[name]))
                answered.append(name)
                missing = set(BY_NAME[name].outputs) - set(reply)
                if missing:  # what the registry declares (UltraRAG's server.yaml outputs) is in the reply
                    undeclared[name] = missing
            except RetrieverError as e:
                refused[name] = str(e)[:80]

    asyncio.run(walk())
    assert undeclared == {}
    # what needs what this project lacks: an LLM, a web provider, a deployed service, a graph, a PDF
    assert set(refused) <= {t.name for t in TOOLS if t.needs or t.name in (
        "retriever_graph_search", "retriever_build_image_corpus", "retriever_embed", "retriever_index",
        "bm25_index")}, refused
    assert {"search", "get_document", "retriever_search", "bm25_search", "retriever_hybrid_search",
            "retriever_ingest", "retriever_get_neighbors", "retriever_add", "retriever_delete"} <= set(answered)


def test_a_client_mistake_is_one_log_line_and_our_bug_a_traceback(agent: Agent, caplog: pytest.LogCaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from retriever.api import agent as agent_api

    caplog.set_level(logging.INFO)
    agent.error("search", {"querry": "typo"})
    lines = [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith(("retriever", "fastmcp"))]
    assert len(lines) == 1 and "invalid arguments" in lines[0].getMessage() and not lines[0].exc_info
    caplog.clear()

    def broken(*args: Any) -> Any:
        raise KeyError("planted")

    monkeypatch.setattr(agent_api, "_hit", broken)
    text = agent.error("search", {"query": Q})
    assert "internal error (KeyError)" in text and "bug" in text
    assert any(r.exc_info for r in caplog.records if r.name == "retriever.mcp")
