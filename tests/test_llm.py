"""LLM-assisted retrieval through the MCP client, against a local chat-completions server
(retriever.testing.fake_llm) driven by the real `openai` client: query rewriting, agentic rounds, LLM reranking as a
result stage, triple extraction and graph search, filter inference; every request checked, and
malformed answers, refusals, timeouts and 429s leaving the plain result with a warning."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MCP, copy_built
from retriever.testing.fake_llm import FakeLLM
from retriever.testing.projects import engine_for

KEY = "llm-test-key-9c2e7"
Q = "How do plants turn sunlight into sugar?"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    yield fake
    fake.stop()


def llm_mcp(built_project: Path, tmp_path: Path, fake: FakeLLM, monkeypatch: pytest.MonkeyPatch,
            **llm: Any) -> MCP:
    monkeypatch.setenv("RETRIEVER_LLM_API_KEY", KEY)
    config = {"base_url": fake.url, "model": "tiny-judge", "timeout": 5, "max_retries": 1, "concurrency": 2, **llm}
    mcp = MCP(engine_for(copy_built(built_project, tmp_path / "p"), {"llm": config}))
    mcp.ok("retriever_init")
    return mcp


def passages(prompt: str) -> list[str]:
    return re.findall(r"^\[\d+\] (.*)$", prompt, flags=re.M)


def test_every_request_is_a_json_chat_completion_with_the_key_from_the_environment(
        built_project: Path, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    llm.script.append({"content": json.dumps({"queries": ["photosynthesis glucose light", "plant sugar from light"]})})
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    out = mcp.ok("retriever_rewrite_query", {"query_list": Q, "n": 2})
    assert out == {"queries": [["photosynthesis glucose light", "plant sugar from light"]]}
    (request,) = llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert {k.lower(): v for k, v in request["headers"].items()}["authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert (body["model"], body["temperature"], body["response_format"]) == ("tiny-judge", 0.0, {"type": "json_object"})
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert Q in body["messages"][1]["content"] and "2 different queries" in body["messages"][1]["content"]


@pytest.mark.parametrize("steps, warning", [
    pytest.param([{"content": "not json at all"}], "answered malformed JSON: not json at all", id="malformed"),
    pytest.param([{"content": '{"answer": 1}'}], "has no 'queries'", id="wrong-shape"),
    pytest.param([{"content": None, "refusal": "I can't help with that"}], "refused: I can't help with that",
                 id="refusal"),
    pytest.param([{"status": 429, "body": "slow down"}] * 2, "answered HTTP 429: ", id="429-twice"),
    pytest.param([{"status": 401, "body": f"bad key {KEY}"}], "answered HTTP 401: ", id="401-key-redacted"),
    pytest.param([{"delay": 3}, {"delay": 3}], "did not answer within 1 s (after 1 retries)", id="timeout"),
])
def test_a_failed_rewrite_keeps_the_query_and_names_the_failure(
        built_project: Path, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch,
        steps: list[dict], warning: str) -> None:
    llm.script.extend(steps)
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, timeout=1)
    out = mcp.ok("retriever_rewrite_query", {"query_list": Q})
    assert out["queries"] == [[Q]]
    assert len(out["warnings"]) == 1 and warning in out["warnings"][0], out["warnings"]
    assert KEY not in json.dumps(out)


def test_a_429_is_retried_and_then_answered(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    llm.script.extend([{"status": 429}, {"content": '{"queries": ["leaf sugar"]}'}])
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    assert mcp.ok("retriever_rewrite_query", {"query_list": Q, "n": 1}) == {"queries": [["leaf sugar"]]}
    assert len(llm.requests) == 2


def reverse_order(prompt: str) -> str:
    return json.dumps({"order": list(range(len(passages(prompt)), 0, -1))})


def test_listwise_rerank_applies_the_models_order_to_what_it_saw(built_project: Path, tmp_path: Path,
                                                                  llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    llm.respond = reverse_order
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    plain = mcp.ok("retriever_hybrid_search", {"query_list": Q, "top_k": 20})["ret_ids"][0]
    out = mcp.ok("retriever_hybrid_search", {"query_list": Q, "top_k": 8, "llm_rerank": {
        "method": "listwise", "depth": 6, "batch_size": 6}})
    assert out["ret_ids"][0] == plain[:6][::-1] + plain[6:8]  # the 6 it saw reversed, the rest behind
    assert out["llm_rerank"] == {"method": "listwise", "depth": 6, "batch_size": 6}
    assert len(llm.requests) == 1 and Q in llm.prompts()[0] and len(passages(llm.prompts()[0])) == 6


def test_listwise_windows_slide_from_the_bottom(built_project: Path, tmp_path: Path,
                                                llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    llm.respond = reverse_order
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    plain = mcp.ok("retriever_search", {"query_list": Q, "top_k": 8})["ret_ids"][0]
    out = mcp.ok("retriever_search", {"query_list": Q, "top_k": 8, "llm_rerank": {"depth": 8, "batch_size": 4}})
    # windows of 4, step 2: rows 4-7, then 2-5, then 0-3, each reversed by the model
    rows = list(plain)
    for start in (4, 2, 0):
        rows[start : start + 4] = rows[start : start + 4][::-1]
    assert out["ret_ids"][0] == rows and len(llm.requests) == 3


def test_pointwise_rerank_sorts_by_the_models_scores(built_project: Path, tmp_path: Path,
                                                     llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    def score(prompt: str) -> str:  # 10 for the passages about photosynthesis, else 1
        return json.dumps({"scores": [10 if "glucose" in p else 1 for p in passages(prompt)]})

    llm.respond = score
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    plain = mcp.ok("retriever_search", {"query_list": "light energy", "top_k": 10})
    out = mcp.ok("retriever_search", {"query_list": "light energy", "top_k": 10, "llm_rerank": {
        "method": "pointwise", "depth": 10, "batch_size": 4}})
    glucose = [i for i, text in zip(plain["ret_ids"][0], plain["ret_psg"][0]) if "glucose" in text]
    assert glucose and out["ret_ids"][0] == glucose + [i for i in plain["ret_ids"][0] if i not in glucose]
    assert out["ret_scores"][0] == [10.0] * len(glucose) + [1.0] * (10 - len(glucose))
    assert len(llm.requests) == 3  # 10 hits, 4 per request


def test_a_failed_rerank_keeps_the_retrieval_order(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    llm.script.append({"content": '{"order": "first"}'})
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    plain = mcp.ok("retriever_search", {"query_list": Q, "top_k": 5})
    out = mcp.ok("retriever_search", {"query_list": Q, "top_k": 5, "llm_rerank": {"depth": 5}})
    assert out["ret_ids"] == plain["ret_ids"] and "LLM reranking failed" in out["warnings"][0]


def test_agentic_rounds_rewrite_from_what_is_missing_until_sufficient(
        built_project: Path, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    llm.script.extend([
        {"content": json.dumps({"sufficient": False, "confidence": 0.2, "missing": "the role of chlorophyll"})},
        {"content": json.dumps({"queries": ["chlorophyll light absorption glucose"]})},
        {"content": json.dumps({"sufficient": True, "confidence": 0.9, "missing": ""})},
    ])
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    out = mcp.ok("retriever_agentic_search", {"query_list": Q, "top_k": 3, "mode": "hybrid", "max_rounds": 3})
    rounds = out["rounds"][0]
    assert [r["query"] for r in rounds] == [Q, "chlorophyll light absorption glucose"]
    assert [r["judgement"]["sufficient"] for r in rounds] == [False, True]
    assert "the role of chlorophyll" in llm.prompts()[1]  # the rewrite was told what was missing
    assert len(out["ret_ids"][0]) == 3 and "warnings" not in out


def test_agentic_search_keeps_its_hits_when_the_judge_fails(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    llm.script.append({"content": "{oops"})
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    plain = mcp.ok("retriever_hybrid_search", {"query_list": Q, "top_k": 3})
    out = mcp.ok("retriever_agentic_search", {"query_list": Q, "top_k": 3})
    assert out["ret_ids"] == plain["ret_ids"]
    assert out["rounds"] == [[{"round": 1, "query": Q, "judgement": None}]]
    assert "judging failed" in out["warnings"][0] and "malformed JSON" in out["warnings"][0]


GRAPH = {  # a text's first words -> its triples (the fake model's "extraction")
    "Photosynthesis": [["photosynthesis", "produces", "glucose"], ["photosynthesis", "needs", "light energy"]],
    "Mitochondria": [["mitochondria", "produce", "ATP"]],
    "Type 2 diabetes": [["type 2 diabetes", "involves", "glucose"]],
}


def extract(prompt: str) -> str:
    text = prompt.split("Text: ", 1)[1]
    return json.dumps({"triples": next((t for k, t in GRAPH.items() if text.startswith(k)), [])})


def test_triples_make_a_graph_that_graph_search_hops_over(built_project: Path, tmp_path: Path,
                                                          llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    llm.respond = extract
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    built = mcp.ok("retriever_extract_triples")
    assert (built["documents"], built["triples"], built["failed"]) == (30, 4, {})
    out = mcp.ok("retriever_graph_search", {"query_list": "photosynthesis", "top_k": 4, "seed_k": 1, "hops": 2,
                                            "beam": 3, "return_metadata": True})
    assert out["ret_ids"][0][0] == "doc00" and out["ret_meta"][0][0]["hop"] == 0
    reached = dict(zip(out["ret_ids"][0], out["ret_meta"][0]))
    assert reached["doc05"]["hop"] == 1 and reached["doc05"]["triple"] == ["type 2 diabetes", "involves", "glucose"]
    assert "doc01" not in reached  # shares no entity with the seed's triples
    assert Path(built["graph_path"]).is_file()


def test_failed_extractions_are_named_and_the_rest_kept(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    llm.script.extend([{"content": json.dumps({"triples": [["a", "b", "c"]]})}, {"content": "nope"}])
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, concurrency=1)
    out = mcp.ok("retriever_extract_triples", {"ids": ["doc00", "doc01"]})
    assert (out["documents"], out["triples"]) == (1, 1)
    assert list(out["failed"]) == ["doc01"] and "malformed JSON" in out["failed"]["doc01"]
    assert "unknown" in mcp.error("retriever_extract_triples", {"ids": ["nope"]})


def test_graph_search_before_extraction_says_what_to_call(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch)
    assert "call retriever_extract_triples first" in mcp.error("retriever_graph_search", {"query_list": "x"})


@pytest.mark.parametrize("answer, expected, warning", [
    pytest.param({"filter": {"field": "meta.topic", "operator": "==", "value": "biology"}},
                 {"field": "meta.topic", "operator": "==", "value": "biology"}, None, id="valid"),
    pytest.param({"filter": None}, None, None, id="none-implied"),
    pytest.param({"filter": {"field": "topic", "operator": "~", "value": 1}}, None, "gave an invalid filter",
                 id="invalid-filter"),
])
def test_filter_inference(built_project: Path, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch,
                          answer: dict, expected: dict | None, warning: str | None) -> None:
    llm.script.append({"content": json.dumps(answer)})
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch, collection_description="topic: biology, medicine, ...")
    out = mcp.ok("retriever_infer_filters", {"query_list": "biology papers on cells"})
    assert out["filters"] == [expected]
    assert "topic: biology, medicine" in llm.prompts()[0]
    assert (warning is None) == ("warnings" not in out) and (warning is None or warning in out["warnings"][0])


def test_prompt_templates_come_from_the_yaml(built_project: Path, tmp_path: Path, llm: FakeLLM,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    llm.script.append({"content": '{"queries": ["x"]}'})
    mcp = llm_mcp(built_project, tmp_path, llm, monkeypatch,
                  prompts={"rewrite": 'Give {n} rewrites of <<{query}>>{hint} as {{"queries": [...]}}'})
    mcp.ok("retriever_rewrite_query", {"query_list": "tides"})
    assert llm.prompts() == ['Give 3 rewrites of <<tides>> as {"queries": [...]}']
    bad = llm_mcp(built_project, tmp_path / "b", llm, monkeypatch, prompts={"rewrite": "Rewrite {question}"})
    assert "llm.prompts.rewrite: the template does not format" in bad.error("retriever_rewrite_query",
                                                                            {"query_list": "x"})


def test_without_an_llm_the_tools_say_what_to_set(built: Any) -> None:
    text = MCP(built).error("retriever_rewrite_query", {"query_list": "x"})
    assert "cannot work with this server's configuration" in text and "llm.base_url, llm.model" in text


def test_a_pipeline_runs_agentic_search_in_process(built_project: Path, tmp_path: Path, llm: FakeLLM) -> None:
    import asyncio

    import yaml
    from retriever.pipeline.runner import run_pipeline

    llm.respond = lambda prompt: json.dumps({"sufficient": True, "confidence": 1.0, "missing": ""})
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "a", "text": "what is BM25?"}\n{"_id": "b", "text": "how do vaccines work"}\n')
    servers = {"retriever": {"kind": "retriever", "config": str(built_project),
                             "set": {"llm": {"base_url": llm.url, "model": "tiny-judge"}}},
               "data": {"kind": "data", "params": {"queries_path": str(queries)}}}
    steps = ["data.load_queries", "retriever.retriever_init",
             "retriever.retriever_agentic_search"]
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump({"servers": servers, "pipeline": steps}, sort_keys=False))
    out = asyncio.run(run_pipeline(path, None, tmp_path / "out.json"))["variables"]
    assert [len(r) for r in out["rounds"]] == [1, 1] and out["ret_ids"][0][0] == "doc15"
    assert len(llm.requests) == 2


def test_the_deployed_service_never_merges_a_reranked_search_with_others() -> None:
    from retriever.api.models import SearchRequest
    from retriever.service.batcher import merge_key

    assert merge_key(SearchRequest(query_list="x")) is not None
    assert merge_key(SearchRequest.model_validate({"query_list": "x", "llm_rerank": {"depth": 5}})) is None
