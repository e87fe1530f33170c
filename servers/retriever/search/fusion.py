"""Rank fusion and score scaling: pure functions, one formula each, chosen from a dict. No I/O.

A ranking is a sequence of (key, score), best first; keys are unique within a ranking. Fused
rankings are sorted by score, highest first, equal scores by key (deterministic).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
Ranking = Sequence[tuple[K, float]]


def _weights(n: int, weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0 / n] * n if n else []
    if len(weights) != n or any(w < 0 for w in weights) or not any(weights):
        raise ValueError(f"need {n} non-negative weights, not all zero; got {list(weights)}")
    return list(weights)


def _sums(parts: dict[K, list[float]]) -> dict[K, float]:
    """Exactly rounded sums (math.fsum): the same terms in any order give the same float, so
    equal scores stay equal and ties are broken by key whatever the order of the inputs."""
    return {key: math.fsum(terms) for key, terms in parts.items()}


def _sorted(scores: dict[K, float], limit: int | None) -> list[tuple[K, float]]:
    def order(kv: tuple[K, float]) -> tuple[float, str]:
        return -kv[1], str(kv[0])

    if limit is None or limit >= len(scores):
        return sorted(scores.items(), key=order)
    return heapq.nsmallest(limit, scores.items(), key=order)


def rrf(rankings: Sequence[Ranking], weights: Sequence[float] | None = None, k: float = 60,
        limit: int | None = None) -> list[tuple[K, float]]:
    """Weighted reciprocal rank fusion: sum over rankings of w_i / (k + rank_i), ranks from 1."""
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    parts: dict[K, list[float]] = {}
    for w, ranking in zip(_weights(len(rankings), weights), rankings):
        for rank, (key, _) in enumerate(ranking, start=1):
            parts.setdefault(key, []).append(w / (k + rank))
    return _sorted(_sums(parts), limit)


def minmax(ranking: Ranking) -> list[tuple[K, float]]:
    """Scores mapped to 0..1 within one list (all equal -> all 1)."""
    if not ranking:
        return []
    lo = min(s for _, s in ranking)
    hi = max(s for _, s in ranking)
    span = hi - lo
    return [(key, (s - lo) / span if span > 0 else 1.0) for key, s in ranking]


def convex(rankings: Sequence[Ranking], weights: Sequence[float] | None = None, k: float = 0,
           limit: int | None = None) -> list[tuple[K, float]]:
    """Convex combination of min-max normalised scores; a key missing from a list scores 0 there."""
    parts: dict[K, list[float]] = {}
    key: K
    for w, ranking in zip(_weights(len(rankings), weights), rankings):
        for key, score in minmax(ranking):
            parts.setdefault(key, []).append(w * score)
    return _sorted(_sums(parts), limit)


PEAK_RANK = 20  # adaptive: a list's peak is its best score minus its 20th


def peak(ranking: Ranking) -> float:
    """How far a list's best score stands above its PEAK_RANK-th (0 for a list of one or none)."""
    if len(ranking) < 2:
        return 0.0
    return max(0.0, ranking[0][1] - ranking[min(PEAK_RANK, len(ranking)) - 1][1])


SHARE_BOUND = (0.4, 1.6)  # adaptive: each list's share stays within these multiples of its prior share


def adaptive_weights(rankings: Sequence[Ranking], weights: Sequence[float] | None = None) -> list[float]:
    """Per query: each list's prior share times its peak, as shares summing to 1, each kept within
    0.4 .. 1.6 times its prior share at any prior (two lists: dense prior 0.5 -> 0.2 .. 0.8, 0.3 ->
    0.12 .. 0.48 with BM25 the rest). A list that singles out its top documents counts more than a
    flat one; a zero prior stays zero; no peaks at all leave the priors."""
    prior = _weights(len(rankings), weights)
    total_prior = math.fsum(prior)
    base = [w / total_prior for w in prior]
    raw = [b * peak(r) for b, r in zip(base, rankings)]
    total = math.fsum(raw)
    share = [r / total for r in raw] if total > 0 else base
    lo, hi = SHARE_BOUND
    return within(share, [lo * b for b in base], [hi * b for b in base])


def within(share: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> list[float]:
    """`share` moved by one common amount m, each clipped to its bounds: clip(s_i + m, lo_i, hi_i)
    with m such that they sum to 1 (the nearest point to `share` with those bounds that sums to 1;
    it exists when sum(lo) <= 1 <= sum(hi)). Clipping and then dividing by the sum instead would
    push a share past its bound."""
    def total(m: float) -> float:
        return math.fsum(min(h, max(low, s + m)) for s, low, h in zip(share, lo, hi))

    # the total is piecewise linear and non-decreasing in m, bending where a share meets a bound
    bends = sorted({b - s for s, low, h in zip(share, lo, hi) for b in (low, h)})
    m = bends[-1]
    for left, right in zip(bends, bends[1:]):
        t_left, t_right = total(left), total(right)
        if t_right >= 1.0:
            m = left if t_right <= t_left else left + (1.0 - t_left) * (right - left) / (t_right - t_left)
            break
    return [min(h, max(low, s + m)) for s, low, h in zip(share, lo, hi)]


def adaptive(rankings: Sequence[Ranking], weights: Sequence[float] | None = None, k: float = 0,
             limit: int | None = None) -> list[tuple[K, float]]:
    """Scores as they come, on absolute scales (the caller's: cosine, BM25 over the query's
    highest possible score), summed with per-query weights (adaptive_weights); a key missing from
    a list gets that list's lowest score. It never stretches a flat list as min-max does, so a
    retriever that knows nothing of a query cannot drown the other (bench/QUALITY.md)."""
    lists = [list(r) for r in rankings]
    shares = adaptive_weights(lists, weights)
    scores: list[dict[K, float]] = [dict(r) for r in lists]
    floors = [min(d.values()) if d else 0.0 for d in scores]
    keys: set[K] = set().union(*scores)
    return _sorted({key: math.fsum(w * d.get(key, f) for w, d, f in zip(shares, scores, floors) if w > 0)
                    for key in keys}, limit)


FUSIONS: dict[str, Callable[..., list]] = {"rrf": rrf, "convex": convex, "adaptive": adaptive}


def fuse(method: str, rankings: Sequence[Ranking], weights: Sequence[float] | None = None, k: float = 60,
         limit: int | None = None) -> list:
    """`method` over `rankings`; the best `limit` (default all), best first."""
    try:
        fn = FUSIONS[method]
    except KeyError:
        raise ValueError(f"unknown fusion {method!r}; choose one of {sorted(FUSIONS)}") from None
    return fn(rankings, weights, k, limit)


# ---- scaling to 0..1 (Haystack's conventions) ------------------------------------------------

DOT_PRODUCT_SCALE = 100.0  # inner product of unnormalised vectors: expit(s / 100)
BM25_SCALE = 8.0  # BM25: expit(s / 8)


def expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


SCALERS: dict[str, Callable[[float], float]] = {
    "cosine": lambda s: (s + 1.0) / 2.0,
    "dot_product": lambda s: expit(s / DOT_PRODUCT_SCALE),
    "bm25": lambda s: expit(s / BM25_SCALE),
}
