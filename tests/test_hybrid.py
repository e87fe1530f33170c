"""Hybrid and multi-query search, score thresholds and scaling, through the MCP client."""

from __future__ import annotations

import pytest
from conftest import MCP
from retriever.search.fusion import rrf

Q = "How do plants turn sunlight into sugar?"


def test_hybrid_adaptive_is_cosine_plus_bounded_bm25_with_peak_weights(mcp_built: MCP, built) -> None:
    """The default fusion, recomputed from the single retrievers: weights from each list's best
    minus its 20th score (BM25 over the query's bound), clipped to 0.2..0.8; a hit missing from
    a list takes that list's lowest score."""
    queries = [Q, "what causes earthquakes", "quasar"]
    depth = {"query_list": queries, "top_k": 500}
    dense = mcp_built.ok("retriever_search", depth)
    sparse = mcp_built.ok("bm25_search", depth)
    hybrid = mcp_built.ok("retriever_hybrid_search", {"query_list": queries, "top_k": 10, "return_metadata": True})
    for i, bound in enumerate(built.session.bm25.bounds(queries)):
        d = dict(zip(dense["ret_ids"][i], dense["ret_scores"][i]))
        b = {k: s / bound for k, s in zip(sparse["ret_ids"][i], sparse["ret_scores"][i])}
        peaks = [scores[0] - scores[min(20, len(scores)) - 1] if len(scores) > 1 else 0.0
                 for scores in (list(d.values()), list(b.values()))]
        w = min(0.8, max(0.2, peaks[0] / sum(peaks))) if sum(peaks) > 0 else 0.5
        floors = [min(d.values()), min(b.values(), default=0.0)]
        expected = sorted(((w * d.get(k, floors[0]) + (1 - w) * b.get(k, floors[1]), k) for k in set(d) | set(b)),
                          key=lambda x: (-x[0], x[1]))[:10]
        assert hybrid["ret_ids"][i] == [k for _, k in expected]
        assert hybrid["ret_scores"][i] == pytest.approx([s for s, _ in expected], abs=2e-6)
    assert hybrid["ret_ids"][0][0] == "doc00"


def test_hybrid_rrf_is_the_rrf_of_dense_and_bm25(mcp_built: MCP) -> None:
    args = {"query_list": [Q, "what causes earthquakes"], "top_k": 30}
    dense = mcp_built.ok("retriever_search", args)
    sparse = mcp_built.ok("bm25_search", args)
    hybrid = mcp_built.ok("retriever_hybrid_search", {**args, "fusion": "rrf", "candidate_depth": 30})
    for i in range(2):
        expected = rrf([list(zip(dense["ret_ids"][i], dense["ret_scores"][i])),
                        list(zip(sparse["ret_ids"][i], sparse["ret_scores"][i]))], k=60)
        assert hybrid["ret_ids"][i] == [d for d, _ in expected]
        assert hybrid["ret_scores"][i] == pytest.approx([s for _, s in expected], abs=1e-6)
    assert hybrid["ret_ids"][0][0] == "doc00"


def test_every_hybrid_hit_says_its_rank_and_score_in_each_retriever(mcp_built: MCP) -> None:
    out = mcp_built.ok("retriever_hybrid_search", {"query_list": Q, "top_k": 30})
    dense = mcp_built.ok("retriever_search", {"query_list": Q, "top_k": 30})
    sparse = mcp_built.ok("bm25_search", {"query_list": Q, "top_k": 30})
    sources = out["ret_sources"]
    for j, doc_id in enumerate(out["ret_ids"][0]):
        for name, single in (("dense", dense), ("bm25", sparse)):
            ids = single["ret_ids"][0]
            rank, score = sources[name]["rank"][0][j], sources[name]["score"][0][j]
            if doc_id in ids:
                assert rank == ids.index(doc_id) + 1
                assert score == pytest.approx(single["ret_scores"][0][rank - 1], abs=1e-5)
            else:
                assert rank is None and score is None
    assert None in sources["bm25"]["rank"][0]  # some hits were found by dense alone


def test_vector_weight_one_is_the_dense_ranking(mcp_built: MCP) -> None:
    dense = mcp_built.ok("retriever_search", {"query_list": Q, "top_k": 10})
    for fusion in ("rrf", "convex", "adaptive"):
        only = mcp_built.ok("retriever_hybrid_search", {"query_list": Q, "top_k": 10, "vector_weight": 1.0,
                                                        "fusion": fusion})
        assert only["ret_ids"] == dense["ret_ids"]


