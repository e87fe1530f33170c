"""The framework retrievers (retriever.integrations) inside their frameworks' own pipeline objects,
with the real packages: LlamaIndex (a query engine in its no-LLM mode, a QueryFusionRetriever),
Haystack (a Pipeline with a DocumentJoiner, saved to YAML and loaded back), LangChain (a runnable
chain). Their hits equal the library's own hybrid search (ids, order, scores to 1e-6), in process
(`from_yaml`) and from a real `retriever deploy` service with its token (`from_url`); filters in
each framework's syntax are translated and applied; a file chunk's citation comes through."""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # before haystack is imported: no network calls

import pytest
from haystack import Pipeline
from haystack.components.joiners import DocumentJoiner
from langchain_core.runnables import RunnableLambda
from llama_index.core import Settings
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import ResponseMode, get_response_synthesizer
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.vector_stores import FilterCondition, MetadataFilter, MetadataFilters
from retriever.api.agent import SearchRequest
from retriever.api.agent import search as agent_search
from retriever.errors import InvalidInputError, RemoteError
from retriever.integrations import haystack as hs
from retriever.integrations import langchain as lc
from retriever.integrations import llamaindex as li
from retriever.integrations import translate
from retriever.testing.folders import MARKERS, make_folder
from retriever.testing.projects import engine_for, write_project
from test_deploy import TOKEN, Deploy

Settings.llm = None  # LlamaIndex's own no-LLM mode (MockLLM, never called: no text is synthesised)
QUERIES = ["what is BM25?", "how do vaccines work", "dense retrieval with embeddings", "photosynthesis in plants",
           "black holes and gravity", "the immune system", "neural networks", "protein folding"]
K = 5
HAYSTACK = ["retriever.integrations.haystack"]  # Haystack 3 loads classes only from modules it is told to trust
Ranked = list[list[tuple[str, float]]]

# ---- each framework's own pipeline object, run over a list of queries -----------------------------


def llamaindex_query_engine(retriever: li.Retriever, queries: list[str]) -> Ranked:
    engine = RetrieverQueryEngine(retriever=retriever,
                                  response_synthesizer=get_response_synthesizer(response_mode=ResponseMode.NO_TEXT))
    return [[(n.node.node_id, n.score) for n in engine.query(q).source_nodes] for q in queries]


def llamaindex_fusion(retriever: li.Retriever, queries: list[str]) -> Ranked:
    fusion = QueryFusionRetriever([retriever], num_queries=1, mode="simple", similarity_top_k=K, use_async=True)
    return [[(n.node.node_id, n.score) for n in fusion.retrieve(q)] for q in queries]


def haystack_pipeline(component: hs.Retriever) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("retriever", component)
    pipeline.add_component("joiner", DocumentJoiner())
    pipeline.connect("retriever.documents", "joiner.documents")
    return pipeline


def haystack_run(pipeline: Pipeline, queries: list[str], **run: Any) -> Ranked:
    return [[(d.id, d.score) for d in pipeline.run({"retriever": {"query": q, **run}})["joiner"]["documents"]]
            for q in queries]


def haystack_yaml(component: hs.Retriever, queries: list[str]) -> Ranked:
    """The pipeline, saved to YAML and loaded back: both answer the same."""
    pipeline = haystack_pipeline(component)
    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=HAYSTACK)
    before, after = haystack_run(pipeline, queries), haystack_run(loaded, queries)
    assert after == before
    return after


