"""The retriever kinds: each ranks queries over one collection's session into rows and scores
(Exo's `retrieve(query, top_k)`, LlamaIndex's BaseRetriever, Haystack's retriever components,
for rows). Documents are read only for the final hits (search/run.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .. import compute
from ..config import HybridConfig
from ..errors import IndexMissingError, NotYetSupportedError
from ..indexes.bm25 import BM25Index
from ..session import Allowed, Session
from . import learned_sparse
from .calibration import auto_vector_weight
from .fusion import SCALERS
from .hybrid import Fused, RowRanking, fused_scale, ranked
from .results import pick

Scale = Callable[[float], float]


class Ranker(Protocol):
    """Per query, its rows best first, their scores and (for a fused kind) where each came from."""

    @property
    def name(self) -> str: ...

    def rank(self, s: Session, queries: list[str], depth: int, allowed: Allowed) -> list[Fused]: ...

    def depth(self, k: int) -> int:
        """How deep this kind searches for a top `k` (what a call's limits count)."""
        ...

    def scale(self, s: Session) -> Scale:
        """The map of this kind's scores to 0..1 (`scale_score`)."""
        ...


def text_only(s: Session, what: str) -> None:
    """BM25 (alone or in hybrid) has nothing to match in a collection of images."""
    if s.config.is_multimodal:
        raise NotYetSupportedError(f"{what}: this collection holds images (is_multimodal), which have no text for "
                                   "BM25; search them with retriever_search")


def _ranked(rows: Sequence[np.ndarray], scores: Sequence[np.ndarray]) -> list[Fused]:
    return [(r, sc, None) for r, sc in zip(rows, scores)]  # type: ignore[misc]


@dataclass(frozen=True)
class Dense:
    query_instruction: str | None = None
    ann: dict[str, int] | None = None  # nprobe / efSearch for this search (None: the YAML's)
    name: str = "dense"

    def rows(self, s: Session, queries: list[str], depth: int,
             allowed: Allowed) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray]]:
        if s.embedder is None:
            raise NotYetSupportedError("dense search: backend is 'bm25', which has no embedder; use bm25_search")
        if s.dense is None:
            raise IndexMissingError("no dense index is loaded; call retriever_embed then retriever_index")
        vectors = s.embedder.encode_queries(queries, pick(self.query_instruction, s.config.query_instruction))
        return s.dense.search(vectors, depth, allowed.rows, allowed.filter, ann=self.ann)

    def rank(self, s: Session, queries: list[str], depth: int, allowed: Allowed) -> list[Fused]:
        # the encode and the index search in one trip to the compute thread, as in Hybrid, not one each
        return _ranked(*compute.on_compute_thread(self.rows, s, queries, depth, allowed))

    def depth(self, k: int) -> int:
        return k

    def scale(self, s: Session) -> Scale:
        normalized = s.config.backend_configs.sentence_transformers.sentence_transformers_encode.normalize_embeddings
        return SCALERS["cosine" if normalized else "dot_product"]


@dataclass(frozen=True)
class BM25:
    name: str = "bm25"

    def rows(self, s: Session, queries: list[str], depth: int,
             allowed: Allowed) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray]]:
        text_only(s, "BM25 search")
        if s.bm25 is None:
            raise IndexMissingError("no BM25 index is loaded; call bm25_index")
        # a restricted caller's scores count only what it sees (indexes/bm25_visible.py)
        seen = None if allowed.seen is None else allowed.seen.rows
        return s.bm25.search(queries, depth, allowed.rows, seen, s.collection.texts)

    def rank(self, s: Session, queries: list[str], depth: int, allowed: Allowed) -> list[Fused]:
        return _ranked(*self.rows(s, queries, depth, allowed))

    def depth(self, k: int) -> int:
        return k

    def scale(self, s: Session) -> Scale:
        return SCALERS["bm25"]


@dataclass(frozen=True)
class Hybrid:
    """Dense and BM25 at once (dense on the compute thread while BM25 runs on this one; a small
    call already on the compute thread runs them one after the other), each `candidate_depth` deep,
    fused per query by hybrid.ranked over the collection's rows (the code a backend that holds the
    documents runs too); each hit keeps its rank and score in both."""

    options: HybridConfig
    query_instruction: str | None = None
    ann: dict[str, int] | None = None
    name: str = "hybrid"

    def rank(self, s: Session, queries: list[str], depth: int, allowed: Allowed) -> list[Fused]:
        if s.embedder is None:
            raise NotYetSupportedError("hybrid search: backend is 'bm25', which has no embedder; use bm25_search")
        text_only(s, "hybrid search")
        if s.dense is None or s.bm25 is None:
            missing = [what for what, index in (("dense (retriever_embed, then retriever_index)", s.dense),
                                                ("BM25 (bm25_index)", s.bm25)) if index is None]
            raise IndexMissingError(f"hybrid search needs both indexes; missing: {' and '.join(missing)}")
        # before the dense search starts: auto may probe the collection (what the caller sees) first
        weights = self.weights(s, allowed)
        return ranked(_Rows(s, allowed, s.bm25, Dense(self.query_instruction, self.ann)), s, self.options, weights,
                      None if allowed.seen is None else allowed.seen.key, queries, depth)

    def depth(self, k: int) -> int:
        return max(k, self.options.candidate_depth)

    def weights(self, s: Session, allowed: Allowed | None = None) -> list[float]:
        """Dense and BM25 priors: vector_weight, or where it is null (auto) the collection's
        self-retrieval check (calibration.py), over what a restricted caller sees (`allowed.seen`)."""
        vw = self.options.vector_weight
        if vw is None:
            vw = auto_vector_weight(s, Dense().rows, BM25().rows, None if allowed is None else allowed.seen)
        return [vw, 1.0 - vw]

    def scale(self, s: Session) -> Scale:
        return fused_scale(self.options.fusion, self.weights(s), self.options.rrf_k)


@dataclass(frozen=True)
class _Rows:
    """Hybrid's lists from a local collection's indexes (hybrid.Lists): rows and scores per query."""

    s: Session
    allowed: Allowed
    bm25_index: BM25Index
    dense_ranker: Dense

    def dense(self, queries: list[str], depth: int) -> list[RowRanking]:
        return list(zip(*self.dense_ranker.rows(self.s, queries, depth, self.allowed)))

    def bm25(self, queries: list[str], depth: int) -> list[RowRanking]:
        return list(zip(*BM25().rows(self.s, queries, depth, self.allowed)))

    def sparse(self, queries: list[str], depth: int) -> list[RowRanking]:
        return list(zip(*learned_sparse.Sparse().rows(self.s, queries, depth, self.allowed)))

    def bounds(self, queries: list[str]) -> list[float]:
        seen = None if self.allowed.seen is None else self.allowed.seen.rows
        return self.bm25_index.bounds(queries, seen, self.s.collection.texts)

    def rows(self, named: dict[str, RowRanking]) -> tuple[dict[str, RowRanking], Sequence[str]]:
        return named, self.s.collection.ids
