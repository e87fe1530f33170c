"""Fan-out: one search over several collections, fused with RRF; failures reported per collection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import MCP
from retriever.testing.projects import engine_for

NOTES = [
    {"id": "n1", "contents": "Quokkas are small wallabies living on Rottnest Island near Perth.", "topic": "zoology"},
    {"id": "doc00", "contents": "Photosynthesis in quokka habitats: island shrubs feed the wallabies.",
     "topic": "zoology"},
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, built_project: Path) -> Path:
    """The built sample corpus as the default collection, plus 'notes' (filled by adds) and
    'papers' (the corpus, BM25 only)."""
    root = tmp_path_factory.mktemp("fan") / "p"
    shutil.copytree(built_project.parent, root)
    e = engine_for(root / "parameter.yaml")
    e.init(collection_name="notes", corpus_path="")
    e.add(NOTES)
    e.bm25_index()
    e.init(collection_name="papers")
    e.bm25_index()
    return root / "parameter.yaml"


@pytest.fixture
def mcp(store: Path) -> MCP:
    m = MCP(engine_for(store))
    m.ok("retriever_init")
    return m


def test_hits_from_every_collection_name_their_collection(mcp: MCP) -> None:
    out = mcp.ok("retriever_fanout_search", {"query_list": ["small wallaby Rottnest Island", "plate tectonics"],
                                             "collections": ["", "notes"], "top_k": 4})
    assert out["errors"] == {}
    # RRF interleaves: each collection's best is ranked first there, so the two tie at the top.
    pairs = [list(zip(ids, cols)) for ids, cols in zip(out["ret_ids"], out["ret_collections"])]
    assert ("n1", "notes") in pairs[0][:2] and ("doc11", "") in pairs[1][:2]
    at = pairs[0].index(("n1", "notes"))
    assert out["ret_sources"]["notes"]["rank"][0][at] == 1 and out["ret_sources"][""]["rank"][0][at] is None
    assert len(pairs[0]) == 4 and {c for _, c in pairs[0]} == {"", "notes"}


def test_the_same_id_in_two_collections_stays_two_hits(mcp: MCP) -> None:
    out = mcp.ok("retriever_fanout_search", {"query_list": "photosynthesis", "collections": ["", "notes"],
                                             "top_k": 10, "mode": "bm25"})
    pairs = list(zip(out["ret_ids"][0], out["ret_collections"][0]))
    assert ("doc00", "") in pairs and ("doc00", "notes") in pairs


def test_a_failing_collection_is_reported_while_the_others_answer(mcp: MCP) -> None:
    out = mcp.ok("retriever_fanout_search", {"query_list": "quokka", "collections": ["notes", "ghost", "papers"],
                                             "mode": "dense"})
    assert "no collection named 'ghost'" in out["errors"]["ghost"]
    assert "no dense index" in out["errors"]["papers"]  # papers has BM25 only
    assert out["ret_ids"][0][0] == "n1" and set(out["ret_collections"][0]) == {"notes"}
    message = mcp.error("retriever_fanout_search", {"query_list": "quokka", "collections": ["ghost"]})
    assert "every collection failed" in message


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_one_collection_keeps_its_own_order(mcp: MCP, mode: str) -> None:
    tool = {"bm25": "bm25_search", "dense": "retriever_search", "hybrid": "retriever_hybrid_search"}[mode]
    alone = mcp.ok(tool, {"query_list": "how volcanoes form", "top_k": 8})
    fan = mcp.ok("retriever_fanout_search", {"query_list": "how volcanoes form", "collections": [""],
                                             "mode": mode, "top_k": 8})
    assert fan["ret_ids"] == alone["ret_ids"]


def test_filters_apply_in_every_collection(mcp: MCP) -> None:
    zoology = {"field": "meta.topic", "operator": "==", "value": "zoology"}
    out = mcp.ok("retriever_fanout_search", {"query_list": "photosynthesis island", "collections": ["", "notes"],
                                             "filters": zoology, "top_k": 10, "return_metadata": True})
    assert out["ret_meta"][0] and all(m["topic"] == "zoology" for m in out["ret_meta"][0])
    assert set(out["ret_collections"][0]) == {"notes"}
