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
from ..session import Allowed, Session
from . import learned_sparse, signals
from .calibration import auto_vector_weight
from .fusion import SCALERS
from .hybrid import Fused, QueryFusion, RowRanking, fused_rows, fused_scale
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


def _top(ranking: RowRanking) -> float | None:
    """A ranking's best score (None: empty)."""
    return float(ranking[1][0]) if len(ranking[1]) else None


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
    fused per query (fusion.py); each hit keeps its rank and score in both."""

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
        h = self.options
        # before the dense search starts: auto may probe the collection (what the caller sees) first
        weights = self.weights(s, allowed)
        dense = compute.submit(Dense(self.query_instruction, self.ann).rows, s, queries, h.candidate_depth, allowed)
        b_rows, b_scores = BM25().rows(s, queries, h.candidate_depth, allowed)
        d_rows, d_scores = dense.result()
        lists = {"dense": list(zip(d_rows, d_scores)), "bm25": list(zip(b_rows, b_scores))}
        # the learned-sparse list beside them or in BM25's place (sparse.hybrid; learned_sparse.py)
        lists, weights = learned_sparse.hybrid_lists(s, queries, h.candidate_depth, allowed, lists, weights)
        normalized = s.config.backend_configs.sentence_transformers.sentence_transformers_encode.normalize_embeddings
        key, seen = (None, None) if allowed.seen is None else (allowed.seen.key, allowed.seen.rows)
        rule = QueryFusion(h, normalized, signals.gate_for(s, key) if h.query_gate else None)
        bounds = s.bm25.bounds(queries, seen, s.collection.texts) if h.fusion == "adaptive" else [None] * len(queries)
        out = []
        for i, bound in enumerate(bounds):  # in order: each query's gate is what the ones before it left
            ranked: dict[str, RowRanking] = {name: found[i] for name, found in lists.items()}
            scales = rule.scales(_top(ranked["dense"]), None, bound, "sparse" in ranked,
                                 _top(ranked["sparse"]) if "sparse" in ranked else None)
            priors = rule.priors(weights, ranked["dense"], ranked.get("bm25"), scales.get("bm25"))
            out.append(fused_rows(s.collection, ranked, h.fusion, priors, h.rrf_k, depth, scales))
        return out

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
