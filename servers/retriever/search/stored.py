"""Dense, BM25 and hybrid search where the index backend holds the documents (Milvus with is_demo,
which ranks dense only, or with `index_backend_configs.milvus.full_text`, which ranks BM25 too). There are no corpus rows
here: each retriever's hits come from the backend with their text. Hybrid is the local
collection's code (search/hybrid.py `ranked`: the lists, the scales, the query gate and the
cross-check, the sparse placement, the fusion) over a source of hits by id instead of rows; what
differs is what the backend knows:

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..config import HybridConfig
from ..embedders import Embedder
from ..errors import NotYetSupportedError
from ..filters import Filter
from ..indexes import HeldDocuments
from ..security import visibility
from ..session import Session, seen_key
from ..types import Hit, Hits
from . import learned_sparse
from .fusion import SCALERS
from .hybrid import RowRanking, Tables, fused_scale, placed, placement, ranked
from .rankers import Dense, Hybrid, text_only
from .results import as_groups, pick
from .spec import Spec, finish, phrasings, rrf_scale, staged

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
    """Dense and BM25 hits from the backend (and its learned-sparse hits where `sparse.hybrid` puts
    them), fused per query by hybrid.ranked, the code a local collection's hybrid runs: the hits
    numbered as rows (hybrid.Numbered), then back to hits."""
    embedder, ranker = _embedder(s, "hybrid search"), cast(Hybrid, spec.ranker)
    text_only(s, "hybrid search")
    h, w = ranker.options, weights(ranker.options)
    seen = visibility.rule(s.config)  # a restricted caller: its own gate per rule, as locally

    def rank(chunk: list[str], top: int) -> Hits:
        lists = _Held(s, store, embedder, ranker, spec.filter)
        return lists.numbered.hits(ranked(lists, s, h, w, None if seen is None else seen_key(seen), chunk, top))

    return staged(s, spec, lambda: fused_scale(h.fusion, placed(w, placement(s)), h.rrf_k), rank)


@dataclass
class _Held:
    """Hybrid's lists from a backend that holds the documents (hybrid.Lists): its hits, each query's
    numbered as rows in a table of its own (hybrid.Tables)."""

    s: Session
    store: HeldDocuments
    embedder: Embedder
    ranker: Hybrid
    f: Filter | None
    numbered: Tables = field(default_factory=Tables)

    def dense(self, queries: list[str], depth: int) -> Hits:
        vectors = self.embedder.encode_queries(queries, pick(self.ranker.query_instruction,
                                                             self.s.config.query_instruction))
        return self.store.hits(self.s.dense, vectors, depth, self.f, self.ranker.ann)

    def bm25(self, queries: list[str], depth: int) -> Hits:
        return self.store.text_hits(self.s.dense, queries, depth, self.f)

    def sparse(self, queries: list[str], depth: int) -> Hits:
        return self.store.sparse_hits(self.s.dense, _sparse_model(self.s), queries, depth, self.f)

    def bounds(self, queries: list[str]) -> list[float | None]:  # known with full_text_analyzer bm25s
        bounds = self.store.text_bounds(self.s.dense, queries)
        return list(bounds) if bounds is not None else [None] * len(queries)

    def rows(self, named: dict[str, list[Hit]]) -> tuple[dict[str, RowRanking], Sequence[str]]:
        return self.numbered.rows(named)


def _embedder(s: Session, what: str) -> Embedder:
    if s.embedder is None:
        raise NotYetSupportedError(f"{what}: backend is 'bm25', which has no embedder; the index backend holds "
                                   "the documents and their vectors")
    return s.embedder


# ---- multi-query over hits the backend returns -------------------------------------------------

def multi_query(s: Session, searched: Callable[[list[str]], Hits], question_list: Any, k: int, rrf_k: float,
                scale_score: bool, threshold: float | None) -> Hits:
    """Several phrasings per question, each searched by the backend (`searched`: per query its
    hits, deep enough, without the rerank stage: Spec.reranked False), fused by id with RRF into one
    ranking per question, then collection `s`'s rerank stage once per question against its first
    phrasing: spec.phrasings, the code search/run.py multi_query runs over rows."""
    lists = searched([q for g in as_groups(question_list, "question_list") for q in g])
    end = finish(s, k, rrf_scale(rrf_k, scale_score), threshold)
    tables = Tables()
    return phrasings(lambda _: lists, tables.rows, tables.hits, question_list, rrf_k, end)
