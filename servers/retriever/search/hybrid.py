"""Fusing per-retriever rankings of one query into hits: used by hybrid and multi-query search."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
from pydantic import ValidationError

from ..config import HybridConfig
from ..errors import InvalidInputError
from ..store.collection import Collection
from ..types import Hit
from . import signals
from .fusion import fuse

K = TypeVar("K", bound=Hashable)

RowRanking = tuple[np.ndarray, np.ndarray]  # rows best first, their scores
Source = dict[str, tuple[int, float] | None]  # of a fused document: retriever -> (rank, score), None if absent
Sources = list[Source]  # per fused row
Fused = tuple[np.ndarray, np.ndarray, Sources]


@dataclass(frozen=True)
class QueryFusion:
    """Hybrid's rule for each query's lists, one for a local collection's rows (rankers.Hybrid)
    and for the hits of a backend that holds the documents (stored.hybrid): adaptive fusion's
    scales, and the priors that the query gate and the cross-check give (signals.py)."""

    options: HybridConfig
    normalized: bool  # the embeddings are normalised: dense scores are cosines
    gate: signals.QueryGate | None

    def scales(self, dense_top: float | None, bm25_top: float | None, bound: float | None,
               sparse: bool = False, sparse_top: float | None = None) -> dict[str, float]:
        """What adaptive fusion divides each list's scores by, from each list's best score: a
        cosine as it is (an unnormalised inner product over the query's best); BM25 over the
        highest score the query's terms allow (`bound`), where the index knows it (None: over its
        best score); a learned-sparse list over its best. The other fusions take scores as they are."""
        if self.options.fusion != "adaptive":
            return {}
        if bound is not None:
            bm25 = bound if bound > 0 else 1.0
        else:
            bm25 = max(abs(bm25_top), 1e-12) if bm25_top is not None else 1.0
        out = {"dense": 1.0 if self.normalized or dense_top is None else max(abs(dense_top), 1e-12), "bm25": bm25}
        if sparse:
            out["sparse"] = max(sparse_top, 1e-12) if sparse_top is not None else 1.0
        return out

    def priors(self, weights: list[float], dense: RowRanking, bm25: RowRanking | None,
               scale: float | None) -> list[float]:
        """One query's priors: dense alone where the gate says so, else moved by the cross-check
        where it is on; both need adaptive fusion over cosines, BM25 among the lists and its scale
        from the bound (`scale`: None where the index does not know the bound)."""
        if not (self.options.fusion == "adaptive" and self.normalized and bm25 is not None and scale is not None):
            return weights
        leaned = self.gate.weigh(weights, dense, bm25, scale) if self.gate is not None else None
        if leaned is not None:
            return leaned
        return signals.checked_weights(weights, dense, bm25, scale) if self.options.cross_check else weights


def fused(named: Mapping[str, Sequence[tuple[K, float]]], method: str, weights: Sequence[float] | None, k: float,
          top_k: int, scales: Mapping[str, float] | None = None) -> list[tuple[K, float, Source]]:
    """One query's rankings (name -> its (key, score) best first) fused: the best `top_k` keys with
    their fused score and, per input, their rank and score there (None where absent). `scales`:
    what a ranking's scores are divided by before fusing (the sources keep them as they were). The
    one fusion of local rows, of hits a backend holds and of several collections' lists."""
    lists = list(named.values()) if not scales else [
        [(key, s / scales.get(name, 1.0)) for key, s in ranking] for name, ranking in named.items()]
    rank_of = {name: {key: rank for rank, (key, _) in enumerate(ranking)} for name, ranking in named.items()}
    return [(key, score, {name: source_of(named[name], rank_of[name].get(key)) for name in named})
            for key, score in fuse(method, lists, weights, k, limit=top_k)]


def fused_rows(
    docs: Collection, rankings: Mapping[str, RowRanking], method: str, weights: Sequence[float] | None,
    k: float, top_k: int, scales: Mapping[str, float] | None = None,
) -> Fused:
    """`fused` over a local collection's rows, keyed by id (ties by id): rows, fused scores and sources."""
    named = {
        name: [(docs.ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist()) if r >= 0]
        for name, (rows, scores) in rankings.items()
    }
    row_of = {docs.ids[r]: r for rows, _ in rankings.values() for r in rows.tolist() if r >= 0}
    out = fused(named, method, weights, k, top_k, scales)
    rows = np.asarray([row_of[doc_id] for doc_id, _, _ in out], dtype=np.int64)
    scores = np.asarray([score for _, score, _ in out], dtype=np.float64)
    return rows, scores, [sources for _, _, sources in out]


def fused_hits(rankings: Mapping[str, Sequence[Hit]], method: str, weights: Sequence[float] | None, k: float,
               top_k: int, scales: Mapping[str, float] | None = None) -> list[Hit]:
    """`fused` over hits that carry their documents (an index backend that holds them), keyed by id."""
    named = {name: [(h.id, float(h.score)) for h in hits] for name, hits in rankings.items()}
    found = {h.id: h for hits in rankings.values() for h in hits}
    return [replace(found[doc_id], score=score, sources=sources)
            for doc_id, score, sources in fused(named, method, weights, k, top_k, scales)]


def source_of(ranking: Sequence[tuple[Any, float]], index: int | None) -> tuple[int, float] | None:
    """(rank from 1, score) of the document at `index` of a retriever's list, None if absent."""
    return None if index is None else (index + 1, ranking[index][1])


def max_fused_score(method: str, weights: Sequence[float], k: float) -> float:
    """The best score a document can get: found first by every retriever (for scaling to 0..1)."""
    return sum(weights) / (k + 1) if method == "rrf" else sum(weights)


def fused_scale(method: str, weights: Sequence[float], k: float) -> Callable[[float], float]:
    """`scale_score` for a fused ranking: the score as a share of the best possible one; adaptive
    scores (shares summing to 1 of a cosine and of BM25 under its bound) lie in -1..1 and map as
    a cosine does, (s + 1) / 2."""
    if method == "adaptive":
        return lambda x: (x + 1.0) / 2.0
    best = max_fused_score(method, weights, k)
    return lambda x: x / best


def hybrid_options(base: HybridConfig, **overrides: Any) -> HybridConfig:
    """The YAML's hybrid section with per-call values, checked like the YAML."""
    try:
        return HybridConfig.model_validate({**base.model_dump(), **{k: v for k, v in overrides.items() if v is not None}})
    except ValidationError as e:
        raise InvalidInputError("; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())) from None
