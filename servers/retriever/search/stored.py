"""Dense, BM25 and hybrid search where the index backend holds the documents (Milvus with is_demo,
which ranks dense only, or with `index_backend_configs.milvus.full_text`, which ranks BM25 too). There are no corpus rows
here: each retriever's hits come from the backend with their text, and hybrid fuses them by id
with the same fusions as a local collection (fusion.py: adaptive, rrf, convex).

Each query's scales, query gate and cross-check are the local collection's rule
(search/hybrid.py QueryFusion); the fusion is search/hybrid.py `fused`. What differs from a local
collection's hybrid (search/rankers.py Hybrid):

- adaptive fusion divides BM25 scores by the query's highest possible score, as locally, where
  the backend knows it: Milvus does not expose per-term document frequencies, so with
  `full_text_analyzer: bm25s` the writer keeps them in Milvus (indexes/milvus/df.py) and the
  bound is (k1 + 1) times the sum of the query's terms' idf (bm25s's bound times Milvus's (k1 + 1):
  the same scaled scores). Without them (`full_text_analyzer: milvus`) each query's BM25 scores
  are divided by its own best BM25 score (the rule used for unnormalised dense inner products),
  and the gate and the cross-check, which need the bound, keep the fusion's priors.
- `hybrid.vector_weight: null` (auto) is 0.5: the self-retrieval check (calibration.py) reads
  local rows and keeps its result in a local file, neither of which exists in this mode.
- a caller that sees only some documents (security/visibility.py) gets, in every list, only those:
  the store handed in is `seen_by` its rule (kinds.held_search), which the backend ANDs into each
  search as an expression. Its BM25 list (alone and in hybrid) and adaptive fusion's bound are not
  Milvus's, whose statistics are the whole collection's: the backend scores them over the documents
  it sees (indexes/milvus/seen.py: their terms read from Milvus once per rule and collection version),
  the scores a collection of only those documents gives; its query gate is its own per rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from .. import compute
from ..config import HybridConfig
from ..embedders import Embedder
from ..errors import NotYetSupportedError
from ..indexes import HeldDocuments
from ..security import visibility
from ..session import Session, seen_key
from ..types import Hit, Hits
from . import learned_sparse, signals
from .fusion import SCALERS
from .hybrid import QueryFusion, fused, fused_hits, fused_scale
from .rankers import Dense, Hybrid, text_only
from .results import as_groups, pick
from .spec import Spec, staged
from .stages import apply, stages

AUTO_VECTOR_WEIGHT = 0.5  # vector_weight null in this mode (no local calibration)


def dense(s: Session, store: HeldDocuments, spec: Spec) -> Hits:
    """Dense hits from the backend, `spec.k` per query."""
    embedder, ranker = _embedder(s, "dense search"), cast(Dense, spec.ranker)

    def rank(chunk: list[str], depth: int) -> Hits:
        vectors = embedder.encode_queries(chunk, pick(ranker.query_instruction, s.config.query_instruction))
        return store.hits(s.dense, vectors, depth, spec.filter, ranker.ann)

    return staged(s, spec, lambda: ranker.scale(s), rank)


def bm25(s: Session, store: HeldDocuments, spec: Spec) -> Hits:
    """BM25 hits ranked by the backend, `spec.k` per query."""
    text_only(s, "BM25 search")
    return staged(s, spec, lambda: SCALERS["bm25"],
                  lambda chunk, depth: store.text_hits(s.dense, chunk, depth, spec.filter))


def sparse(s: Session, store: HeldDocuments, spec: Spec) -> Hits:
    """Learned-sparse hits ranked by the backend (a collection made with parameter.yaml's sparse
    model: indexes/milvus/sparse.py), `spec.k` per query."""
    model = _sparse_model(s)
    return staged(s, spec, lambda: learned_sparse.Sparse().scale(s),
                  lambda chunk, depth: store.sparse_hits(s.dense, model, chunk, depth, spec.filter))


def _sparse_model(s: Session) -> learned_sparse.SparseModel:
    if s.config.is_multimodal:
        raise NotYetSupportedError("sparse search: this collection holds images (is_multimodal), which have no text "
                                   "for a sparse model; search them with retriever_search")
    return learned_sparse.SparseModel.of(s.config.sparse)


def weights(h: HybridConfig) -> list[float]:
    vw = AUTO_VECTOR_WEIGHT if h.vector_weight is None else h.vector_weight
    return [vw, 1.0 - vw]


def hybrid(s: Session, store: HeldDocuments, spec: Spec) -> Hits:
    """Dense and BM25 hits from the backend, each `candidate_depth` deep, fused per query; with a
    sparse model and `sparse.hybrid`, the backend's learned-sparse hits beside them (BM25's prior
    shared half and half) or in BM25's place, as search/learned_sparse.hybrid_lists does locally."""
    embedder, ranker = _embedder(s, "hybrid search"), cast(Hybrid, spec.ranker)
    text_only(s, "hybrid search")
    h, f = ranker.options, spec.filter
    w = weights(h)
    where = s.config.sparse.hybrid if s.config.sparse.model_name_or_path else "off"
    model = _sparse_model(s) if where != "off" else None
    if where == "fused":
        w = [w[0], w[1] / 2, w[1] / 2]
    normalized = s.config.backend_configs.sentence_transformers.sentence_transformers_encode.normalize_embeddings
    # the query gate and the cross-check, as locally (hybrid.QueryFusion): they need BM25's bound,
    # which Milvus gives with the bm25s analyzer
    seen = visibility.rule(s.config)  # a restricted caller: its own gate per rule, as locally
    rule = QueryFusion(h, normalized, signals.gate_for(s, None if seen is None else seen_key(seen))
                       if h.query_gate else None)

    def rank(chunk: list[str], top: int) -> Hits:
        vectors = embedder.encode_queries(chunk, pick(ranker.query_instruction, s.config.query_instruction))
        dense = compute.submit(store.hits, s.dense, vectors, h.candidate_depth, f, ranker.ann)
        text = store.text_hits(s.dense, chunk, h.candidate_depth, f) if where != "instead_of_bm25" else None
        learned = store.sparse_hits(s.dense, model, chunk, h.candidate_depth, f) if model is not None else None
        bounds = _bounds(store, s, h, chunk) if text is not None else [None] * len(chunk)
        fused = []
        for i, (d, bound) in enumerate(zip(dense.result(), bounds, strict=True)):
            lists = {"dense": d, **({"bm25": text[i]} if text is not None else {}),
                     **({"sparse": learned[i]} if learned is not None else {})}
            scales = rule.scales(_top(d), _top(lists.get("bm25", [])), bound, "sparse" in lists,
                                 _top(lists.get("sparse", [])))
            priors = w
            if "bm25" in lists:  # the gate and the cross-check read rows: the hits numbered by id
                priors = rule.priors(w, *signals.hits_as_rows(d, lists["bm25"]),
                                     scales.get("bm25") if bound is not None else None)
            fused.append(fused_hits(lists, h.fusion, priors, h.rrf_k, top, scales))
        return fused

    return staged(s, spec, lambda: fused_scale(h.fusion, w, h.rrf_k), rank)


