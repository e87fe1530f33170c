"""`index_backend: milvus` through the engine and the MCP tools, on Milvus Lite and on a real
Milvus 2.3.5 server: the same results and filters as FAISS, the document lifecycle, demo mode,
refusals and recovery."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from conftest import MCP, cli_json, copy_built, run_cli
from retriever.errors import IndexMismatchError
from retriever.filters import parse
from retriever.testing.projects import SAMPLE, engine_for

BACKENDS = [
    pytest.param("lite", id="lite"),
    pytest.param("server", id="server", marks=pytest.mark.milvus_server),
]
QUERIES = ["How do plants turn sunlight into sugar?", "what causes earthquakes", "stock markets and inflation",
           "black holes and light"]
META = {json.loads(line)["id"]: json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()}
NEW = [{"id": "n1", "contents": "Quokkas are small wallabies living on Rottnest Island near Perth.", "year": 2024,
        "topic": "zoology"}]


def cmp(field: str, op: str, value: object) -> dict:
    return {"field": field, "operator": op, "value": value}


FILTERS = [
    cmp("meta.topic", "==", "biology"),
    cmp("meta.year", ">=", 2020),
    cmp("meta.topic", "in", ["history", "geology"]),
    cmp("meta.topic", "not in", ["computing", "biology"]),
    cmp("meta.year", "!=", 2019),
    cmp("meta.nope", "!=", 1),  # a missing field is false on every backend
    cmp("id", "in", ["doc03", "doc11", "doc29"]),
    {"operator": "NOT", "conditions": [cmp("meta.year", "<", 2018), cmp("meta.topic", "==", "history")]},
    {"operator": "OR", "conditions": [cmp("meta.missing", "==", 1),
                                      {"operator": "NOT", "conditions": [cmp("meta.missing", "==", 1)]}]},
]


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One Milvus Lite database for the module (one Lite process), a collection per test."""
    return str(tmp_path_factory.mktemp("milvus") / "milvus.db")


@pytest.fixture(params=BACKENDS)
def uri(request: pytest.FixtureRequest, lite_uri: str) -> str:
    return lite_uri if request.param == "lite" else request.getfixturevalue("milvus_server_uri")


@pytest.fixture
def project(tmp_path: Path, built_project: Path, uri: str) -> Path:
    """The built sample project (embeddings, FAISS, BM25) pointed at a fresh Milvus collection."""
    shutil.copytree(built_project.parent, tmp_path / "p")
    path = tmp_path / "p" / "parameter.yaml"
    import yaml

    cfg = yaml.safe_load(path.read_text())
    cfg["index_backend_configs"]["milvus"] = {"uri": uri}
    cfg["collection_name"] = f"c_{uuid.uuid4().hex[:10]}"
    path.write_text(yaml.safe_dump(cfg))
    return path


def milvus(project: Path, **overrides):
    e = engine_for(project)
    e.init(index_backend="milvus", **overrides)
    return e


