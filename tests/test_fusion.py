"""Fusion and scaling: exact values for the formulas, properties (hypothesis) for the rest."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from retriever.search.fusion import SCALERS, adaptive, adaptive_weights, convex, fuse, minmax, rrf


def test_rrf_formula_with_weights() -> None:
    fused = dict(rrf([[("a", 9.0), ("b", 1.0)], [("b", 5.0), ("c", 4.0)]], weights=[0.7, 0.3], k=60))
    assert fused["a"] == pytest.approx(0.7 / 61)
    assert fused["b"] == pytest.approx(0.7 / 62 + 0.3 / 61)
    assert fused["c"] == pytest.approx(0.3 / 62)


def test_convex_formula_min_max_per_list() -> None:
    fused = dict(convex([[("a", 3.0), ("b", 2.0), ("c", 1.0)], [("c", 10.0), ("a", 0.0)]], weights=[0.6, 0.4]))
    assert fused == pytest.approx({"a": 0.6, "b": 0.3, "c": 0.4})


def test_adaptive_weights_follow_each_lists_peak_clipped() -> None:
    steep = [(f"a{i}", 1.0 - 0.05 * i) for i in range(25)]  # best minus 20th: 0.95
    flat = [(f"b{i}", 0.50 - 0.001 * i) for i in range(25)]  # 0.019
    assert adaptive_weights([steep, flat]) == pytest.approx([0.8, 0.2])  # 0.98 / 0.02, clipped
    close = [(f"c{i}", 0.9 - 0.04 * i) for i in range(25)]  # 0.76
    assert adaptive_weights([steep, close]) == pytest.approx([0.95 / 1.71, 0.76 / 1.71])
    assert adaptive_weights([steep, close], [1.0, 0.0]) == [1.0, 0.0]  # a zero prior stays zero
    assert adaptive_weights([[("x", 1.0)], [("y", 2.0)]], [0.3, 0.7]) == pytest.approx([0.3, 0.7])  # no peaks: priors
    # a prior bounds its list: within 0.4 .. 1.6 times its share, here 0.08 .. 0.32 for dense, and
    # BM25 takes the rest (0.68 .. 0.92, inside its own 0.32 .. 1.28)
    assert adaptive_weights([steep, flat], [0.2, 0.8]) == pytest.approx([0.32, 0.68])  # raw 0.92 / 0.08
    assert adaptive_weights([flat, steep], [0.2, 0.8]) == pytest.approx([0.08, 0.92])  # raw 0.005 / 0.995


@pytest.mark.parametrize("prior", [0.1, 0.208, 0.3, 0.5, 0.7])
@given(peaks=st.lists(st.floats(min_value=0, max_value=50, allow_nan=False), min_size=2, max_size=2))
def test_adaptive_shares_stay_within_their_bound_at_any_prior(prior: float, peaks: list[float]) -> None:
    """Each share within 0.4 .. 1.6 times its prior share, the shares summing to 1, whatever the
    peaks: shares renormalised after clipping broke it (dense 0.108 .. 0.632 at a prior of 0.3)."""
    rankings = [[("a", p), ("b", 0.0)] for p in peaks]  # each list's peak is p
    shares = adaptive_weights(rankings, [prior, 1 - prior])
    assert math.fsum(shares) == pytest.approx(1.0, abs=1e-12)
    for share, b in zip(shares, (prior, 1 - prior)):
        assert 0.4 * b - 1e-12 <= share <= 1.6 * b + 1e-12, (shares, prior)


@given(priors=st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), min_size=2, max_size=4).filter(
           lambda w: sum(w) > 1e-6),
       peaks=st.lists(st.floats(min_value=0, max_value=50, allow_nan=False), min_size=4, max_size=4))
def test_adaptive_shares_stay_within_their_bound_for_any_lists(priors: list[float], peaks: list[float]) -> None:
    rankings = [[("a", p), ("b", 0.0)] for p in peaks[:len(priors)]]
    shares = adaptive_weights(rankings, priors)
    base = [w / math.fsum(priors) for w in priors]
    assert math.fsum(shares) == pytest.approx(1.0, abs=1e-12)
    for share, b in zip(shares, base):
        assert 0.4 * b - 1e-12 <= share <= 1.6 * b + 1e-12, (shares, base)


def test_adaptive_formula_and_the_floor_of_a_missing_key() -> None:
    a = [("x", 0.9), ("y", 0.5), ("z", 0.1)]  # peak 0.8
    b = [("y", 0.6), ("w", 0.2)]  # peak 0.4
    w = [0.8 / 1.2, 0.4 / 1.2]
    fused = dict(adaptive([a, b]))
    assert fused == pytest.approx({"x": w[0] * 0.9 + w[1] * 0.2, "y": w[0] * 0.5 + w[1] * 0.6,
                                   "z": w[0] * 0.1 + w[1] * 0.2, "w": w[0] * 0.1 + w[1] * 0.2})


def test_a_flat_list_cannot_reorder_an_informative_one() -> None:
    """What min-max fusion gets wrong: noise with a tiny spread stretched to 0..1 outvotes the
    list that knows. Adaptive leaves it at its real size."""
    informative = [(f"d{i}", 0.9 - 0.02 * i) for i in range(30)]
    noise = [(f"d{(7 * i) % 30}", 0.300 - 0.0005 * i) for i in range(30)]  # the same documents, shuffled
    assert [k for k, _ in adaptive([informative, noise])[:10]] == [k for k, _ in informative[:10]]
    assert [k for k, _ in convex([informative, noise])[:10]] != [k for k, _ in informative[:10]]


def test_equal_scores_break_ties_by_id() -> None:
    assert [key for key, _ in rrf([[("b", 1.0)], [("a", 1.0)]])] == ["a", "b"]
    assert [key for key, _ in minmax([("x", 2.0), ("y", 2.0)])] == ["x", "y"]


@pytest.mark.parametrize(
    "call, message",
    [
        pytest.param(lambda: rrf([[("a", 1.0)]], weights=[0.5, 0.5]), "need 1 non-negative weights", id="count"),
        pytest.param(lambda: rrf([[("a", 1.0)], []], weights=[0, 0]), "not all zero", id="all-zero"),
        pytest.param(lambda: rrf([[("a", 1.0)]], k=-1), "rrf k must be >= 0", id="negative-k"),
        pytest.param(lambda: fuse("max", [[("a", 1.0)]]), "unknown fusion 'max'", id="unknown"),
    ],
)
def test_bad_fusion_arguments(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "scaler, score, expected",
    [("cosine", -1.0, 0.0), ("cosine", 1.0, 1.0), ("cosine", 0.0, 0.5), ("bm25", 0.0, 0.5),
     ("bm25", 8.0, 1 / (1 + math.exp(-1))), ("dot_product", 100.0, 1 / (1 + math.exp(-1)))],
)
def test_scalers(scaler: str, score: float, expected: float) -> None:
    assert SCALERS[scaler](score) == pytest.approx(expected)


def rankings_strategy(max_lists: int = 4) -> st.SearchStrategy:
    """Lists of unique ids ('d0'..'d29') with descending scores, as retrievers return them."""
    one = st.lists(st.sampled_from([f"d{i}" for i in range(30)]), unique=True, max_size=15).map(
        lambda ids: [(doc, float(len(ids) - i)) for i, doc in enumerate(ids)])
    return st.lists(one, min_size=1, max_size=max_lists)


@pytest.mark.parametrize("method", ["rrf", "convex", "adaptive"])
@given(ranking=rankings_strategy(1).map(lambda r: r[0]))
def test_fusing_one_list_keeps_its_order(method: str, ranking: list) -> None:
    assert [d for d, _ in fuse(method, [ranking])] == [d for d, _ in ranking]


@pytest.mark.parametrize("method", ["rrf", "convex", "adaptive"])
@given(rankings=rankings_strategy(), data=st.data())
def test_order_of_input_lists_does_not_matter_with_equal_weights(method: str, rankings: list, data) -> None:
    shuffled = data.draw(st.permutations(rankings))
    a, b = fuse(method, rankings), fuse(method, shuffled)
    assert [d for d, _ in a] == [d for d, _ in b]
    assert [s for _, s in a] == pytest.approx([s for _, s in b])


@pytest.mark.parametrize("method", ["rrf", "convex", "adaptive"])
@given(rankings=rankings_strategy())
def test_output_ids_come_from_inputs_once_each(method: str, rankings: list) -> None:
    out = [d for d, _ in fuse(method, rankings)]
    assert len(out) == len(set(out))
    assert set(out) == {d for r in rankings for d, _ in r}
    scores = [s for _, s in fuse(method, rankings)]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("method", ["rrf", "convex", "adaptive"])
@given(rankings=rankings_strategy(), limit=st.integers(min_value=0, max_value=40))
def test_limit_is_the_head_of_the_full_fusion(method: str, rankings: list, limit: int) -> None:
    assert fuse(method, rankings, limit=limit) == fuse(method, rankings)[:limit]