def test_hybrid_batch_keeps_the_groups(mcp_built: MCP) -> None:
    out = mcp_built.ok("retriever_hybrid_batch_search",
                       {"batch_query_list": [[Q, "black holes"], ["inflation"]], "top_k": 2, "fusion": "convex"})
    assert [len(g) for g in out["ret_ids_ls"]] == [2, 1]
    assert out["ret_ids_ls"][0][1][0] == "doc07"
    assert set(out["ret_sources_ls"][1]) == {"dense", "bm25"}
    assert len(out["ret_sources_ls"][1]["bm25"]["rank"][0]) == 2


def test_multi_query_fuses_phrasings_per_question(mcp_built: MCP) -> None:
    phrasings = [["photosynthesis", "how plants make sugar from light"], ["tides", "moon gravity and the sea"]]
    out = mcp_built.ok("retriever_multi_query_search", {"question_list": phrasings, "top_k": 3, "mode": "dense"})
    assert [ids[0] for ids in out["ret_ids"]] == ["doc00", "doc08"]
    singles = [mcp_built.ok("retriever_search", {"query_list": p, "top_k": 1000}) for p in phrasings]
    expected = rrf([list(zip(ids, sc)) for ids, sc in zip(singles[1]["ret_ids"], singles[1]["ret_scores"])])
    assert out["ret_ids"][1] == [d for d, _ in expected][:3]
    assert set(out["ret_sources"]) == {"0", "1"}  # one column per phrasing


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_multi_query_modes(mcp_built: MCP, mode: str) -> None:
    out = mcp_built.ok("retriever_multi_query_search",
                       {"question_list": [["volcano on mars", "olympus mons"]], "top_k": 1, "mode": mode})
    assert out["ret_ids"] == [["doc09"]]


@pytest.mark.parametrize("tool", ["retriever_search", "bm25_search", "retriever_hybrid_search"])
def test_scale_score_maps_into_zero_one_and_keeps_the_order(mcp_built: MCP, tool: str) -> None:
    raw = mcp_built.ok(tool, {"query_list": Q, "top_k": 10})
    scaled = mcp_built.ok(tool, {"query_list": Q, "top_k": 10, "scale_score": True})
    assert scaled["ret_ids"] == raw["ret_ids"]
    assert all(0.0 <= s <= 1.0 for s in scaled["ret_scores"][0])
    assert scaled["ret_scores"][0] != raw["ret_scores"][0]


def test_cosine_scaling_is_s_plus_one_over_two(mcp_built: MCP) -> None:
    raw = mcp_built.ok("retriever_search", {"query_list": Q, "top_k": 3})["ret_scores"][0]
    scaled = mcp_built.ok("retriever_search", {"query_list": Q, "top_k": 3, "scale_score": True})["ret_scores"][0]
    assert scaled == pytest.approx([(s + 1) / 2 for s in raw], abs=1e-5)


@pytest.mark.parametrize("tool", ["retriever_search", "bm25_search", "retriever_hybrid_search"])
def test_score_threshold_drops_hits_below_it(mcp_built: MCP, tool: str) -> None:
    raw = mcp_built.ok(tool, {"query_list": Q, "top_k": 30})["ret_scores"][0]
    cut = raw[2] - 1e-5  # replies round scores to 6 decimals
    kept = mcp_built.ok(tool, {"query_list": Q, "top_k": 30, "score_threshold": cut})["ret_scores"][0]
    assert kept == [s for s in raw if s >= cut] and len(kept) >= 3
    none = mcp_built.ok(tool, {"query_list": Q, "top_k": 30, "score_threshold": 1e9})
    assert none["ret_ids"] == [[]]  # everything removed: an empty list, not an error


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param({"vector_weight": 1.5}, "vector_weight", id="weight"),
        pytest.param({"candidate_depth": 0}, "candidate_depth", id="depth"),
        pytest.param({"rrf_k": -1}, "rrf_k", id="rrf-k"),
    ],
)
def test_bad_hybrid_options(mcp_built: MCP, args: dict, message: str) -> None:
    assert message in mcp_built.error("retriever_hybrid_search", {"query_list": Q, **args})


def test_hybrid_needs_both_indexes(mcp: MCP) -> None:
    mcp.ok("retriever_init")
    mcp.ok("bm25_index")
    assert "needs both indexes" in mcp.error("retriever_hybrid_search", {"query_list": Q})


def test_hybrid_batch_with_a_group_left_empty_by_the_threshold(mcp_built: MCP) -> None:
    out = mcp_built.ok("retriever_hybrid_batch_search", {
        "batch_query_list": [["black holes"], ["zzzz qqqq"]], "top_k": 3, "score_threshold": 0.01, "fusion": "rrf"})
    assert out["ret_ids_ls"][0][0][0] == "doc07" and out["ret_ids_ls"][1] == [[]]
    assert set(out["ret_sources_ls"][0]) == {"dense", "bm25"} and out["ret_sources_ls"][1] == {}