def _top(hits: Sequence[Hit]) -> float | None:
    """A list's best score (None: empty)."""
    return float(hits[0].score) if hits else None


def _embedder(s: Session, what: str) -> Embedder:
    if s.embedder is None:
        raise NotYetSupportedError(f"{what}: backend is 'bm25', which has no embedder; the index backend holds "
                                   "the documents and their vectors")
    return s.embedder


def _bounds(store: HeldDocuments, s: Session, h: HybridConfig, queries: list[str]) -> list[float | None]:
    """Adaptive fusion's BM25 scale per query: the highest score its terms allow over the documents
    the caller sees, where the backend keeps the document frequencies to know it (Milvus,
    full_text_analyzer bm25s: indexes/milvus/df.py, or seen.py for a restricted caller)."""
    bounds = store.text_bounds(s.dense, queries) if h.fusion == "adaptive" else None
    return list(bounds) if bounds is not None else [None] * len(queries)


# ---- multi-query and fan-out over hits the backend returns -------------------------------------

def multi_query(searched: Callable[[list[str]], Hits], question_list: Any, k: int, rrf_k: float, scale_score: bool,
                threshold: float | None) -> Hits:
    """Several phrasings per question, each searched by the backend (`searched`: per query its
    hits, deep enough), fused by id with RRF into one ranking per question (as search/run.py
    multi_query does over rows)."""
    groups = as_groups(question_list, "question_list")
    found = searched([q for g in groups for q in g])
    fused, start = [], 0
    for g in groups:
        fused.append(fused_hits({str(i): found[start + i] for i in range(len(g))}, "rrf", None, rrf_k, k))
        start += len(g)
    # equal weights summing to 1, whatever the number of phrasings
    return apply(fused, stages(fused_scale("rrf", [1.0], rrf_k) if scale_score else None, threshold))


def fused_collections(found: Mapping[str, Sequence[Hit]], rrf_k: float, k: int) -> list[Hit]:
    """One query's hits from several collections fused with RRF, keyed by (collection, id): equal
    ids in two collections stay two hits; each names its collection and its rank in each list."""
    named = {name: [((name, h.id), float(h.score)) for h in hits] for name, hits in found.items()}
    by_key = {(name, h.id): h for name, hits in found.items() for h in hits}
    return [replace(by_key[key], score=score, collection=key[0], sources=sources)
            for key, score, sources in fused(named, "rrf", None, rrf_k, k)]
