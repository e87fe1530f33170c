"""The LLM-assisted tools (llm/): query rewriting, agentic rounds, LLM reranking of any one-list
search, triple extraction, graph search and filter inference. Each reply carries `warnings` naming
what the LLM failed at; a failure leaves the plain retrieval result, never an empty or invented one."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidInputError, LimitError, LLMError, NotYetSupportedError
from ..search.fusion import rrf
from ..search.results import as_queries
from ..security.limits import check_count, check_limits
from ..store.locks import collection_lock
from ..types import Hits, Payload
from .hits import hits
from .models import (
    SCORES,
    SEARCH_REQUESTS,
    AgenticSearchRequest,
    BM25SearchRequest,
    ExtractTriplesRequest,
    GraphSearchRequest,
    InferFiltersRequest,
    RewriteRequest,
    SearchRequest,
)

if TYPE_CHECKING:
    from ..engine.retriever import Retriever
    from ..llm.client import ChatClient
    from ..types import Hit



def client(engine: Retriever) -> ChatClient:
    from ..llm.client import ChatClient

    return ChatClient(engine.base_config.llm, engine.config.limits.max_llm_requests)


def check_requests(engine: Retriever, tool: str, requests: int, per: str) -> None:
    """Refuse before any is sent a call that needs more LLM requests than limits.max_llm_requests."""
    check_count(f"{tool}: LLM requests this call needs ({per})", requests, "max_llm_requests",
                engine.config.limits.max_llm_requests, "split the call")


def with_warnings(reply: Payload, warnings: list[str]) -> Payload:
    return {**reply, "warnings": warnings} if warnings else reply


def mode_search(engine: Retriever, mode: str, queries: list[str], k: int | None, r: Any) -> Hits:
    """`queries` searched with `mode` (a kind of search/kinds.py, its request from
    models.SEARCH_REQUESTS) and the request's filters and scores."""
    kind = SEARCH_REQUESTS.get(mode)
    if kind is None:
        raise InvalidInputError(f"mode must be one of {', '.join(SEARCH_REQUESTS)}, got {mode!r}")
    options = {**r.options(*SCORES), "collection_name": getattr(r, "collection_name", None)}
    if "query_instruction" in kind.model_fields:
        options["query_instruction"] = r.query_instruction
    if "candidate_depth" in kind.model_fields:
        options["candidate_depth"] = getattr(r, "candidate_depth", None)
    return hits(engine, kind(query_list=queries, top_k=k, **options))


def reranked(engine: Retriever, r: SearchRequest | BM25SearchRequest, search: Any, k: int | None) -> tuple[Hits, Payload]:
    """The search run `llm_rerank.depth` deep (at least), its first hits reranked by the LLM, cut to k."""
    from ..llm.tasks import rerank

    opt = r.llm_rerank
    if opt is None:
        raise InvalidInputError("llm_rerank is not set")
    top = engine.config.top_k if k is None else k
    check_requests(engine, "llm_rerank", len(as_queries(r.query_list)), "at least one per query")
    hits = search(max(top, opt.depth))
    out, warnings = rerank(client(engine), as_queries(r.query_list), hits, opt.method, opt.depth, opt.batch_size)
    return [h[:top] for h in out], with_warnings({"llm_rerank": opt.model_dump()}, warnings)


def rewrite_query(engine: Retriever, r: RewriteRequest) -> Payload:
    from ..llm.tasks import rewrite

    queries = as_queries(r.query_list)
    check_limits(engine.config.limits, len(queries), 1)
    check_requests(engine, "retriever_rewrite_query", len(queries), "one per query")
    rewritten, warnings = rewrite(client(engine), queries, r.n)
    return with_warnings({"queries": rewritten}, warnings)


def agentic_search(engine: Retriever, r: AgenticSearchRequest) -> tuple[Hits, Payload]:
    """Per query: search, let the LLM judge the hits, rewrite the query from what is missing, search
    again (the rounds' hits fused with RRF), until judged sufficient or `max_rounds`."""
    from ..llm.tasks import judge, rewrite

    k = engine.config.top_k if r.top_k is None else r.top_k
    questions = as_queries(r.query_list)
    check_limits(engine.config.limits, len(questions), k)
    check_requests(engine, "retriever_agentic_search", len(questions) * (2 * r.max_rounds - 1),
                   f"up to a judgement and a rewrite per round: queries x (2 x max_rounds {r.max_rounds} - 1)")
    llm = client(engine)
    out, rounds, warnings = [], [], []
    for question in questions:
        query, lists, log = question, [], []
        fused: list[Hit] = []
        for n in range(1, r.max_rounds + 1):
            lists.append(mode_search(engine, r.mode, [query], k, r)[0])
            fused = fuse_rounds(lists, k)
            try:
                j = judge(llm, question, [h.text for h in fused])
            except LLMError as e:
                warnings.append(f"round {n} of {question!r}: judging failed, the hits so far returned: {e}")
                log.append({"round": n, "query": query, "judgement": None})
                break
            log.append({"round": n, "query": query, "judgement": j.as_dict()})
            if (j.sufficient and j.confidence >= r.sufficiency) or n == r.max_rounds:
                break
            rewritten, failed = rewrite(llm, [question], 1, [j.missing])
            if failed:
                warnings += failed
                break
            query = rewritten[0][0]
        out.append(fused)
        rounds.append(log)
    return out, with_warnings({"rounds": rounds}, warnings)


