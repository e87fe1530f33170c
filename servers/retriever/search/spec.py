"""One search, typed once (engine/retriever.py `search` makes it): the kind with its options, the
queries, how many hits, the filter parsed once, the result stages asked for. Every searcher below
the engine takes it, a local collection's (run.py) and a backend's that holds the documents
(stored.py); `staged` is the part they share: the rerank stage, the scaling and threshold, and
the queries cut into chunks within the call's limits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..filters import Filter
from ..security.limits import chunked
from ..session import Session
from ..types import Hits
from . import rerank
from .rankers import Ranker, Scale
from .stages import apply, stages


@dataclass(frozen=True)
class Spec:
    ranker: Ranker  # the kind and its options (search/kinds.py)
    queries: list[str]
    k: int  # hits per query
    filter: Filter | None = None
    scale_score: bool = False
    threshold: float | None = None


def staged(s: Session, spec: Spec, scale: Callable[[], Scale], rank: Callable[[list[str], int], Hits]) -> Hits:
    """Per query, its top `spec.k` hits: `rank(queries, depth)` gives a chunk of queries' hits
    `depth` deep (deeper than k where the collection's cross-encoder reranks them), then the rerank
    stage (scores of its own, left unscaled), `scale` (the kind's map to 0..1) where scale_score
    asks, and the threshold."""
    reranking = rerank.plan(s.config.rerank, s.config.is_multimodal)  # the cross-encoder stage (rerank.py)
    depth = spec.k if reranking is None else reranking.retrieve(spec.k)
    chain = stages(scale() if spec.scale_score and reranking is None else None, spec.threshold)

    def one(chunk: list[str]) -> Hits:
        return apply(rerank.after(reranking, chunk, rank(chunk, depth), spec.k), chain)

    return chunked(one, spec.queries, s.config.limits, spec.ranker.depth(depth))
