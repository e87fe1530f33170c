"""Hybrid search, one code for a local collection's rows and a backend's hits by id; rank fusion.

`ranked` is hybrid: its lists come from a source (`Lists`: rankers.py over rows, stored.py over
hits numbered as rows, `Numbered`, a table per query: `Tables`); `fused_rows` fuses one query's
rankings (hybrid, multi-query)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import numpy as np
from pydantic import ValidationError

from .. import compute
from ..config import HybridConfig
from ..errors import InvalidInputError
from ..session import Session
from ..types import Hit
from . import signals
from .fusion import fuse

K = TypeVar("K", bound=Hashable)
L = TypeVar("L")  # one query's list as a source gives it: rows and scores, or hits

RowRanking = tuple[np.ndarray, np.ndarray]  # rows best first, their scores
Source = dict[str, tuple[int, float] | None]  # of a fused document: retriever -> (rank, score), None if absent
Sources = list[Source]  # per fused row
Fused = tuple[np.ndarray, np.ndarray, Sources]


@dataclass(frozen=True)
class QueryFusion:
    """Hybrid's rule for each query's lists (`ranked`): adaptive fusion's scales, and the priors
    that the query gate and the cross-check give (signals.py)."""

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


class Lists(Protocol[L]):
    """Where hybrid's lists come from, per query best first: a local collection's indexes (rows and
    scores: rankers.Hybrid) or a backend that holds the documents (its hits by id: stored.hybrid).
    `dense` runs on the compute thread, the others on the caller's; `bounds`: per query, BM25's
    highest possible score over what the caller sees (adaptive fusion's scale; None: unknown);
    `rows`: one query's lists as rows and scores, and each row's id (what fusion keys by)."""

    def dense(self, queries: list[str], depth: int) -> Sequence[L]: ...

    def bm25(self, queries: list[str], depth: int) -> Sequence[L]: ...

    def sparse(self, queries: list[str], depth: int) -> Sequence[L]: ...

    def bounds(self, queries: list[str]) -> Sequence[float | None]: ...

    def rows(self, named: dict[str, L]) -> tuple[dict[str, RowRanking], Sequence[str]]: ...


def placement(s: Session) -> str:
    """Where `sparse.hybrid` puts the learned-sparse list: off, fused (beside dense and BM25) or
    instead_of_bm25; off without a sparse model."""
    return s.config.sparse.hybrid if s.config.sparse.model_name_or_path else "off"


def placed(weights: list[float], where: str) -> list[float]:
    """The dense and BM25 priors with the sparse list's: BM25's shared half and half with it where
    it is beside BM25, BM25's own where it is in its place."""
    return [weights[0], weights[1] / 2, weights[1] / 2] if where == "fused" else weights


def ranked(lists: Lists[L], s: Session, h: HybridConfig, weights: list[float], seen: str | None,
           queries: list[str], top: int) -> list[Fused]:
    """Hybrid search of a chunk of queries from either source: dense and BM25, each `candidate_depth`
    deep, and the learned-sparse list where `sparse.hybrid` puts it; then per query, in order (each
    query's gate is what the ones before it left), adaptive fusion's scales, the priors the query
    gate and the cross-check give, and the fusion: the best `top` rows. `weights`: the dense and
    BM25 priors; `seen`: a restricted caller's key (session.seen_key), whose gate is its own."""
    where, depth = placement(s), h.candidate_depth
    dense = compute.submit(lists.dense, queries, depth)
    found: dict[str, Sequence[L]] = {} if where == "instead_of_bm25" else {"bm25": lists.bm25(queries, depth)}
    if where != "off":
        found["sparse"] = lists.sparse(queries, depth)
    bounds = lists.bounds(queries) if "bm25" in found and h.fusion == "adaptive" else [None] * len(queries)
    found = {"dense": dense.result(), **found}
    normalized = s.config.backend_configs.sentence_transformers.sentence_transformers_encode.normalize_embeddings
    rule, priors = QueryFusion(h, normalized, signals.gate_for(s, seen) if h.query_gate else None), placed(weights, where)
    out = []
    for i, bound in enumerate(bounds):
        named, ids = lists.rows({name: per_query[i] for name, per_query in found.items()})
        bm25 = named.get("bm25")
        scales = rule.scales(_top(named["dense"]), _top(bm25), bound, "sparse" in named, _top(named.get("sparse")))
        w = rule.priors(priors, named["dense"], bm25, scales.get("bm25") if bound is not None else None)
        out.append(fused_rows(ids, named, h.fusion, w, h.rrf_k, top, scales))
    return out


def _top(ranking: RowRanking | None) -> float | None:
    """A list's best score (None: empty or absent)."""
    return float(ranking[1][0]) if ranking is not None and len(ranking[1]) else None


class Numbered:
    """Hits of a backend that holds the documents (no corpus rows) numbered as rows, one number per
    id, so that they go through the gate, the cross-check and fusion as a local collection's rows
    do; `hits` turns fused rows back into hits (where lists share an id, the last list's hit)."""

    def __init__(self) -> None:
        self.number: dict[str, int] = {}  # id -> row
        self.found: dict[str, Hit] = {}

    @property
    def ids(self) -> list[str]:
        return list(self.number)

    def rows(self, hits: Sequence[Hit]) -> RowRanking:
        self.found.update((h.id, h) for h in hits)
        return (np.asarray([self.number.setdefault(h.id, len(self.number)) for h in hits], dtype=np.int64),
                np.asarray([float(h.score) for h in hits], dtype=np.float64))

    def hits(self, ranked: Fused) -> list[Hit]:
        ids, (rows, scores, sources) = self.ids, ranked
        return [replace(self.found[ids[r]], score=score, sources=src)
                for r, score, src in zip(rows.tolist(), scores.tolist(), sources)]


class Tables:
    """Each query's lists of hits numbered as rows in a table of its own (Numbered): `rows` numbers
    one query's lists (Lists `rows`), `hits` turns each query's fused rows back into its hits."""

    def __init__(self) -> None:
        self.tables: list[Numbered] = []

    def rows(self, named: Mapping[str, Sequence[Hit]]) -> tuple[dict[str, RowRanking], list[str]]:
        self.tables.append(table := Numbered())
        rows = {name: table.rows(hits) for name, hits in named.items()}
        return rows, table.ids

    def hits(self, fused: Sequence[Fused]) -> list[list[Hit]]:
        return [table.hits(one) for table, one in zip(self.tables, fused, strict=True)]


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
    ids: Sequence[str], rankings: Mapping[str, RowRanking], method: str, weights: Sequence[float] | None,
    k: float, top_k: int, scales: Mapping[str, float] | None = None,
) -> Fused:
    """`fused` over rows (a local collection's, or hits numbered: Numbered), keyed by their `ids`
    (ties by id): rows, fused scores and sources."""
    named = {
        name: [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist()) if r >= 0]
        for name, (rows, scores) in rankings.items()
    }
    row_of = {ids[r]: r for rows, _ in rankings.values() for r in rows.tolist() if r >= 0}
    out = fused(named, method, weights, k, top_k, scales)
    rows = np.asarray([row_of[doc_id] for doc_id, _, _ in out], dtype=np.int64)
    scores = np.asarray([score for _, score, _ in out], dtype=np.float64)
    return rows, scores, [sources for _, _, sources in out]


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
