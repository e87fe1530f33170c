"""Multi-query and fan-out rerank once, after the fusion, on a local collection (FAISS + bm25s) and on
collections Milvus holds (full_text, Milvus Lite) alike (issue 46): each phrasing's or collection's
list is retrieved without the rerank stage, the lists are fused with RRF, and the cross-encoder (the
tiny one of test_rerank.py, depth 10) scores each query's fused top 10 once. Both sides give the
same hits in the same order with the same scores, and the reranker is called once per query with
the fused list. Reranking inside each phrasing's or collection's search (what held collections did
before) fails both tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from retriever.search import rerank
from retriever.testing.projects import engine_for
from test_rerank import build_tiny_cross_encoder
from test_search_once import QUERIES, local_and_held

DEPTH = 10
GROUPS = [[QUERIES[0], "photosynthesis glucose chlorophyll"], [QUERIES[1], "tectonic plates faults"],
          [QUERIES[3], "gravity bends light", "event horizon"]]
MODES = ["dense", "bm25", "hybrid"]


@pytest.fixture(scope="module")
def sides(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Any, Any, list[str]]]:
    """Per side (local, held: test_search_once.local_and_held): an engine with the rerank stage, one
    without, and its two collections' names (the sample corpus, a collection of notes)."""
    root = tmp_path_factory.mktemp("fused-rerank")
    ce = build_tiny_cross_encoder(root / "tiny-ce")
    out = []
    for path, plain, names in local_and_held(built_project, root, "fused"):
        reranking = engine_for(path, {"rerank": {"model_name_or_path": str(ce), "depth": DEPTH}})
        reranking.init()
        out.append((reranking, plain, names))
    return out


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[tuple[str | None, str]]]]:
    """Every call of the cross-encoder stage: its query and the (collection, id) of the hits it scored."""
    seen: list[tuple[str, list[tuple[str | None, str]]]] = []
    real = rerank.reranked

    def counted(scorer: Any, query: str, hits: Any) -> Any:
        seen.append((query, [(h.collection, h.id) for h in hits]))
        return real(scorer, query, hits)

    monkeypatch.setattr(rerank, "reranked", counted)
    return seen


def keyed(hits: list[list[Any]]) -> list[list[tuple[str | None, str]]]:
    return [[(h.collection, h.id) for h in q] for q in hits]


def same_on_both(got: list[list[list[Any]]], sides: list[tuple[Any, Any, list[str]]]) -> None:
    """Local and held answered alike: ids (and collections, by position) in order, scores within 1e-5."""
    (local, held), (local_names, held_names) = got, [names for _, _, names in sides]
    rename = dict(zip(held_names, local_names))
    assert [[h.id for h in q] for q in local] == [[h.id for h in q] for q in held]
    assert [[h.collection for h in q] for q in local] == [[rename.get(h.collection, h.collection) for h in q]
                                                          for q in held]
    for a, b in zip(local, held):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_multi_query_reranks_once_after_the_fusion(sides, calls, mode: str) -> None:
    got = []
    for reranking, plain, _ in sides:
        fused = plain.multi_query_search(GROUPS, top_k=DEPTH, mode=mode)  # the fusion without the stage
        calls.clear()
        got.append(reranking.multi_query_search(GROUPS, top_k=4, mode=mode))
        # one call per question, against its first phrasing, on its fused list
        assert calls == [(g[0], k) for g, k in zip(GROUPS, keyed(fused), strict=True)]
        assert [[h.id for h in q] for q in got[-1]] != [[h.id for h in q[:4]] for q in fused]  # the stage acted
    same_on_both(got, sides)


@pytest.mark.parametrize("mode", MODES)
def test_fanout_reranks_once_after_the_fusion(sides, calls, mode: str) -> None:
    got = []
    for reranking, plain, names in sides:
        fused, errors = plain.fanout_search(QUERIES, names, top_k=DEPTH, mode=mode)
        calls.clear()
        hits, more = reranking.fanout_search(QUERIES, names, top_k=4, mode=mode)
        assert not errors and not more
        assert calls == [(q, k) for q, k in zip(QUERIES, keyed(fused), strict=True)]
        assert keyed(hits) != [q[:4] for q in keyed(fused)]  # the stage acted
        got.append(hits)
    same_on_both(got, sides)