def format_docs(docs: list[Any]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def langchain_chain(retriever: lc.Retriever, queries: list[str]) -> Ranked:
    ranked = retriever | RunnableLambda(lambda docs: [(d.id, d.metadata["score"]) for d in docs])
    return ranked.batch(queries)  # type: ignore[no-any-return]


PIPELINES: list[Any] = [
    pytest.param(li.Retriever, llamaindex_query_engine, id="llamaindex-query-engine"),
    pytest.param(li.Retriever, llamaindex_fusion, id="llamaindex-fusion"),
    pytest.param(hs.Retriever, haystack_yaml, id="haystack-pipeline-yaml"),
    pytest.param(lc.Retriever, langchain_chain, id="langchain-chain"),
]


def hybrid(engine: Any, queries: list[str], k: int = K, filters: dict[str, Any] | None = None) -> Ranked:
    """The library's own hybrid search, scores 0..1 (the agent's)."""
    return [[(h.id, h.score) for h in row] for row in engine.hybrid_search(queries, k, scale_score=True,
                                                                              filters=filters)]


def assert_same(got: Ranked, want: Ranked) -> None:
    assert [[i for i, _ in row] for row in got] == [[i for i, _ in row] for row in want]
    for g, w in zip(got, want):
        assert [s for _, s in g] == pytest.approx([s for _, s in w], abs=1e-6)


@pytest.fixture(scope="module")
def library(built_project: Path) -> Any:
    engine = engine_for(built_project)
    engine.init()
    return engine


# ---- in process (from_yaml) -----------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "run"), PIPELINES)
def test_pipeline_equals_library_hybrid(kind: Any, run: Callable[..., Ranked], built_project: Path,
                                        library: Any) -> None:
    got = run(kind.from_yaml(built_project, top_k=K), QUERIES)
    assert_same(got, hybrid(library, QUERIES))
    assert all(len(row) == K for row in got)


def test_async_paths_equal_library_hybrid(built_project: Path, library: Any) -> None:
    async def all_three() -> list[Ranked]:
        llama = li.Retriever.from_yaml(built_project, top_k=K)
        hay = haystack_pipeline(hs.Retriever.from_yaml(built_project, top_k=K))
        chain = lc.Retriever.from_yaml(built_project, top_k=K)
        out = [[[(n.node.node_id, n.score) for n in await llama.aretrieve(q)] for q in QUERIES]]
        out.append([[(d.id, d.score) for d in (await hay.run_async({"retriever": {"query": q}}))["joiner"]["documents"]]
                    for q in QUERIES])
        out.append([[(d.id, d.metadata["score"]) for d in await chain.ainvoke(q)] for q in QUERIES])
        return out

    for got in asyncio.run(all_three()):
        assert_same(got, hybrid(library, QUERIES))


def test_langchain_format_docs_chain_and_per_call_options(built_project: Path, library: Any) -> None:
    retriever = lc.Retriever.from_yaml(built_project, top_k=K)
    chain = retriever | RunnableLambda(format_docs)
    want = library.hybrid_search(QUERIES[:1], K, scale_score=True)[0]
    assert chain.invoke(QUERIES[0]) == "\n\n".join(h.text for h in want)
    docs = retriever.invoke(QUERIES[0], k=2)
    assert [d.id for d in docs] == [h.id for h in want[:2]]
    score = docs[0].metadata.pop("score")
    assert docs[0].metadata == want[0].metadata and score == pytest.approx(want[0].score, abs=1e-6)


def test_haystack_yaml_names_the_parameter_file_and_a_token_variable_only(built_project: Path) -> None:
    text = haystack_pipeline(hs.Retriever.from_yaml(built_project, top_k=3, candidate_depth=40)).dumps()
    assert f"parameter_file: {built_project}" in text and "candidate_depth: 40" in text
    assert "RETRIEVER_TOKEN" in text and "type: env_var" in text
    loaded = Pipeline.loads(text, allowed_modules=HAYSTACK).get_component("retriever")
    assert (loaded.parameter_file, loaded.top_k, loaded.options) == (str(built_project), 3, {"candidate_depth": 40})


def test_dense_mode_and_bad_options_are_named(built_project: Path, library: Any) -> None:
    dense = li.Retriever.from_yaml(built_project, top_k=3, mode="dense", scale_score=False).retrieve(QUERIES[0])
    want = library.search(QUERIES[:1], 3, mode="dense")[0]
    assert [(n.node.node_id, n.score) for n in dense] == [(h.id, pytest.approx(h.score, abs=1e-6)) for h in want]
    with pytest.raises(InvalidInputError, match="unknown search option.*top_kk.*the options are mode, top_k"):
        lc.Retriever.from_yaml(built_project, top_kk=3)
    with pytest.raises(InvalidInputError, match="mode 'bm25'.*fusion"):
        li.Retriever.from_yaml(built_project, mode="bm25", fusion="rrf").retrieve("x")
    with pytest.raises(InvalidInputError, match="parameter_file .* or url"):
        hs.Retriever()
    with pytest.raises(InvalidInputError, match="filter= \\(LangChain's dictionaries"):
        lc.Retriever.from_yaml(built_project, filters={"field": "id", "operator": "==", "value": "doc01"})


# ---- filters --------------------------------------------------------------------------------------

OURS = {"operator": "AND", "conditions": [{"field": "meta.topic", "operator": "==", "value": "biology"},
                                          {"field": "meta.year", "operator": ">=", "value": 2020}]}
FILTERED = [
    pytest.param(lambda p: li.Retriever.from_yaml(p, top_k=K, filters=MetadataFilters(filters=[
        MetadataFilter(key="topic", value="biology"), MetadataFilter(key="year", value=2020, operator=">=")])),
        lambda r, q: [n.node.node_id for n in r.retrieve(q)], id="llamaindex"),
    pytest.param(lambda p: hs.Retriever.from_yaml(p, top_k=K),
                 lambda r, q: [d.id for d in r.run(q, filters=OURS)["documents"]], id="haystack-per-run"),
    pytest.param(lambda p: lc.Retriever.from_yaml(p, top_k=K, filter={"topic": "biology", "year": {"$gte": 2020}}),
                 lambda r, q: [d.id for d in r.invoke(q)], id="langchain"),
    pytest.param(lambda p: lc.Retriever.from_yaml(p, top_k=K),
                 lambda r, q: [d.id for d in r.invoke(q, filter={"$and": [{"topic": {"$eq": "biology"}},
                                                                           {"year": {"$gte": 2020}}]})],
                 id="langchain-per-call"),
]


@pytest.mark.parametrize(("make", "ids"), FILTERED)
def test_filter_translated_and_applied(make: Callable[[Path], Any], ids: Callable[[Any, str], list[str]],
                                       built_project: Path, library: Any) -> None:
    retriever = make(built_project)
    for query in QUERIES[:4]:
        want = [i for i, _ in hybrid(library, [query], filters=OURS)[0]]
        got = ids(retriever, query)
        assert got == want and got
        assert got != [i for i, _ in hybrid(library, [query])[0]]  # the filter changed the answer
        docs = library.fetcher("test")(got)
        assert all(docs[i].metadata["topic"] == "biology" and docs[i].metadata["year"] >= 2020 for i in got)


@pytest.mark.parametrize(("translate_fn", "given", "ours"), [
    pytest.param(translate.llamaindex, MetadataFilters(filters=[MetadataFilter(key="tag", value=["a", "b"], operator="nin")]),
                 {"field": "meta.tag", "operator": "not in", "value": ["a", "b"]}, id="llamaindex-nin"),
    pytest.param(translate.llamaindex, MetadataFilters(condition=FilterCondition.NOT, filters=[
        MetadataFilter(key="a", value=1), MetadataFilter(key="b", value=2, operator="!=")]),
        {"operator": "NOT", "conditions": [{"operator": "OR", "conditions": [
            {"field": "meta.a", "operator": "==", "value": 1}, {"field": "meta.b", "operator": "!=", "value": 2}]}]},
        id="llamaindex-not-is-none-of"),
    pytest.param(translate.llamaindex, MetadataFilters(condition="or", filters=[
        MetadataFilter(key="a", value=1), MetadataFilters(filters=[MetadataFilter(key="b", value=2, operator="<")])]),
        {"operator": "OR", "conditions": [{"field": "meta.a", "operator": "==", "value": 1},
                                          {"field": "meta.b", "operator": "<", "value": 2}]}, id="llamaindex-nested"),
    pytest.param(translate.langchain, {"a": 1, "b": {"$gt": 2, "$lte": 5}},
                 {"operator": "AND", "conditions": [{"field": "meta.a", "operator": "==", "value": 1}, {
                     "operator": "AND", "conditions": [{"field": "meta.b", "operator": ">", "value": 2},
                                                       {"field": "meta.b", "operator": "<=", "value": 5}]}]},
                 id="langchain-keys-and-range"),
    pytest.param(translate.langchain, {"$or": [{"a": {"$in": [1, 2]}}, {"$not": {"b": {"$neq": "x"}}}]},
                 {"operator": "OR", "conditions": [{"field": "meta.a", "operator": "in", "value": [1, 2]}, {
                     "operator": "NOT", "conditions": [{"field": "meta.b", "operator": "!=", "value": "x"}]}]},
                 id="langchain-or-not"),
    pytest.param(translate.haystack, OURS, OURS, id="haystack-as-is"),
])
def test_translation(translate_fn: Callable[[Any], Any], given: Any, ours: dict[str, Any]) -> None:
    assert translate_fn(given) == ours


@pytest.mark.parametrize(("translate_fn", "given", "says"), [
    pytest.param(translate.llamaindex, MetadataFilters(filters=[MetadataFilter(key="t", value="x", operator="text_match")]),
                 "operator 'text_match' has no equal here; the operators that map are ==", id="llamaindex-text-match"),
    pytest.param(translate.langchain, {"title": {"$like": "%x%"}}, "operator '\\$like' has no equal here",
                 id="langchain-like"),
    pytest.param(translate.langchain, {"$nor": [{"a": 1}]}, "'\\$nor' has no equal here", id="langchain-nor"),
    pytest.param(translate.langchain, {"a": [1, 2]}, "LangChain filter: .*value must be a string", id="langchain-list"),
    pytest.param(translate.haystack, {"field": "content", "operator": "==", "value": "x"}, "field 'content' cannot",
                 id="haystack-content"),
    pytest.param(translate.haystack, {"field": "meta.a", "operator": "like", "value": "x"},
                 "Haystack filter: .*unknown operator 'like'", id="haystack-unknown-operator"),
])
def test_untranslatable_filter_is_refused_with_what_maps(translate_fn: Callable[[Any], Any], given: Any,
                                                         says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        translate_fn(given)


# ---- citations of synced files, and a deploy service ----------------------------------------------


@pytest.fixture(scope="module")
def synced_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synced")
    make_folder(root / "docs")
    config = write_project(root / "proj", corpus="", corpus_path=None, sources=[{"path": str(root / "docs")}])
    engine = engine_for(config)
    engine.init()
    engine.sync(engine.config.sources)
    return config


@pytest.fixture(scope="module")
def service(synced_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deploy]:
    d = Deploy(synced_project, tmp_path_factory.mktemp("deploy"))
    yield d
    d.stop()


def cited(framework: str, retriever: Any, query: str) -> list[tuple[str, float, dict[str, Any]]]:
    """(id, score, metadata with `source`) of each hit, as each framework carries them."""
    if framework == "llamaindex":
        return [(n.node.node_id, n.score, n.node.metadata) for n in retriever.retrieve(query)]
    if framework == "haystack":
        return [(d.id, d.score, d.meta) for d in retriever.run(query)["documents"]]
    return [(d.id, d.metadata.pop("score"), d.metadata) for d in retriever.invoke(query)]


FRAMEWORKS = {"llamaindex": li.Retriever, "haystack": hs.Retriever, "langchain": lc.Retriever}


@pytest.mark.parametrize("where", ["library", "service"])
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_citations_are_the_agent_s(framework: str, where: str, synced_project: Path, request: Any) -> None:
    kind = FRAMEWORKS[framework]
    retriever = kind.from_yaml(synced_project, top_k=3) if where == "library" else \
        kind.from_url(request.getfixturevalue("service").url, token=TOKEN, top_k=3)
    engine = engine_for(synced_project)
    for marker, place in list(MARKERS.items())[:4]:
        agent = agent_search(engine, SearchRequest(query=marker, top_k=3))["results"][0]["hits"]
        got = cited(framework, retriever, marker)
        assert [i for i, _, _ in got] == [h["id"] for h in agent]
        assert [round(s, 4) for _, s, _ in got] == [h["score"] for h in agent]
        assert [m["source"] for _, _, m in got] == [h["source"] for h in agent]
        assert [m for _, _, m in got][0]["source"].items() >= {"document": place["path"], **place}.items()


def test_from_url_equals_library_sync_and_async(service: Deploy, synced_project: Path) -> None:
    engine = engine_for(synced_project)
    engine.init()
    queries = list(MARKERS)[4:] + ["filler text about the weather"]
    want = hybrid(engine, queries)
    assert_same(llamaindex_query_engine(li.Retriever.from_url(service.url, token=TOKEN, top_k=K), queries), want)
    assert_same(langchain_chain(lc.Retriever.from_url(service.url, token=TOKEN, top_k=K), queries), want)
    assert_same(haystack_run(haystack_pipeline(hs.Retriever.from_url(service.url, token=TOKEN, top_k=K)), queries),
                want)

    async def llama_async() -> Ranked:
        r = li.Retriever.from_url(service.url, token=TOKEN, top_k=K)
        return [[(n.node.node_id, n.score) for n in await r.aretrieve(q)] for q in queries]

    assert_same(asyncio.run(llama_async()), want)
    flt = {"field": "meta.format", "operator": "==", "value": "pdf"}
    got = hs.Retriever.from_url(service.url, token=TOKEN, top_k=K).run(queries[0], filters=flt)["documents"]
    assert [(d.id, d.score) for d in got] == [(i, pytest.approx(s, abs=1e-6)) for i, s in hybrid(engine, queries[:1],
                                                                                                   filters=flt)[0]]
    assert got and all(d.meta["source"]["format"] == "pdf" for d in got)


def test_from_url_token_from_the_environment_and_refused_without(service: Deploy, monkeypatch: Any) -> None:
    monkeypatch.setenv("RETRIEVER_TOKEN", TOKEN)
    text = haystack_pipeline(hs.Retriever.from_url(service.url, top_k=2)).dumps()
    assert TOKEN not in text and "RETRIEVER_TOKEN" in text
    assert len(haystack_run(Pipeline.loads(text, allowed_modules=HAYSTACK), ["lanterns"])[0]) == 2
    with pytest.raises(ValueError, match="Cannot serialize token-based secret"):  # Haystack's own refusal
        haystack_pipeline(hs.Retriever.from_url(service.url, token=TOKEN)).dumps()
    with pytest.raises(RemoteError, match="answered 401.*from_url\\(url, token=...\\)") as wrong:
        lc.Retriever.from_url(service.url, token="not-the-token").invoke("lanterns")
    assert "not-the-token" not in str(wrong.value)


def test_a_service_that_is_not_there_is_named() -> None:
    from retriever.integrations.core import SearchOptions, Service
    from retriever.testing.net import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RemoteError, match=f"{url}/search: cannot reach it .*after 0 retries.*retriever deploy"):
        Service(url, "a-token", max_retries=0).search(["x"], SearchOptions())
    with pytest.raises(RemoteError, match="cannot reach it"):
        asyncio.run(Service(url, "a-token", max_retries=0).asearch(["x"], SearchOptions()))


# ---- the extras ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    pytest.param("llamaindex", "llama_index.core.base.base_retriever", "llamaindex", id="llamaindex"),
    pytest.param("haystack", "haystack", "haystack", id="haystack"),
    pytest.param("langchain", "langchain_core.retrievers", "langchain", id="langchain"),
])
def test_a_missing_framework_names_the_pip_install(module: str, blocked: str, extra: str, monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)  # what an import sees where the package is not installed
    monkeypatch.delitem(sys.modules, f"retriever.integrations.{module}")
    with pytest.raises(ImportError, match=f"pip install 'mcp-retriever\\[{extra}\\]'"):
        importlib.import_module(f"retriever.integrations.{module}")


def test_from_url_pages_through_the_service_s_reply_budget(synced_project: Path,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    small = Deploy(synced_project, tmp_path_factory.mktemp("small"), "reply.max_bytes=1500")
    try:
        raw = small.search(query_list=["filler text about the weather"], top_k=10, mode="hybrid", return_metadata=True)
        assert raw["truncated"]["next_offset"] < 10  # one reply would not hold them all
        got = li.Retriever.from_url(small.url, token=TOKEN, top_k=10).retrieve("filler text about the weather")
    finally:
        small.stop()
    engine = engine_for(synced_project)
    engine.init()
    assert_same([[(n.node.node_id, n.score) for n in got]], hybrid(engine, ["filler text about the weather"], k=10))
