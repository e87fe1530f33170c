"""The `sparse` kind in a Milvus collection that holds the documents (is_demo / full_text with
`sparse.model_name_or_path`: indexes/milvus/sparse.py), on Milvus Lite with the tiny random MLM
built at test time: its hits are a brute-force ranking by the SparseEncoder's own dot products over
the same documents, with a filter, after add / upsert / delete and after the collection is reopened;
hybrid fuses it; a collection made without the model keeps its old schema and is refused for
sparse search; the Milvus 2.3.5 server (no sparse vectors) is refused at init with what to change."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from retriever.errors import IndexMismatchError, IndexMissingError, NotYetSupportedError
from retriever.filters import matches, parse
from retriever.indexes.milvus import sparse as milvus_sparse
from retriever.indexes.milvus.client import MilvusVersionError
from retriever.search.fusion import fuse
from retriever.testing.projects import engine_for
from test_sparse import brute_force, build_tiny_mlm

QUERIES = ["how do plants turn light into sugar", "genetic material copied in cells", "volcano eruption lava"]
TOPIC = {"field": "meta.topic", "operator": "in", "value": ["biology", "geology"]}
NEW = {"id": "n1", "contents": "Quokkas are small wallabies living on Rottnest Island near Perth.", "year": 2024,
       "topic": "zoology"}


def held_project(src: Path, dest: Path, uri: str, model: Path | None, full_text: bool = True, **sparse: Any) -> Path:
    """A copy of the built sample project whose documents Milvus holds (full_text, else is_demo),
    with the sparse model `model` (None: none)."""
    shutil.copytree(src.parent, dest)
    path = dest / "parameter.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["index_backend"] = "milvus"
    cfg["index_backend_configs"]["milvus"] = {"uri": uri, "full_text": full_text}
    cfg["is_demo"] = not full_text
    cfg["collection_name"] = f"sp_{uuid.uuid4().hex[:10]}"
    if model is not None:
        cfg["sparse"] = {**cfg.get("sparse", {}), "model_name_or_path": str(model), **sparse}
    path.write_text(yaml.safe_dump(cfg))
    return path


def corpus(project: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (project.parent / "corpus.jsonl").read_text().splitlines() if line.strip()]
    return {r["id"]: r for r in rows}


def expected(model: Path, docs: dict[str, dict[str, Any]], k: int, spec: dict | None = None) -> list[list[Any]]:
    f = parse(spec) if spec else None
    kept = {i: d["contents"] for i, d in docs.items()
            if f is None or matches(f, i, {k: v for k, v in d.items() if k not in ("id", "contents")})}
    return brute_force(model, QUERIES, kept, k)


def check(got: list[list[Any]], want: list[list[Any]]) -> None:
    """The same documents with the same scores (float32 sums: within 1e-4), best first; two documents
    whose scores differ by less than that may come in either order."""
    for hits, w in zip(got, want, strict=True):
        assert len(hits) == len(w)
        assert {h.id: h.score for h in hits} == pytest.approx(dict(w), rel=1e-4, abs=1e-5)
        assert [h.score for h in hits] == pytest.approx([s for _, s in w], rel=1e-4, abs=1e-5)
        assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_mlm(tmp_path_factory.mktemp("mlm") / "tiny-mlm")


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus_sp") / "milvus.db")


@pytest.fixture(scope="module")
def indexed(built_project: Path, lite_uri: str, tiny_mlm: Path, tmp_path_factory: pytest.TempPathFactory):
    project = held_project(built_project, tmp_path_factory.mktemp("sp") / "p", lite_uri, tiny_mlm)
    e = engine_for(project)
    e.init()
    assert e.index()["documents"] == 30
    return e, project


def test_sparse_search_is_the_brute_force_ranking(indexed, tiny_mlm: Path) -> None:
    e, project = indexed
    want = expected(tiny_mlm, corpus(project), 7)
    assert all(want)
    check(e.sparse_search(QUERIES, top_k=7), want)
    assert e.sparse_index() == {"collection": e.config.collection_name, "learned_sparse": True, "documents": 30,
                                "model": "tiny-mlm"}  # nothing to build: Milvus keeps the vectors


def test_a_filter_limits_the_candidates_exactly(indexed, tiny_mlm: Path) -> None:
    e, project = indexed
    want = expected(tiny_mlm, corpus(project), 5, TOPIC)
    got = e.sparse_search(QUERIES, top_k=5, filters=TOPIC)
    check(got, want)
    assert all(h.metadata["topic"] in ("biology", "geology") for hits in got for h in hits)


def test_scaled_scores_and_the_text_come_back(indexed) -> None:
    from scipy.special import expit

    e, project = indexed
    docs = corpus(project)
    raw, scaled = e.sparse_search(QUERIES, top_k=5), e.sparse_search(QUERIES, top_k=5, scale_score=True)
    for r, sc in zip(raw, scaled, strict=True):
        assert [h.id for h in sc] == [h.id for h in r] and all(h.text == docs[h.id]["contents"] for h in sc)
        assert [h.score for h in sc] == pytest.approx([float(expit(h.score / 8)) for h in r])


def test_multi_query_fuses_the_phrasings_sparse_lists(indexed) -> None:
    e, _ = indexed
    found = e.sparse_search(QUERIES[:2], top_k=10)
    got = e.multi_query_search([QUERIES[:2]], top_k=5, mode="sparse", candidate_depth=10)[0]
    want = fuse("rrf", [[(x.id, x.score) for x in hits] for hits in found], None, e.config.hybrid.rrf_k, limit=5)
    assert [h.id for h in got] == [i for i, _ in want]


def test_hybrid_rrf_fuses_dense_and_sparse_in_bm25s_place(indexed) -> None:
    e, _ = indexed
    e.init(sparse={"hybrid": "instead_of_bm25"})
    try:
        dense, learned = e.search(QUERIES, top_k=30, mode="dense"), e.sparse_search(QUERIES, top_k=30)
        got = e.hybrid_search(QUERIES, top_k=5, fusion="rrf", vector_weight=0.5, candidate_depth=30)
        for d, sp, h in zip(dense, learned, got, strict=True):
            want = fuse("rrf", [[(x.id, x.score) for x in d], [(x.id, x.score) for x in sp]], [0.5, 0.5], 60, limit=5)
            assert [x.id for x in h] == [i for i, _ in want]
            assert [x.score for x in h] == pytest.approx([s for _, s in want])
            assert all(set(x.sources) == {"dense", "sparse"} for x in h)
        e.init(sparse={"hybrid": "fused"})
        for hits in e.hybrid_search(QUERIES, top_k=4, fusion="adaptive"):
            assert len(hits) == 4 and all(set(h.sources) == {"dense", "bm25", "sparse"} for h in hits)
    finally:
        e.init(sparse={"hybrid": "off"})


def test_add_upsert_delete_then_reopened(built_project: Path, tiny_mlm: Path, tmp_path: Path) -> None:
    from milvus_lite.server_manager import server_manager_instance
    from retriever.indexes.milvus import index as milvus_index

    uri = str(tmp_path / "own.db")  # a database of its own, released and reopened below
    project = held_project(built_project, tmp_path / "p", uri, tiny_mlm, full_text=False)  # is_demo
    e = engine_for(project)
    e.init()
    e.index()
    docs = corpus(project)
    e.add([NEW])
    docs["n1"] = NEW
    check(e.sparse_search(QUERIES, top_k=40), expected(tiny_mlm, docs, 40))
    changed = {**NEW, "contents": "Volcano lava and plants in cells turn light into sugar."}
    assert e.add([changed])["replaced"] == 1
    docs["n1"] = changed
    check(e.sparse_search(QUERIES, top_k=40), expected(tiny_mlm, docs, 40))
    assert e.delete(ids=["doc00", "ghost"])["deleted"] == 1
    assert e.delete(filters={"field": "meta.topic", "operator": "==", "value": "history"})["deleted"] >= 1
    docs = {i: d for i, d in docs.items() if i != "doc00" and d.get("topic") != "history"}
    check(e.sparse_search(QUERIES, top_k=40), expected(tiny_mlm, docs, 40))
    check(e.sparse_search(QUERIES, top_k=4, filters=TOPIC), expected(tiny_mlm, docs, 4, TOPIC))
    milvus_index._STORES.pop((uri, e.config.collection_name)).close()
    server_manager_instance.release_server(uri)
    again = engine_for(project)  # the collection reopened: nothing re-encoded, the same ranking
    again.init()
    check(again.sparse_search(QUERIES, top_k=40), expected(tiny_mlm, docs, 40))


def test_without_a_sparse_model_nothing_changes_and_sparse_is_refused(built_project: Path, lite_uri: str,
                                                                      tiny_mlm: Path, tmp_path: Path) -> None:
    project = held_project(built_project, tmp_path / "p", lite_uri, None)
    plain = engine_for(project)
    plain.init()
    plain.index()
    from retriever.indexes.milvus import index as milvus_index

    store = milvus_index._STORES[(lite_uri, plain.config.collection_name)]
    names = [f["name"] for f in store._client.describe_collection(store.collection)["fields"]]
    assert milvus_sparse.FIELD not in names and milvus_sparse.RECORD not in (store.info() or {})
    with pytest.raises(NotYetSupportedError, match="sparse.model_name_or_path"):
        plain.sparse_search(QUERIES, top_k=3)
    later = engine_for(project, {"sparse": {"model_name_or_path": str(tiny_mlm)}})
    later.init()  # dense and BM25 still serve it
    assert later.search(QUERIES[0], top_k=1, mode="dense")[0]
    with pytest.raises(IndexMismatchError, match="made without a sparse model"):
        later.sparse_search(QUERIES, top_k=3)
    with pytest.raises(IndexMissingError, match=r"retriever_index\(overwrite=true\)"):
        later.sparse_index()


def test_a_changed_model_is_refused(indexed, tmp_path: Path) -> None:
    e, project = indexed
    other = build_tiny_mlm(tmp_path / "other-mlm")
    changed = engine_for(project, {"sparse": {"model_name_or_path": str(other)}})
    changed.init()
    with pytest.raises(IndexMismatchError, match="another sparse model"):
        changed.sparse_search(QUERIES, top_k=3)
    with pytest.raises(IndexMismatchError, match="another sparse model"):
        changed.add([NEW])


@pytest.mark.milvus_server
def test_the_2_3_server_refuses_a_sparse_model_at_init(built_project: Path, tiny_mlm: Path, tmp_path: Path,
                                                       milvus_server_uri: str) -> None:
    from retriever.indexes.milvus.store import list_collections

    project = held_project(built_project, tmp_path / "p", milvus_server_uri, tiny_mlm, full_text=False)
    with pytest.raises(MilvusVersionError, match="cannot keep sparse vectors.*Milvus 2.4 or newer"):
        engine_for(project).init()
    plain = engine_for(project, {"sparse": {"model_name_or_path": None}})  # the same collection without the model
    plain.init()
    assert plain.index()["documents"] == 30
    assert plain.search("what causes earthquakes", top_k=1, mode="dense")[0]
    assert not [c for c in list_collections(milvus_server_uri) if c.startswith("mcp_retriever_probe_")]