def test_the_same_ids_in_the_same_order_as_faiss_with_every_filter(project: Path) -> None:
    faiss = engine_for(project)
    faiss.init()
    faiss.embed(overwrite=True, progress=False)  # the collection's own paths
    faiss.index(overwrite=True)
    faiss.bm25_index(progress=False)
    m = milvus(project)
    report = m.index()
    assert report["documents"] == 30 and report["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    for spec in [None, *FILTERS]:
        want = [[h.id for h in hits] for hits in faiss.search(QUERIES, top_k=7, filters=spec, mode="dense")]
        got = [[h.id for h in hits] for hits in m.search(QUERIES, top_k=7, filters=spec, mode="dense")]
        assert got == want, spec
        if spec is not None:  # and the filter itself is right
            f = parse(spec)
            assert all(_matches(f, i) for row in got for i in row)
    hybrid = [[h.id for h in hits] for hits in m.hybrid_search(QUERIES, top_k=5)]
    assert hybrid == [[h.id for h in hits] for hits in faiss.hybrid_search(QUERIES, top_k=5)]


def _matches(f, doc_id: str) -> bool:
    from retriever.filters import matches

    meta = {k: v for k, v in META[doc_id].items() if k not in ("id", "contents")}
    return matches(f, doc_id, meta)


def test_lifecycle_reads_its_writes_and_survives_a_restart(project: Path) -> None:
    m = milvus(project)
    m.embed(overwrite=True, progress=False)
    m.index()
    assert m.add(NEW) == {"added": 1, "replaced": 0, "documents": 31}
    assert [h.id for h in m.search("small wallaby Rottnest Island", top_k=1, mode="dense")[0]] == ["n1"]
    assert m.add([{"id": "doc11", "contents": "Quokka burrows on islands."}])["replaced"] == 1
    assert m.delete(filters=cmp("meta.topic", "==", "history"))["deleted"] == 4
    ids = [h.id for h in m.search("history of empires and wars", top_k=40, mode="dense")[0]]
    assert len(ids) == 27 and not {i for i in ids if META.get(i, {}).get("topic") == "history"}
    again = milvus(project)
    assert again.status()["dense_index"] == 27
    hit = again.search("quokka burrows", top_k=1, mode="dense")[0][0]
    assert (hit.id, hit.text) == ("doc11", "Quokka burrows on islands.")


def test_demo_mode_keeps_everything_in_milvus(project: Path) -> None:
    mcp = MCP(engine_for(project))
    mcp.ok("retriever_init", {"index_backend": "milvus", "is_demo": True})
    assert mcp.ok("retriever_index")["documents"] == 30
    (project.parent / "corpus.jsonl").unlink()  # search needs no corpus file
    mcp = MCP(engine_for(project))
    mcp.ok("retriever_init", {"index_backend": "milvus", "is_demo": True})
    out = mcp.ok("retriever_search", {"query_list": QUERIES[:1], "top_k": 2, "return_metadata": True,
                                      "filters": cmp("meta.topic", "==", "biology")})
    assert out["ret_ids"][0][0] == "doc00" and out["ret_psg"][0][0].startswith("Photosynthesis")
    assert out["ret_meta"][0][0] == {"topic": "biology", "year": 2019}
    assert mcp.ok("retriever_add", {"documents": NEW})["documents"] == 31
    assert mcp.ok("retriever_search", {"query_list": "wallaby island", "top_k": 1})["ret_ids"] == [["n1"]]
    assert mcp.ok("retriever_delete", {"ids": ["n1", "ghost"]}) == {"deleted": 1, "not_found": ["ghost"],
                                                                  "documents": 30}
    assert "demo mode" in mcp.error("bm25_index")


def test_a_collection_of_another_model_is_refused(project: Path) -> None:
    m = milvus(project)
    m.embed(overwrite=True, progress=False)
    m.index()
    store = m.dense.store
    store.update_info({**store.info(), "model": "BAAI/bge-small-en-v1.5"})
    with pytest.raises(IndexMismatchError, match="model: saved 'BAAI/bge-small-en-v1.5'"):
        milvus(project)


def test_a_crash_between_the_log_and_milvus_is_repaired_at_start(project: Path, monkeypatch) -> None:
    from retriever.indexes.milvus.index import MilvusIndex

    m = milvus(project)
    m.embed(overwrite=True, progress=False)
    m.index()

    def crash(self, *args, **kwargs):
        raise OSError("killed before Milvus was written")

    monkeypatch.setattr(MilvusIndex, "apply", crash)
    with pytest.raises(OSError):
        m.add(NEW)
    monkeypatch.undo()
    again = milvus(project)
    assert any("brought up to date" in w for w in again.status()["warnings"])
    assert [h.id for h in again.search("small wallaby Rottnest Island", top_k=1, mode="dense")[0]] == ["n1"]


def test_collections_are_listed_with_counts_model_and_dimension(project: Path) -> None:
    m = milvus(project)
    m.embed(overwrite=True, progress=False)
    m.index()
    listed = {c["name"]: c for c in m.list_collections()["collections"]}
    mine = listed[m.config.collection_name]
    assert (mine["documents"], mine["dimension"], mine["index_backend"]) == (30, 384, "milvus")
    assert mine["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_lite_collection_indexed_by_one_process_is_searched_by_the_next(tmp_path: Path, built_project: Path) -> None:
    """`retriever index` then `retriever search` in a new process: Milvus Lite releases a collection
    when its process ends, and the next process must load it before it searches."""
    import yaml

    config = copy_built(built_project, tmp_path / "p")
    cfg = yaml.safe_load(config.read_text())
    cfg["index_backend"] = "milvus"
    cfg["index_backend_configs"]["milvus"] = {"uri": str(tmp_path / "m.db")}
    config.write_text(yaml.safe_dump(cfg))
    built = run_cli("index", "--mode", "dense", "--config", str(config))
    assert built.returncode == 0, built.stderr[-2000:]
    hits = cli_json("search", "How do plants turn sunlight into sugar?", "-k", "3", "--json", "--config", str(config))
    assert len(hits) == 3 and hits[0]["id"] == "doc00", hits
