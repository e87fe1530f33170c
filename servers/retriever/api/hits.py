"""The search that gives one list of hits per query (every kind of search/kinds.py) and the reply shape of
a call: what api/calls.py, the LLM tools and the deploy service's batcher share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..types import Hits
from .models import SCORES, BM25SearchRequest, Request, SearchRequest
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


def hits(engine: Retriever, r: BM25SearchRequest) -> Hits:
    """The hits of a one-list search: the kind its request asks for (r.kind, search/kinds.py) with
    the options the request has (a kind's request has only the options it takes)."""
    fields = type(r).model_fields
    options = r.options(*(name for name in (*FUSION, "query_instruction") if name in fields))
    ann = r.ann() if isinstance(r, SearchRequest) else None
    return engine.search(r.query_list, depth(engine, r), ann=ann, mode=r.kind, **r.options(*SEARCHED), **options)


def searches(r: Request) -> bool:
    """Whether `r` is a one-list search's request (what `hits` answers; a deployed service may merge
    several callers' requests of one kind into one search: service/batcher.py)."""
    return isinstance(r, BM25SearchRequest)


QUICK_K = 100  # hits (top_k + offset) at most of a search quick enough to run where it arrives


def quick(engine: Retriever, r: Request) -> bool:
    """Whether `r` is a search short enough to run where it arrives, in the compute thread's place
    (compute.here: an event loop serving it without the hand-offs there and back, about 0.1 ms each
    here; bench/LEAN.md call-overhead): one query, no filter, at most QUICK_K hits, of the open
    collection, whose embedder and indexes are in this process (`sentence_transformers`, FAISS and
    bm25s: no server to wait on), with no rerank stage and no LLM. Anything else, or a collection
    not yet opened, goes to the compute thread as before, and the loop goes on meanwhile."""
    query = r.given("query_list", r.given("query"))
    cfg = engine.config
    top_k = r.given("top_k")
    return (engine.session is not None and (isinstance(query, str) or isinstance(query, list) and len(query) == 1)
            and r.given("filters") is None and r.given("llm_rerank") is None
            and (cfg.top_k if top_k is None else top_k) + (r.given("offset", 0) or 0) <= QUICK_K
            and r.given("collection_name", r.given("collection")) in (None, cfg.collection_name)
            and cfg.backend in ("sentence_transformers", "bm25") and cfg.index_backend == "faiss"
            and cfg.rerank.url is None and cfg.rerank.model_name_or_path is None)
