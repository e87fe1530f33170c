"""Fan-out: one search over several collections at once, fused with RRF into one list.

Each collection is searched with its own indexes (dense, BM25 or hybrid, `candidate_depth`
deep, the same filter); the per-collection rankings are fused by reciprocal rank, keyed by
(collection, row), so equal ids in two collections stay two hits. Every hit names its
collection and, like every fused hit, its rank and score in each collection's list. A
collection that fails (missing, no index, a mismatch) is reported in `errors` while the others
answer; only when every collection fails is the call an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import CancelledWork, InvalidInputError, RetrieverError
from .fusion import rrf
from .hybrid import RowRanking, hybrid_options, max_fused_score, source_of
from .results import as_queries, check_top_k, pick
from .session import candidates
from .types import Hit

if TYPE_CHECKING:
    from .engine import Retriever
    from .session import Session

Key = tuple[str, int]  # (collection, row)


def fanout_search(engine: Retriever, query_list: str | Sequence[str], collections: Sequence[str],
                  top_k: int | None = None, mode: str = "hybrid", query_instruction: str | None = None,
                  candidate_depth: int | None = None, filters: dict[str, Any] | None = None,
                  score_threshold: float | None = None, scale_score: bool = False,
                  ) -> tuple[list[list[Hit]], dict[str, str]]:
    """Per query, the fused hits of every collection that answered; and the errors of the others."""
    s = engine.need("retriever_fanout_search")
    queries = as_queries(query_list)
    names = list(dict.fromkeys(as_queries(collections, "collections")))
    k = check_top_k(pick(top_k, s.config.top_k))
    h = hybrid_options(s.config.hybrid, candidate_depth=candidate_depth)
    answered: dict[str, tuple[Session, list[RowRanking]]] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            cs = engine.collection_session(name)
            answered[name] = (cs, engine.rankings(cs, mode, queries, h, query_instruction, candidates(cs, filters)))
        except CancelledWork:
            raise
        except RetrieverError as e:
            errors[name] = str(e)
    if not answered:
        raise InvalidInputError("every collection failed: " + "; ".join(f"{n}: {m}" for n, m in errors.items()))
    best = max_fused_score("rrf", [1.0], h.rrf_k) if scale_score else None
    sessions = {name: cs for name, (cs, _) in answered.items()}
    hits = [_fused_hits(sessions, {name: ranked[i] for name, (_, ranked) in answered.items()}, h.rrf_k, k,
                        best, score_threshold) for i in range(len(queries))]
    return hits, errors


def _fused_hits(sessions: Mapping[str, Session], rankings: Mapping[str, RowRanking], rrf_k: float, k: int,
                best: float | None, threshold: float | None) -> list[Hit]:
    """One query: the collections' rankings fused into hits that name their collection."""
    named = {name: [((name, int(r)), float(sc)) for r, sc in zip(rows.tolist(), scores.tolist()) if r >= 0]
             for name, (rows, scores) in rankings.items()}
    rank_of = {name: {key: i for i, (key, _) in enumerate(ranking)} for name, ranking in named.items()}
    out = []
    for (name, row), score in rrf(list(named.values()), None, rrf_k, limit=k):
        score = score / best if best else score
        if threshold is not None and score < threshold:
            continue
        doc = sessions[name].store.get(row)
        sources = {n: source_of(named[n], rank_of[n].get((name, row))) for n in named}
        out.append(Hit(row=row, id=doc.id, text=doc.text, score=score, metadata=doc.metadata, sources=sources,
                       collection=name))
    return out
