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
    from retriever.search.fusion import adaptive
    from retriever.search.rankers import BM25, Dense
    from retriever.session import Allowed
    from retriever.testing.projects import engine_for

    e = engine_for(built_project, {"hybrid": {"cross_check": True, "vector_weight": 0.5}})
    e.init()
    s = e.session
    queries = ["How do plants turn sunlight into sugar?", "what causes earthquakes", "quasar"]
    everything = Allowed(None, None)
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


# ---- the query gate: the collection's recent queries, not one query, open it ------------------

def agreeing() -> tuple[np.ndarray, np.ndarray]:
    return bm25(4, score=5.0)  # BM25's best is dense's best: a gap of 0


def disagreeing() -> tuple[np.ndarray, np.ndarray]:
    return bm25(1, score=5.0)  # dense's cosine of BM25's best is 0.10 below its own best


def test_the_gate_opens_only_after_enough_disagreeing_queries() -> None:
    from retriever.search.signals import GATE_WARM, QueryGate

    gate = QueryGate()
    for _ in range(GATE_WARM):  # warming: the fusion is kept, whatever the gaps
        assert gate.weigh([0.5, 0.5], DENSE, disagreeing(), bound=10.0) is None
    assert gate.weigh([0.5, 0.5], DENSE, disagreeing(), bound=10.0) == [1.0, 0.0]
    assert gate.weigh([0.5, 0.25, 0.25], DENSE, agreeing(), bound=10.0) == [1.0, 0.0, 0.0]


def test_the_gate_keeps_the_fusion_for_strong_bm25_matches_and_untrusted_dense() -> None:
    from retriever.search.signals import GATE_COVERAGE, GATE_WARM, QueryGate

    gate = QueryGate()
    for _ in range(GATE_WARM):
        gate.weigh([0.5, 0.5], DENSE, disagreeing(), bound=10.0)
    assert gate.is_open()
    strong = bm25(1, score=10.0 * GATE_COVERAGE)  # its best reaches GATE_COVERAGE of the bound
    assert gate.weigh([0.5, 0.5], DENSE, strong, bound=10.0) is None
    assert gate.weigh([0.3, 0.7], DENSE, disagreeing(), bound=10.0) is None  # dense not trusted


def test_the_gate_closes_when_the_queries_agree_again() -> None:
    from retriever.search.signals import GATE_WARM, GATE_WINDOW, QueryGate

    gate = QueryGate()
    for _ in range(GATE_WARM):
        gate.weigh([0.5, 0.5], DENSE, disagreeing(), bound=10.0)
    assert gate.is_open()
    for _ in range(GATE_WINDOW // 2 + 1):  # more than half of the window agrees: the median is 0
        gate.weigh([0.5, 0.5], DENSE, agreeing(), bound=10.0)
    assert not gate.is_open()


def test_hybrid_answers_in_dense_order_where_the_gate_is_open(built_project) -> None:  # type: ignore[no-untyped-def]
    """The engine's hybrid consults its collection's gate: opened by earlier disagreeing queries,
    a query without a strong BM25 match comes back in dense's order; `query_gate: false` or the
    gate closed keeps the adaptive fusion."""
    from retriever.search import signals
    from retriever.testing.projects import engine_for

    query = "light earthquakes sugar"  # three topics' words: BM25 and dense disagree below the top
    fused = engine_for(built_project, {"hybrid": {"query_gate": False}})
    fused.init()
    dense_ids = [h.id for h in fused.search([query], top_k=10, mode="dense")[0]]
    fused_ids = [h.id for h in fused.hybrid_search([query], top_k=10)[0]]
    assert fused_ids != dense_ids  # BM25 moves this query's fusion (else the test shows nothing)

    gated = engine_for(built_project)
    gated.init()
    assert [h.id for h in gated.hybrid_search([query], top_k=10)[0]] == fused_ids  # the gate is still warming
    gate = signals.gate_for(gated.session)
    for _ in range(signals.GATE_WARM):
        gate.weigh([0.5, 0.5], DENSE, disagreeing(), bound=10.0)
    assert [h.id for h in gated.hybrid_search([query], top_k=10)[0]] == dense_ids
    assert [h.id for h in fused.hybrid_search([query], top_k=10)[0]] == fused_ids  # off: the fusion