def fuse_rounds(lists: list[list[Hit]], k: int) -> list[Hit]:
    if len(lists) == 1:
        return lists[0][:k]
    by_id = {h.id: h for hits in reversed(lists) for h in hits}
    fused: list[tuple[str, float]] = rrf([[(h.id, h.score) for h in hits] for hits in lists], limit=k)
    return [replace(by_id[i], score=s) for i, s in fused]


_EXTRACTING = threading.Lock()


def extract_triples(engine: Retriever, r: ExtractTriplesRequest) -> Payload:
    """Triples of the given (or every live) document into the collection's graph."""
    from ..llm.graph import Graph, graph_path
    from ..llm.tasks import triples

    s = engine.need("retriever_extract_triples")
    collection, limit = s.collection, s.config.limits.max_documents
    ids = as_queries(r.ids, "ids") if r.ids is not None else [collection.ids[i] for i in collection.live_rows()]
    if len(ids) > limit:
        raise LimitError(f"retriever_extract_triples: {len(ids)} documents in one call, the limit is {limit} "
                         "(limits.max_documents); pass ids in batches")
    check_requests(engine, "retriever_extract_triples", len(ids), "one per document")
    unknown = [i for i in ids if i not in collection.row_of]
    if unknown:
        raise InvalidInputError(f"retriever_extract_triples: no document {unknown[0]!r} ({len(unknown)} unknown)")
    llm = client(engine)
    t = time.perf_counter()
    found = triples(llm, [collection.get(collection.row_of[i]).text for i in ids])
    ok = [(i, f) for i, f in zip(ids, found) if not isinstance(f, LLMError)]
    failed = {i: str(f) for i, f in zip(ids, found) if isinstance(f, LLMError)}
    limits = s.config.limits
    check_count("retriever_extract_triples: triples found in one call", sum(len(f) for _, f in ok), "max_triples",
                limits.max_triples, "pass fewer ids per call; nothing was added")
    path = graph_path(s.config.paths().docs)
    with _EXTRACTING, collection_lock(s.config.paths().docs):
        graph = Graph.load(path) if path.is_file() else Graph((), (), llm.cfg.model)
        graph = graph.merged([i for i, _ in ok], [f for _, f in ok], llm.cfg.model)
        check_count("retriever_extract_triples: triples the graph would hold", len(graph.triples),
                    "max_graph_triples", limits.max_graph_triples, "nothing was added")
        graph.save(path)
    reply = {"graph_path": str(path), "documents": len(ok), "triples_added": sum(len(f) for _, f in ok),
             "triples": len(graph.triples), "failed": failed, "seconds": round(time.perf_counter() - t, 2)}
    return with_warnings(reply, [f"{len(failed)} documents got no triples (see failed)"] if failed else [])


_VECTORS: dict[tuple[str, int, str], np.ndarray] = {}


def graph_search(engine: Retriever, r: GraphSearchRequest) -> Hits:
    """Seed hits from the `mode` search, then `hops` over the collection's triples (llm/graph.py)."""
    from ..llm.graph import Graph, graph_hits, graph_path, hops
    from ..types import Hit

    s = engine.searched("retriever_graph_search", r.collection_name)
    if s.embedder is None:
        raise NotYetSupportedError("retriever_graph_search scores triples with the embedding model; backend bm25 "
                                   "has none")
    path = graph_path(s.config.paths().docs)
    graph = Graph.load(path)
    key = (str(path), path.stat().st_mtime_ns, s.embedder.model_id)
    if key not in _VECTORS:
        _VECTORS.clear()
        _VECTORS[key] = s.embedder.encode_passages([" ".join(t) for t in graph.triples]) if graph.triples \
            else np.empty((0, s.embedder.dimension), np.float32)
    vectors = _VECTORS[key]
    queries = as_queries(r.query_list)
    check_limits(s.config.limits, len(queries), max(r.seed_k or 0, r.top_k or s.config.top_k))
    seeds = mode_search(engine, r.mode, queries, r.seed_k, r)
    qvecs = s.embedder.encode_queries(queries, r.query_instruction or s.config.query_instruction)
    k = s.config.top_k if r.top_k is None else r.top_k
    collection = s.collection

    def hit_of(doc: str, score: float) -> Hit | None:
        row = collection.row_of.get(doc)
        if row is None:
            return None
        d = collection.get(row)
        return Hit(row, d.id, d.text, score, d.metadata)

    return [graph_hits(seed, graph, hops(graph, vectors, q, [h.id for h in seed], r.hops, r.beam), hit_of, k)
            for seed, q in zip(seeds, qvecs)]


def infer_filters(engine: Retriever, r: InferFiltersRequest) -> Payload:
    from ..llm.tasks import infer_filter

    queries = as_queries(r.query_list)
    check_limits(engine.config.limits, len(queries), 1)
    check_requests(engine, "retriever_infer_filters", len(queries), "one per query")
    llm = client(engine)
    description = r.description or engine.base_config.llm.collection_description
    found, warnings = [], []
    for query in queries:
        f, w = infer_filter(llm, query, description)
        found.append(f)
        warnings += w
    return with_warnings({"filters": found}, warnings)
