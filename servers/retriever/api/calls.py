"""Each request to the engine call that serves it and the reply it gets: the one place where a
tool's arguments meet the engine. Runs on a worker thread (the engine's calls block)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .models import (
    AddRequest,
    BatchSearchRequest,
    BM25IndexRequest,
    BM25SearchRequest,
    DeleteRequest,
    EmbedRequest,
    FanoutSearchRequest,
    HybridBatchSearchRequest,
    HybridSearchRequest,
    IndexRequest,
    InitRequest,
    ListCollectionsRequest,
    MultiQuerySearchRequest,
    Request,
    SearchRequest,
)
from .replies import Shape

if TYPE_CHECKING:
    from ..engine import Retriever

Payload = dict[str, Any]
SCORES = ("score_threshold", "scale_score", "filters")
FUSION = ("fusion", "vector_weight", "rrf_k", "candidate_depth")


def shape(engine: Retriever, r: Any, fused: bool = False) -> Shape:
    return Shape.of(engine.base_config.reply, engine.shared, r.offset, r.max_bytes, r.max_chars, r.return_text,
                    r.return_metadata, fused)


def depth(engine: Retriever, r: Any) -> int | None:
    """Search `offset` deeper, so the page after the first `offset` hits is full."""
    if not r.offset:
        return r.top_k
    return (engine.config.top_k if r.top_k is None else r.top_k) + r.offset


def init(engine: Retriever, r: InitRequest) -> Payload:
    return engine.init(**r.model_dump())


def embed(engine: Retriever, r: EmbedRequest) -> Payload:
    return engine.embed(r.embedding_path, r.overwrite)


def index(engine: Retriever, r: IndexRequest) -> Payload:
    return engine.index(r.embedding_path, r.overwrite, r.index_path)


def bm25_index(engine: Retriever, r: BM25IndexRequest) -> Payload:
    return engine.bm25_index(r.overwrite)


def add(engine: Retriever, r: AddRequest) -> Payload:
    return engine.add(r.documents)


def delete(engine: Retriever, r: DeleteRequest) -> Payload:
    return engine.delete(r.ids, r.filters)


def list_collections(engine: Retriever, r: ListCollectionsRequest) -> Payload:
    return engine.list_collections()


def search(engine: Retriever, r: SearchRequest) -> Payload:
    hits = engine.search(r.query_list, depth(engine, r), r.query_instruction, **r.options(*SCORES))
    return shape(engine, r).hits(hits)


def batch_search(engine: Retriever, r: BatchSearchRequest) -> Payload:
    groups = engine.batch_search(r.batch_query_list, depth(engine, r), r.query_instruction, **r.options(*SCORES))
    return shape(engine, r).batch(groups)


def hybrid_search(engine: Retriever, r: HybridSearchRequest) -> Payload:
    hits = engine.hybrid_search(r.query_list, depth(engine, r), r.query_instruction, **r.options(*FUSION, *SCORES))
    return shape(engine, r, fused=True).hits(hits)


def hybrid_batch_search(engine: Retriever, r: HybridBatchSearchRequest) -> Payload:
    groups = engine.hybrid_batch_search(r.batch_query_list, depth(engine, r), query_instruction=r.query_instruction,
                                        **r.options(*FUSION, *SCORES))
    return shape(engine, r, fused=True).batch(groups)


def multi_query_search(engine: Retriever, r: MultiQuerySearchRequest) -> Payload:
    hits = engine.multi_query_search(r.question_list, depth(engine, r), r.mode, r.query_instruction,
                                     r.candidate_depth, **r.options(*SCORES))
    return shape(engine, r, fused=True).hits(hits)


def fanout_search(engine: Retriever, r: FanoutSearchRequest) -> Payload:
    hits, errors = engine.fanout_search(r.query_list, r.collections, top_k=depth(engine, r), mode=r.mode,
                                        query_instruction=r.query_instruction, candidate_depth=r.candidate_depth,
                                        **r.options(*SCORES))
    return {**shape(engine, r, fused=True).hits(hits, collections=True), "errors": errors}


def bm25_search(engine: Retriever, r: BM25SearchRequest) -> Payload:
    return shape(engine, r).hits(engine.bm25_search(r.query_list, depth(engine, r), **r.options(*SCORES)))


Call = Callable[["Retriever", Any], Payload]
CALLS: dict[type[Request], Call] = {
    InitRequest: init, EmbedRequest: embed, IndexRequest: index, BM25IndexRequest: bm25_index, AddRequest: add,
    DeleteRequest: delete, ListCollectionsRequest: list_collections, SearchRequest: search,
    BatchSearchRequest: batch_search, HybridSearchRequest: hybrid_search, HybridBatchSearchRequest: hybrid_batch_search,
    MultiQuerySearchRequest: multi_query_search, FanoutSearchRequest: fanout_search, BM25SearchRequest: bm25_search,
}


def call(engine: Retriever, request: Request) -> Payload:
    """Serve one request (the Python and command-line entry to the same code the tools run)."""
    return CALLS[type(request)](engine, request)
