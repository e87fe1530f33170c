"""Fan-out: one search over several collections at once, fused with RRF into one list.

Each collection is searched with its own indexes (dense, BM25 or hybrid, `candidate_depth`
deep, the same filter); the per-collection rankings are fused by reciprocal rank, keyed by
(collection, row) or, where the backend holds the documents, (collection, id): one function for
both (`fused_collections`), so equal ids in two collections stay two hits. Every hit names its
collection and, like every fused hit, its rank and score in each collection's list. A
collection that fails (missing, no index, a mismatch) is reported in `errors` while the others
answer; only when every collection fails is the call an error.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..config import HybridConfig
from ..errors import CancelledWork, InvalidInputError, RetrieverError
from ..filters import Filter
from ..filters import parse as parse_filter
from ..session import Session, candidate_rows
from ..types import Hit
from .hybrid import fused
from .kinds import held_search, kind
from .rankers import Ranker
from .results import as_queries
from .run import rankings
from .spec import Spec, finish, rrf_scale

# one query's list from one collection: (key, score) best first (a key is a row of a local collection,
# an id where the backend holds the documents), and the hit of a key
Listed = tuple[list[tuple[Any, float]], Callable[[Any], Hit]]


def fanout(session_of: Callable[[str], Session], queries: list[str], collections: Sequence[str], k: int,
           h: HybridConfig, mode: str = "hybrid", query_instruction: str | None = None,
           filters: dict[str, Any] | None = None, score_threshold: float | None = None, scale_score: bool = False,
           ) -> tuple[list[list[Hit]], dict[str, str]]:
    """Per query, the fused hits of every collection that answered; and the errors of the others.
    `session_of(name)` opens a collection ("" = the default one)."""
    ranker = kind(mode, h, query_instruction)
    f = None if filters is None else parse_filter(filters)  # parsed once for every collection
    names = list(dict.fromkeys(as_queries(collections, "collections")))
    answered: dict[str, tuple[Session, list[Listed]]] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            cs = session_of(name)
            answered[name] = (cs, _lists(cs, ranker, queries, h.candidate_depth, f))
        except CancelledWork:
            raise
        except RetrieverError as e:
            errors[name] = str(e)
    if not answered:
        raise InvalidInputError("every collection failed: " + "; ".join(f"{n}: {m}" for n, m in errors.items()))
    # the rerank stage of the first collection that answered (rerank.py)
    end = finish(next(iter(answered.values()))[0], k, rrf_scale(h.rrf_k, scale_score), score_threshold)
    return end(queries, [fused_collections({name: lists[i] for name, (_, lists) in answered.items()}, h.rrf_k,
                                           end.depth) for i in range(len(queries))]), errors


def _lists(cs: Session, ranker: Ranker, queries: list[str], depth: int, f: Filter | None) -> list[Listed]:
    """Per query, one collection's list, not reranked (the fusion's one rerank stage follows): a local
    collection's rows (read only for the fused hits), or where the backend holds the documents
    (Milvus is_demo / full_text) its hits (search/stored.py)."""
    if (held := cs.held) is not None:
        found = held_search(cs, held, Spec(ranker, queries, depth, f, reranked=False))
        return [([(x.id, float(x.score)) for x in hits], {x.id: x for x in hits}.__getitem__) for hits in found]
    ranked = rankings(cs, ranker, queries, depth, candidate_rows(cs, f))

    def read(row: int) -> Hit:
        doc = cs.collection.get(row)
        return Hit(row=row, id=doc.id, text=doc.text, score=0.0, metadata=doc.metadata)

    return [([(int(r), float(sc)) for r, sc in zip(rows.tolist(), scores.tolist()) if r >= 0], read)
            for rows, scores, _ in ranked]


def fused_collections(found: Mapping[str, Listed], rrf_k: float, k: int) -> list[Hit]:
    """One query's lists from several collections fused with RRF, keyed by (collection, key): equal
    keys in two collections stay two hits; each hit names its collection and its rank in each list."""
    named: dict[str, list[tuple[tuple[str, Hashable], float]]] = {
        name: [((name, key), score) for key, score in listed] for name, (listed, _) in found.items()}
    return [replace(found[name][1](key), score=score, collection=name, sources=sources)
            for (name, key), score, sources in fused(named, "rrf", None, rrf_k, k)]
