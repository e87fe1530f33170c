"""Fan-out: one search over several collections at once, fused with RRF into one list.

Each collection is searched with its own indexes (dense, BM25 or hybrid, `candidate_depth`
deep, the same filter); the per-collection rankings are fused by reciprocal rank, keyed by
(collection, row), so equal ids in two collections stay two hits. Every hit names its
collection and, like every fused hit, its rank and score in each collection's list. A
collection that fails (missing, no index, a mismatch) is reported in `errors` while the others
answer; only when every collection fails is the call an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import HybridConfig
from ..errors import CancelledWork, InvalidInputError, RetrieverError
from ..filters import parse as parse_filter
from ..session import Session, candidate_rows
from ..types import Hit, Hits
from . import rerank, stored
from .hybrid import RowRanking, fused, fused_scale
from .kinds import held_search, kind
from .results import as_queries
from .run import hits_of, rankings
from .spec import Spec
from .stages import apply, stages


def fanout(session_of: Callable[[str], Session], queries: list[str], collections: Sequence[str], k: int,
           h: HybridConfig, mode: str = "hybrid", query_instruction: str | None = None,
           filters: dict[str, Any] | None = None, score_threshold: float | None = None, scale_score: bool = False,
           ) -> tuple[list[list[Hit]], dict[str, str]]:
    """Per query, the fused hits of every collection that answered; and the errors of the others.
    `session_of(name)` opens a collection ("" = the default one)."""
    ranker = kind(mode, h, query_instruction)
    f = None if filters is None else parse_filter(filters)  # parsed once for every collection
    # equal weights summing to 1, whatever the number of collections
    chain = stages(fused_scale("rrf", [1.0], h.rrf_k) if scale_score else None, score_threshold)
    names = list(dict.fromkeys(as_queries(collections, "collections")))
    answered: dict[str, tuple[Session, list[RowRanking]]] = {}
    held: dict[str, tuple[Session, Hits]] = {}  # collections whose backend holds the documents: their hits
    errors: dict[str, str] = {}
    for name in names:
        try:
            cs = session_of(name)
            if cs.held is not None:  # Milvus is_demo / full_text: hits from the backend (search/stored.py)
                held[name] = (cs, held_search(cs, cs.held, Spec(ranker, queries, h.candidate_depth, f)))
                continue
            ranked = rankings(cs, ranker, queries, h.candidate_depth, candidate_rows(cs, f))
            answered[name] = (cs, [(r[0], r[1]) for r in ranked])
        except CancelledWork:
            raise
        except RetrieverError as e:
            errors[name] = str(e)
    if not answered and not held:
        raise InvalidInputError("every collection failed: " + "; ".join(f"{n}: {m}" for n, m in errors.items()))
    sessions = {name: cs for name, (cs, _) in [*answered.items(), *held.items()]}
    first = next(iter(sessions.values())).config
    reranking = rerank.plan(first.rerank, first.is_multimodal)  # the cross-encoder stage (rerank.py)
    top = k if reranking is None else reranking.retrieve(k)
    if held:  # every list as hits (a local collection's read from its rows), fused by (collection, id)
        found = {**{name: hits_of(cs, [(r, sc, None) for r, sc in ranked])  # type: ignore[misc]
                    for name, (cs, ranked) in answered.items()},
                 **{name: hits for name, (_, hits) in held.items()}}
        hits = [stored.fused_collections({name: found[name][i] for name in sessions}, h.rrf_k, top)
                for i in range(len(queries))]
    else:
        hits = [_fused_hits(sessions, {name: ranked[i] for name, (_, ranked) in answered.items()}, h.rrf_k, top)
                for i in range(len(queries))]
    if reranking is not None:
        hits, chain = reranking.apply(queries, hits, k), stages(None, score_threshold)
    return apply(hits, chain), errors


def _fused_hits(sessions: Mapping[str, Session], rankings: Mapping[str, RowRanking], rrf_k: float,
                k: int) -> list[Hit]:
    """One query: the collections' rankings fused into hits that name their collection."""
    named = {name: [((name, int(r)), float(sc)) for r, sc in zip(rows.tolist(), scores.tolist()) if r >= 0]
             for name, (rows, scores) in rankings.items()}
    out = []
    for (name, row), score, sources in fused(named, "rrf", None, rrf_k, k):
        doc = sessions[name].collection.get(row)
        out.append(Hit(row=row, id=doc.id, text=doc.text, score=score, metadata=doc.metadata, sources=sources,
                       collection=name))
    return out
