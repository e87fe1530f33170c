"""One search, typed once (engine/retriever.py `search` makes it): the kind with its options, the
queries, how many hits, the filter parsed once, the result stages asked for. Every searcher below
the engine takes it, a local collection's (run.py) and a backend's that holds the documents
(stored.py); what they share is here: `finish` (the rerank stage, the scaling and the threshold),
`staged` (that, with the queries cut into chunks within the call's limits), and `phrasings`
(multi-query)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..filters import Filter
from ..security.limits import chunked
from ..session import Session
from ..types import Hits
from . import rerank
from .hybrid import Fused, RowRanking, fused_rows, fused_scale
from .rankers import Ranker, Scale
from .results import as_groups, regroup
from .stages import Stage, apply, stages

L = TypeVar("L")  # one query's list as a search gives it: rows and scores, or hits
AsRows = tuple[dict[str, RowRanking], Sequence[str]]  # one query's lists as rows and scores, each row's id


@dataclass(frozen=True)
class Spec:
    ranker: Ranker  # the kind and its options (search/kinds.py)
    queries: list[str]
    k: int  # hits per query
    filter: Filter | None = None
    scale_score: bool = False
    threshold: float | None = None
    reranked: bool = True  # False: one of a fusion's lists (multi-query, fan-out), whose one rerank stage follows it


@dataclass(frozen=True)
class Finish:
    """What follows retrieval in every search, in order: the rerank stage (`reranking`; None: none),
    then `chain` (the scaling where asked, the threshold), `k` hits per query."""

    reranking: rerank.Plan | None
    k: int
    chain: list[Stage]

    @property
    def depth(self) -> int:
        """How deep to retrieve for it: k, or deeper where the cross-encoder reranks."""
        return self.k if self.reranking is None else self.reranking.retrieve(self.k)

    def __call__(self, queries: Sequence[str], hits: Hits) -> Hits:
        return apply(rerank.after(self.reranking, queries, hits, self.k), self.chain)


def finish(s: Session | None, k: int, scale: Callable[[], Scale] | None, threshold: float | None) -> Finish:
    """The rerank stage `s`'s config names (rerank.py; None: no stage), then `scale` (the map to
    0..1, given where scale_score asks) unless the stage's own scores replaced the retrieval's, then
    the threshold."""
    reranking = None if s is None else rerank.plan(s.config.rerank, s.config.is_multimodal)
    return Finish(reranking, k, stages(scale() if scale is not None and reranking is None else None, threshold))


def rrf_scale(rrf_k: float, scale_score: bool) -> Callable[[], Scale] | None:
    """`scale_score` of an RRF over lists of equal weights summing to 1, whatever their number (a
    question's phrasings, the collections of a fan-out); None where it is not asked."""
    return (lambda: fused_scale("rrf", [1.0], rrf_k)) if scale_score else None


def staged(s: Session, spec: Spec, scale: Callable[[], Scale], rank: Callable[[list[str], int], Hits]) -> Hits:
    """Per query, its top `spec.k` hits: `rank(queries, depth)` gives a chunk of queries' hits
    `depth` deep (deeper than k where the collection's cross-encoder reranks them), then `finish`
    (without the rerank stage for one of a fusion's lists: `spec.reranked` False)."""
    end = finish(s if spec.reranked else None, spec.k, scale if spec.scale_score else None, spec.threshold)
    return chunked(lambda chunk: end(chunk, rank(chunk, end.depth)), spec.queries, s.config.limits,
                   spec.ranker.depth(end.depth))


def phrasings(searched: Callable[[list[str]], Sequence[L]], rows: Callable[[dict[str, L]], AsRows],
              hits: Callable[[list[Fused]], Hits], question_list: Any, rrf_k: float, end: Finish) -> Hits:
    """Multi-query, for a local collection's rows and a backend's hits alike: several phrasings per
    question, all searched at once (`searched`: per query its list, deep enough), each question's
    lists fused with RRF into its top `end.depth` (`rows`: one question's lists as rows and scores,
    and each row's id, as hybrid.Lists `rows`), their hits (`hits`), then `end` against each
    question's first phrasing."""
    groups = as_groups(question_list, "question_list")
    fused = []
    for group in regroup(searched([q for g in groups for q in g]), [len(g) for g in groups]):
        named, ids = rows({str(i): one for i, one in enumerate(group)})
        fused.append(fused_rows(ids, named, "rrf", None, rrf_k, end.depth))
    return end([g[0] for g in groups], hits(fused))
