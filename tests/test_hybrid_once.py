"""Hybrid is written once (issue 46): a local collection (FAISS + bm25s) and one Milvus holds
(full_text, Milvus Lite) both run search/hybrid.py `ranked`, so a behaviour planted there (here:
fuse BM25's list alone) reaches both alike. Against the code before (two hybrids: rankers.Hybrid.rank
and stored.hybrid, fused by fused_rows and fused_hits) this test fails."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import yaml
from retriever.search import hybrid
from retriever.testing.projects import engine_for

QUERIES = ["How do plants turn sunlight into sugar?", "what causes earthquakes", "stock markets and inflation",
           "black holes and light"]


@pytest.fixture(scope="module")
def engines(built_project: Path, tmp_path_factory: pytest.TempPathFactory):
    """The sample corpus locally, and the same corpus in a full_text collection on Milvus Lite."""
    local = engine_for(built_project)
    local.init()
    dest = tmp_path_factory.mktemp("once") / "p"
    shutil.copytree(built_project.parent, dest)
    cfg = yaml.safe_load((dest / "parameter.yaml").read_text())
    cfg["index_backend"] = "milvus"
    cfg["index_backend_configs"]["milvus"] = {"uri": str(dest.parent / "milvus.db"), "full_text": True}
    cfg["collection_name"] = f"once_{uuid.uuid4().hex[:10]}"
    (dest / "parameter.yaml").write_text(yaml.safe_dump(cfg))
    held = engine_for(dest / "parameter.yaml")
    held.init()
    assert held.index()["documents"] == 30
    return local, held


def ids(hits) -> list[list[str]]:
    return [[h.id for h in q] for q in hits]


def test_a_behaviour_planted_in_ranked_reaches_local_and_held_alike(engines, monkeypatch) -> None:
    local, held = engines
    options = {"top_k": 5, "fusion": "rrf", "vector_weight": 0.5}
    assert ids(held.hybrid_search(QUERIES, **options)) == ids(local.hybrid_search(QUERIES, **options))
    real = hybrid.fused_rows

    def bm25_alone(ids, rankings, method, weights, k, top_k, scales=None):  # the plant
        return real(ids, {"bm25": rankings["bm25"]}, method, None, k, top_k, None)

    monkeypatch.setattr(hybrid, "fused_rows", bm25_alone)
    for engine in (local, held):
        got = engine.hybrid_search(QUERIES, **options)
        assert ids(got) == ids(engine.bm25_search(QUERIES, top_k=5))
        assert all(set(h.sources or {}) == {"bm25"} for q in got for h in q)
