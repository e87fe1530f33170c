"""Hybrid's per-query cross-check (search/signals.py): BM25's prior falls with the cosine gap between
dense's best document and BM25's, to nothing at CROSS_TAU, and with BM25's coverage of the query;
nothing moves where the collection's prior does not trust dense."""

from __future__ import annotations

import numpy as np
import pytest
from retriever.search.signals import CROSS_TAU, checked_prior, checked_weights

DENSE = (np.array([4, 7, 1, 9]), np.array([0.80, 0.78, 0.70, 0.60]))


def bm25(top: int, score: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    return np.array([top, 4]), np.array([score, 5.0])


def test_agreeing_lists_keep_the_prior() -> None:
    assert checked_prior(0.5, DENSE, bm25(4), bound=10.0) == pytest.approx(0.5)


def test_bm25_prior_falls_with_the_gap() -> None:
    half = checked_prior(0.5, DENSE, bm25(7), bound=10.0)  # a gap of 0.02
    gap = 0.80 - 0.78
    assert half == pytest.approx(0.5 / (0.5 + 0.5 * (1 - gap / CROSS_TAU)))
    assert checked_prior(0.5, DENSE, bm25(1), bound=10.0) == 1.0  # a gap of 0.10 > CROSS_TAU
    assert checked_prior(0.5, DENSE, bm25(99), bound=10.0) == 1.0  # not in dense's list: below its last


def test_coverage_and_untrusted_dense() -> None:
    low = checked_prior(0.5, DENSE, bm25(4, score=2.5), bound=10.0)
    assert low > 0.5  # BM25's best reaches a quarter of what the query allows
    assert checked_prior(0.3, DENSE, bm25(1), bound=10.0) == 0.3  # dense not trusted: nothing moves


def test_three_priors_keep_their_ratio() -> None:
    w = checked_weights([0.5, 0.25, 0.25], DENSE, bm25(7), bound=10.0)
    assert sum(w) == pytest.approx(1.0) and w[1] == pytest.approx(w[2]) and w[0] > 0.5


def test_hybrid_applies_it_per_query(built_project) -> None:  # type: ignore[no-untyped-def]
    """hybrid.cross_check: the engine's hybrid equals adaptive fusion with each query's checked priors."""
    from conftest import engine_for
    from retriever.search.fusion import adaptive
    from retriever.search.rankers import BM25, Dense

    e = engine_for(built_project, {"hybrid": {"cross_check": True, "vector_weight": 0.5}})
    e.init()
    s = e.session
    queries = ["How do plants turn sunlight into sugar?", "what causes earthquakes", "quasar"]
    everything = (None, None)
    d_rows, d_scores = Dense().rows(s, queries, 500, everything)
    b_rows, b_scores = BM25().rows(s, queries, 500, everything)
    got = e.hybrid_search(queries, top_k=5)
    moved = 0
    for i, bound in enumerate(s.bm25.bounds(queries)):
        w = checked_weights([0.5, 0.5], (d_rows[i], d_scores[i]), (b_rows[i], b_scores[i]), bound)
        moved += w[0] != 0.5
        ids = s.collection.ids
        want = adaptive([[(ids[r], float(x)) for r, x in zip(d_rows[i], d_scores[i])],
                         [(ids[r], float(x) / bound) for r, x in zip(b_rows[i], b_scores[i])]], w, limit=5)
        assert [h.id for h in got[i]] == [k for k, _ in want]
        assert [h.score for h in got[i]] == pytest.approx([v for _, v in want], abs=1e-6)
    assert moved  # the check moved some query's priors
