"""The searches that give one list of hits per query (dense, BM25, hybrid, sparse) and the reply shape of
a call: what api/calls.py, the LLM tools and the deploy service's batcher share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..types import Hits
from .models import SCORES, BM25SearchRequest, HybridSearchRequest, Request, SearchRequest, SparseSearchRequest
from .replies import Shape

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

SEARCHED = (*SCORES, "collection_name")  # the options of a search of one collection
FUSION = ("fusion", "vector_weight", "rrf_k", "candidate_depth")


def shape(engine: Retriever, r: Any, fused: bool = False) -> Shape:
    return Shape.of(engine.base_config.reply, engine.shared, r.offset, r.max_bytes, r.max_chars, r.return_text,
                    r.return_metadata, fused)


def depth(engine: Retriever, r: Any) -> int | None:
    """Search `offset` deeper, so the page after the first `offset` hits is full."""
    if not r.offset:
        return r.top_k
    return (engine.config.top_k if r.top_k is None else r.top_k) + r.offset


def search_hits(engine: Retriever, r: SearchRequest) -> Hits:
    return engine.search(r.query_list, depth(engine, r), r.query_instruction, **r.options(*SEARCHED), ann=r.ann())


def hybrid_hits(engine: Retriever, r: HybridSearchRequest) -> Hits:
    return engine.hybrid_search(r.query_list, depth(engine, r), r.query_instruction, **r.options(*FUSION, *SEARCHED),
                                ann=r.ann())


def bm25_hits(engine: Retriever, r: BM25SearchRequest) -> Hits:
    return engine.bm25_search(r.query_list, depth(engine, r), **r.options(*SEARCHED))


def sparse_hits(engine: Retriever, r: SparseSearchRequest) -> Hits:
    return engine.sparse_search(r.query_list, depth(engine, r), **r.options(*SEARCHED))


# The searches with one list of hits per query of `query_list`, whatever the other queries of the
# call: a deployed service may merge several callers' requests into one (service/batcher.py).
HITS: dict[type[Request], Callable[[Retriever, Any], Hits]] = {
    SearchRequest: search_hits, HybridSearchRequest: hybrid_hits, BM25SearchRequest: bm25_hits,
    SparseSearchRequest: sparse_hits}
