"""A search of a local collection: a spec's ranker (search/rankers.py) over the candidates its filter
leaves, through the stages every search shares (spec.py); multi-query over rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..filters import Filter
from ..security.limits import chunked
from ..session import Allowed, Session, candidate_rows
from ..types import Hit, Hits
from .hybrid import Fused
from .rankers import Ranker
from .results import build_hits
from .spec import Spec, finish, phrasings, rrf_scale, staged


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
    per question (spec.phrasings, the code a backend's hits go through too), then the rerank stage
    against each question's first phrasing. The phrasings' rankings stay rows and scores until the
    fused top k."""
    allowed = candidate_rows(s, f)
    end = finish(s, k, rrf_scale(rrf_k, scale_score), score_threshold)
    return phrasings(lambda queries: rankings(s, ranker, queries, depth, allowed),
                     lambda named: ({name: (r[0], r[1]) for name, r in named.items()}, s.collection.ids),
                     lambda fused: hits_of(s, fused), question_list, rrf_k, end)
