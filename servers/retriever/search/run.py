"""A search of a local collection: a spec's ranker (search/rankers.py) over the candidates its filter
leaves, through the stages every search shares (spec.py); multi-query over rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..filters import Filter
from ..security.limits import chunked
from ..session import Allowed, Session, candidate_rows
from ..types import Hit, Hits
from . import rerank
from .hybrid import Fused, fused_rows, fused_scale
from .rankers import Ranker
from .results import as_groups, build_hits, search_groups
from .spec import Spec, staged
from .stages import apply, stages


def hits_of(s: Session, ranked: Sequence[Fused]) -> Hits:
    """The hits of rankings: documents read once per call."""
    sources = [f[2] for f in ranked]
    return build_hits(s.collection, [f[0] for f in ranked], [f[1] for f in ranked],
                      sources=None if all(x is None for x in sources) else sources)


def search(s: Session, spec: Spec) -> Hits:
    """Per query, its top `spec.k` hits from its ranker among the live documents its filter leaves."""
    allowed = candidate_rows(s, spec.filter)  # the rows the caller may see only (security/visibility.py)
    return staged(s, spec, lambda: spec.ranker.scale(s),
                  lambda chunk, depth: hits_of(s, spec.ranker.rank(s, chunk, depth, allowed)))


def rankings(s: Session, ranker: Ranker, queries: list[str], depth: int, allowed: Allowed) -> list[Fused]:
    """Rows and scores only (no document read), a chunk of queries at a time."""
    return chunked(lambda chunk: ranker.rank(s, chunk, depth, allowed), queries, s.config.limits, ranker.depth(depth))


def multi_query(s: Session, ranker: Ranker, question_list: Any, k: int, depth: int, rrf_k: float,
                f: Filter | None = None, scale_score: bool = False,
                score_threshold: float | None = None) -> list[list[Hit]]:
    """Several phrasings per question, each ranked `depth` deep, fused with RRF into one ranking
    per question. The phrasings' rankings stay rows and scores until the fused top k."""
    allowed = candidate_rows(s, f)

    def ranked(queries: list[str]) -> list[Fused]:
        return rankings(s, ranker, queries, depth, allowed)

    reranking = rerank.plan(s.config.rerank, s.config.is_multimodal)  # against each question's first phrasing
    top = k if reranking is None else reranking.retrieve(k)
    fused = [fused_rows(s.collection.ids, {str(i): (r[0], r[1]) for i, r in enumerate(group)}, "rrf", None, rrf_k, top)
             for group in search_groups(ranked, question_list, "question_list")]
    # equal weights summing to 1, whatever the number of phrasings
    chain = stages(fused_scale("rrf", [1.0], rrf_k) if scale_score and reranking is None else None, score_threshold)
    hits = hits_of(s, fused)
    if reranking is not None:
        hits = reranking.apply([g[0] for g in as_groups(question_list, "question_list")], hits, k)
    return apply(hits, chain)
