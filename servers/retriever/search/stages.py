"""Result stages: what happens to a ranking's hits after retrieval, in order, one function each
(score scaling, the threshold; reranking, sentence windows and auto-merging join here)."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import InvalidInputError
from ..types import Hits

Stage = Callable[[Hits], Hits]


def scale(fn: Callable[[float], float]) -> Stage:
    """Every score mapped by `fn` (to 0..1, per retriever kind)."""
    return lambda hits: [[h.rescored(fn(h.score)) for h in q] for q in hits]


def threshold(minimum: float) -> Stage:
    """Hits scoring below `minimum` dropped (after scaling, when both are asked)."""
    if not math.isfinite(minimum):
        raise InvalidInputError(f"score_threshold must be a finite number, got {minimum!r}")
    return lambda hits: [[h for h in q if h.score >= minimum] for q in hits]


def stages(scale_with: Callable[[float], float] | None, minimum: float | None) -> list[Stage]:
    """The stages a search asks for with `scale_score` and `score_threshold`."""
    out: list[Stage] = []
    if scale_with is not None:
        out.append(scale(scale_with))
    if minimum is not None:
        out.append(threshold(minimum))
    return out


def apply(hits: Hits, chain: list[Stage]) -> Hits:
    for stage in chain:
        hits = stage(hits)
    return hits
