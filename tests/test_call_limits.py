"""Per-call limits on the tools that fan out (issue 31): web provider requests, LLM requests,
triples per call and per graph, chunks per ingest. Each over its limit is refused with the key
named, before anything is sent (the local fakes record every request) or written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MCP, copy_built
from retriever import Retriever
from retriever.config import LimitsConfig, validate_config
from retriever.testing.fake_llm import FakeLLM
from retriever.testing.fake_web import FakeProvider, start, stop
from retriever.testing.projects import engine_for, write_project

KEY = "web-limit-key-5d1"
LLM_KEY = "llm-limit-key-77a"


@pytest.fixture
def tavily() -> Iterator[FakeProvider]:
    server = start(FakeProvider("tavily", KEY))
    yield server
    stop(server)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    yield fake
    fake.stop()


def web_mcp(fake: FakeProvider, **limits: Any) -> MCP:
    section = {"api_key": KEY, "base_url": fake.base_url, "timeout": 2, "max_retries": 2, "base_delay": 0.01}
    cfg = validate_config({"websearch_backend": "tavily", "websearch_backend_configs": {"tavily": section},
                           "limits": limits}, source="test")
    return MCP(Retriever(cfg))


def llm_mcp(built_project: Path, tmp_path: Path, fake: FakeLLM, monkeypatch: pytest.MonkeyPatch,
            **limits: Any) -> MCP:
    monkeypatch.setenv("RETRIEVER_LLM_API_KEY", LLM_KEY)
    llm = {"base_url": fake.url, "model": "tiny", "timeout": 5, "max_retries": 0, "concurrency": 2}
    mcp = MCP(engine_for(copy_built(built_project, tmp_path / "p"), {"llm": llm, "limits": limits}))
    mcp.ok("retriever_init")
    return mcp


def test_the_defaults_bound_every_fan_out() -> None:
    limits = LimitsConfig()
    assert (limits.max_provider_requests, limits.max_llm_requests, limits.max_chunks) == (1000, 1000, 100_000)
    assert (limits.max_triples, limits.max_graph_triples) == (100_000, 500_000)


@pytest.mark.parametrize("tool", ["retriever_websearch", "retriever_tavily_search"])
def test_web_queries_over_the_provider_request_limit_send_nothing(tavily: FakeProvider, tool: str) -> None:
    err = web_mcp(tavily, max_provider_requests=5).error(tool, {"query_list": [f"q{i}" for i in range(6)]})
    assert "limits.max_provider_requests" in err and "6" in err
    assert tavily.requests == []


def test_web_batch_counts_every_group(tavily: FakeProvider) -> None:
    err = web_mcp(tavily, max_provider_requests=5).error(
        "retriever_batch_websearch", {"batch_query_list": [["a", "b", "c"], ["d", "e", "f"]]})
    assert "limits.max_provider_requests" in err and tavily.requests == []


def test_web_retries_count_against_the_provider_request_limit(tavily: FakeProvider) -> None:
    tavily.plan["flaky"] = [429]  # always 429: without a budget, 3 attempts
    out = web_mcp(tavily, max_provider_requests=3).ok("retriever_websearch", {"query_list": ["flaky", "fine"]})
    assert len(tavily.requests) == 3
    assert out["errors"][1] is None or "limits.max_provider_requests" in out["errors"][1]
    assert any("limits.max_provider_requests" in (e or "") for e in out["errors"]), out["errors"]


def test_web_queries_over_max_queries_are_refused(tavily: FakeProvider) -> None:
    err = web_mcp(tavily, max_queries=4).error("retriever_websearch", {"query_list": ["a", "b", "c", "d", "e"]})
    assert "limits.max_queries" in err and tavily.requests == []


@pytest.mark.parametrize("tool", ["retriever_rewrite_query", "retriever_infer_filters"])
def test_llm_queries_over_the_llm_request_limit_send_nothing(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                                             monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, max_llm_requests=5)
    err = mcp.error(tool, {"query_list": [f"query {i}" for i in range(6)]})
    assert "limits.max_llm_requests" in err and llm.requests == []


def test_agentic_search_is_held_to_max_queries_and_its_worst_case_requests(
        built_project: Path, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, max_queries=3, max_llm_requests=10)
    err = mcp.error("retriever_agentic_search", {"query_list": [f"q{i}" for i in range(4)], "max_rounds": 1})
    assert "limits.max_queries" in err
    # 3 queries x (2 x 2 rounds - 1) = 9 requests at most: allowed; 3 rounds: 15, refused
    err = mcp.error("retriever_agentic_search", {"query_list": ["a", "b", "c"], "max_rounds": 3})
    assert "limits.max_llm_requests" in err and llm.requests == []


def test_llm_rerank_stops_at_the_llm_request_limit(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    llm.respond = lambda prompt: json.dumps({"scores": [5, 4]})
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, max_llm_requests=3)
    err = mcp.error("retriever_search", {"query_list": "light", "top_k": 10, "llm_rerank": {
        "method": "pointwise", "depth": 10, "batch_size": 2}})
    assert "limits.max_llm_requests" in err
    assert len(llm.requests) == 3  # of the 5 its 10 hits in pairs would take


def many_triples(prompt: str) -> str:
    return json.dumps({"triples": [[f"entity {i}", "relates to", f"entity {i + 1}"] for i in range(50)]})


def test_triples_over_the_per_call_limit_add_nothing(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    llm.respond = many_triples
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, max_triples=120)
    err = mcp.error("retriever_extract_triples", {"ids": ["doc00", "doc01", "doc02"]})
    assert "limits.max_triples" in err and "150" in err
    assert not list((tmp_path / "p").rglob("graph.json"))


def test_a_graph_is_held_to_its_triple_limit(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    llm.respond = many_triples
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, max_graph_triples=60)
    assert mcp.ok("retriever_extract_triples", {"ids": ["doc00"]})["triples"] == 50
    err = mcp.error("retriever_extract_triples", {"ids": ["doc01"]})
    assert "limits.max_graph_triples" in err and "100" in err
    (graph,) = (tmp_path / "p").rglob("graph.json")
    assert len(json.loads(graph.read_text())["triples"]) == 50


def test_an_ingest_cut_into_more_chunks_than_the_limit_is_refused(tmp_path: Path) -> None:
    config = write_project(tmp_path / "p", chunking={"by": "word", "length": 1}, limits={"max_chunks": 10})
    mcp = MCP(engine_for(config))
    mcp.ok("retriever_init", {})
    mcp.ok("bm25_index", {})
    before = mcp.ok("bm25_search", {"query_list": ["zebra"], "top_k": 3})
    err = mcp.error("retriever_ingest", {"text": " ".join(f"zebra{i}" for i in range(11)), "source_id": "z"})
    assert "limits.max_chunks" in err and "11" in err
    assert mcp.ok("bm25_search", {"query_list": ["zebra"], "top_k": 3}) == before
    assert mcp.ok("retriever_ingest", {"text": "zebra one two", "source_id": "z"})["ids"] == ["z:0", "z:1", "z:2"]
