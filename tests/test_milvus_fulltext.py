"""`index_backend_configs.milvus.full_text: true`: Milvus holds everything (documents, dense
vectors, and a BM25 sparse vector made by Milvus's BM25 function), so dense, BM25 and hybrid
search, filters and writes run against Milvus alone. On Milvus Lite 3.2.2 against the local
FAISS + bm25s engine on the same corpus; on the Milvus 2.3.5 server (no BM25 function) the mode is
refused at retriever_init while the other modes keep working."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import MCP
from retriever.filters import matches, parse
from retriever.indexes.milvus.client import MilvusVersionError
from retriever.search.fusion import fuse
from retriever.testing.projects import engine_for

# one word each, spelt as in the document that holds it (Milvus Lite's analyzer does not stem)
EXACT = ["photosynthesis", "earthquakes", "inflation", "black holes", "vaccines", "Gutenberg printing press",
         "caffeine", "mitochondria"]
QUERIES = ["How do plants turn sunlight into sugar?", "what causes earthquakes", "stock markets and inflation",
           "black holes and light"]
NEW = {"id": "n1", "contents": "Quokkas are small wallabies living on Rottnest Island near Perth.", "year": 2024,
       "topic": "zoology"}


def cmp(field: str, op: str, value: object) -> dict:
    return {"field": field, "operator": op, "value": value}


FILTERS = [
    pytest.param(cmp("meta.topic", "==", "biology"), id="eq"),
    pytest.param(cmp("meta.year", ">=", 2020), id="ge"),
    pytest.param(cmp("meta.topic", "in", ["history", "geology"]), id="in"),
    pytest.param({"operator": "NOT", "conditions": [cmp("meta.year", "<", 2018)]}, id="not"),
]


def full_text_project(src: Path, dest: Path, uri: str) -> Path:
    """A copy of the built sample project (FAISS, bm25s) whose Milvus settings are full_text."""
    shutil.copytree(src.parent, dest)
    path = dest / "parameter.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["index_backend"] = "milvus"
    cfg["index_backend_configs"]["milvus"] = {"uri": uri, "full_text": True}
    cfg["collection_name"] = f"ft_{uuid.uuid4().hex[:10]}"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus_ft") / "milvus.db")


@pytest.fixture(scope="module")
def local(built_project: Path):
    """The FAISS + bm25s engine over the sample corpus (the reference)."""
    e = engine_for(built_project)
    e.init()
    return e


@pytest.fixture(scope="module")
def indexed(built_project: Path, lite_uri: str, tmp_path_factory: pytest.TempPathFactory):
    """A full_text collection of the sample corpus, indexed once for the module's read-only tests."""
    e = engine_for(full_text_project(built_project, tmp_path_factory.mktemp("ft") / "p", lite_uri))
    e.init()
    assert e.index()["documents"] == 30
    return e


@pytest.fixture
def fresh(built_project: Path, lite_uri: str, tmp_path: Path):
    """A full_text collection of its own, for the tests that write."""
    e = engine_for(full_text_project(built_project, tmp_path / "p", lite_uri))
    e.init()
    e.index()
    return e


def ids(hits) -> list[list[str]]:
    return [[h.id for h in q] for q in hits]


def test_dense_is_faiss_exact_ranking(indexed, local) -> None:
    assert ids(indexed.search(QUERIES, top_k=10, mode="dense")) == ids(local.search(QUERIES, top_k=10, mode="dense"))


@pytest.mark.parametrize("query", EXACT)
def test_bm25_top_hit_is_bm25s_top_hit(indexed, local, query: str) -> None:
    got, want = indexed.bm25_search(query, top_k=3)[0], local.bm25_search(query, top_k=3)[0]
    assert got and got[0].id == want[0].id and got[0].score > 0
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)


def test_bm25_finds_nothing_for_words_no_document_has(indexed) -> None:
    assert indexed.bm25_search("zzyzzyva quuxplorer", top_k=5) == [[]]


@pytest.mark.parametrize("spec", FILTERS)
def test_filters_apply_to_dense_bm25_and_hybrid(indexed, local, spec) -> None:
    f = parse(spec)
    assert ids(indexed.search(QUERIES, top_k=5, filters=spec, mode="dense")) == \
        ids(local.search(QUERIES, top_k=5, filters=spec, mode="dense"))
    bm25 = indexed.bm25_search(QUERIES, top_k=5, filters=spec)  # a query may have no word in the filtered documents
    hybrid = indexed.hybrid_search(QUERIES, top_k=5, filters=spec)
    assert any(bm25) and all(hybrid)
    assert all(matches(f, h.id, h.metadata) for hits in [*bm25, *hybrid] for h in hits)


def test_hybrid_rrf_fuses_the_two_lists_milvus_returns(indexed) -> None:
    dense = indexed.search(QUERIES, top_k=30, mode="dense")
    bm25 = indexed.bm25_search(QUERIES, top_k=30)
    got = indexed.hybrid_search(QUERIES, top_k=5, fusion="rrf", vector_weight=0.5, candidate_depth=30)
    for d, b, h in zip(dense, bm25, got):
        want = fuse("rrf", [[(x.id, x.score) for x in d], [(x.id, x.score) for x in b]], [0.5, 0.5], 60, limit=5)
        assert [x.id for x in h] == [i for i, _ in want]
        assert [x.score for x in h] == pytest.approx([s for _, s in want])
        assert all(x.sources and set(x.sources) == {"dense", "bm25"} for x in h)


@pytest.mark.parametrize("fusion", ["adaptive", "rrf"])
def test_hybrid_puts_a_document_both_retrievers_find_first(indexed, fusion: str) -> None:
    hits = indexed.hybrid_search("How does photosynthesis turn sunlight into sugar?", top_k=3, fusion=fusion)[0]
    assert hits[0].id == "doc00" and hits[0].sources["dense"][0] == 1 and hits[0].sources["bm25"] is not None


def test_hybrid_convex_returns_top_k_with_both_sources(indexed) -> None:
    for hits in indexed.hybrid_search(QUERIES, top_k=4, fusion="convex"):
        assert len(hits) == 4 and all(set(h.sources) == {"dense", "bm25"} for h in hits)


def test_scaled_scores_lie_in_0_1(indexed) -> None:
    for hits in [*indexed.bm25_search(QUERIES, top_k=5, scale_score=True),
                 *indexed.hybrid_search(QUERIES, top_k=5, scale_score=True)]:
        assert all(0 <= h.score <= 1 for h in hits)


def test_add_upsert_delete_are_seen_by_the_next_search(fresh) -> None:
    assert fresh.add([NEW])["documents"] == 31
    assert ids(fresh.bm25_search("quokkas Rottnest", top_k=1)) == [["n1"]]
    assert ids(fresh.hybrid_search("quokkas on Rottnest Island", top_k=1)) == [["n1"]]
    assert fresh.add([{**NEW, "contents": "Numbats eat termites in Western Australia."}])["replaced"] == 1
    assert "n1" not in ids(fresh.bm25_search("quokkas Rottnest", top_k=5))[0]
    assert ids(fresh.bm25_search("numbats termites", top_k=1)) == [["n1"]]
    assert fresh.delete(ids=["n1", "ghost"]) == {"deleted": 1, "not_found": ["ghost"], "documents": 30}
    assert "n1" not in ids(fresh.bm25_search("numbats termites", top_k=5))[0]
    assert fresh.delete(filters=cmp("meta.topic", "==", "history"))["deleted"] == 4
    found = [h for hits in fresh.bm25_search(["World War", "photosynthesis"], top_k=30) for h in hits]
    assert found and all(h.metadata.get("topic") != "history" for h in found)
    assert fresh.status()["bm25_index"] == 26


def test_through_the_mcp_tools(fresh) -> None:
    mcp = MCP(fresh)
    assert mcp.ok("bm25_index")["full_text"] is True
    out = mcp.ok("bm25_search", {"query_list": ["photosynthesis"], "top_k": 2, "return_metadata": True})
    assert out["ret_ids"][0][0] == "doc00" and out["ret_meta"][0][0]["topic"] == "biology"
    out = mcp.ok("retriever_hybrid_search", {"query_list": QUERIES[:2], "top_k": 3})
    assert [len(q) for q in out["ret_psg"]] == [3, 3]


RESTART = """
import json, sys
from retriever.engine import Retriever
e = Retriever.from_yaml(sys.argv[1])
status = e.init()
q = "what causes earthquakes"
print(json.dumps({"status": status, "dense": [h.id for h in e.search(q, top_k=3, mode="dense")[0]],
                  "bm25": [h.id for h in e.bm25_search(q, top_k=3)[0]],
                  "hybrid": [h.id for h in e.hybrid_search(q, top_k=3)[0]]}))
"""


def test_a_new_process_searches_the_same_lite_file_without_reindexing(built_project: Path, tmp_path: Path) -> None:
    from retriever.indexes.milvus import index as milvus_index

    uri = str(tmp_path / "own.db")  # a database of its own: Milvus Lite allows one process per file
    project = full_text_project(built_project, tmp_path / "p", uri)
    e = engine_for(project)
    e.init()
    e.index()
    q = "what causes earthquakes"
    want = {"dense": ids(e.search(q, top_k=3, mode="dense"))[0], "bm25": ids(e.bm25_search(q, top_k=3))[0],
            "hybrid": ids(e.hybrid_search(q, top_k=3))[0]}
    milvus_index._STORES.pop((uri, e.config.collection_name)).close()
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(uri)  # Milvus Lite's in-process server holds the file until released
    (project.parent / "corpus.jsonl").unlink()  # nothing local is read
    shutil.rmtree(project.parent / "out")
    proc = subprocess.run([sys.executable, "-c", RESTART, str(project)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["status"]["dense_index"] == 30 and got["status"]["bm25_index"] == 30
    assert {k: got[k] for k in want} == want


def test_a_collection_made_without_full_text_is_refused(built_project: Path, lite_uri: str, tmp_path: Path) -> None:
    from retriever.errors import IndexMismatchError

    project = full_text_project(built_project, tmp_path / "p", lite_uri)
    demo = engine_for(project)
    demo.init(index_backend_configs={"milvus": {"uri": lite_uri, "full_text": False}}, is_demo=True)
    demo.index()
    with pytest.raises(IndexMismatchError, match="made without full_text"):
        engine_for(project).init()


@pytest.mark.milvus_server
def test_the_2_3_server_refuses_full_text_at_init_and_keeps_the_other_modes(built_project: Path, tmp_path: Path,
                                                                            milvus_server_uri: str) -> None:
    project = full_text_project(built_project, tmp_path / "p", milvus_server_uri)
    with pytest.raises(MilvusVersionError, match=r"Milvus 2\.5 or newer"):
        engine_for(project).init()
    mcp = MCP(engine_for(project))
    assert "Milvus 2.5 or newer" in mcp.error("retriever_init")
    demo = engine_for(project)
    demo.init(index_backend_configs={"milvus": {"uri": milvus_server_uri, "full_text": False}}, is_demo=True)
    assert demo.index()["documents"] == 30
    assert ids(demo.search("what causes earthquakes", top_k=1, mode="dense"))[0]
    from retriever.indexes.milvus.store import list_collections

    assert not [c for c in list_collections(milvus_server_uri) if c.startswith("mcp_retriever_probe_")]


# ---- full_text_analyzer: bm25s (the default) against milvus ------------------------------------

STEMMED = [("vaccine", "doc03"), ("earthquake", "doc11"), ("protected walls", "doc21")]


@pytest.mark.parametrize("query, doc", STEMMED)
def test_the_bm25s_analyzer_matches_stems_as_bm25s_does(indexed, local, query: str, doc: str) -> None:
    assert ids(indexed.bm25_search(query, top_k=1)) == [[doc]] == ids(local.bm25_search(query, top_k=1))


def test_scores_are_bm25s_lucene_scores_times_k1_plus_1(indexed, local) -> None:
    """Same terms, same statistics (one segment: the collection was written, then flushed once):
    Milvus's BM25 is bm25s's lucene times (k1 + 1), document for document."""
    k1 = indexed.config.backend_configs.bm25.k1
    for query in [*QUERIES, *EXACT, *(q for q, _ in STEMMED)]:
        got, want = indexed.bm25_search(query, top_k=30)[0], local.bm25_search(query, top_k=30)[0]
        assert want and {h.id: h.score for h in got} == pytest.approx({h.id: h.score * (k1 + 1) for h in want},
                                                                      rel=1e-4), query


def test_a_query_of_stop_words_finds_nothing(indexed) -> None:
    assert indexed.bm25_search(["the of and", "photosynthesis"], top_k=2)[0] == []


def test_the_milvus_analyzer_matches_words_not_stems_on_lite(built_project: Path, lite_uri: str, tmp_path: Path) -> None:
    project = full_text_project(built_project, tmp_path / "p", lite_uri)
    cfg = yaml.safe_load(project.read_text())
    cfg["index_backend_configs"]["milvus"]["full_text_analyzer"] = "milvus"
    project.write_text(yaml.safe_dump(cfg))
    e = engine_for(project)
    e.init()
    e.index()
    assert e.bm25_search("vaccine", top_k=1) == [[]]  # Lite 3.2.2 skips the stemmer
    assert ids(e.bm25_search("vaccines", top_k=1)) == [["doc03"]]
    with pytest.raises(Exception, match="call retriever_index"):  # the analyzer is recorded: a change needs a rebuild
        engine_for(project, {"index_backend_configs": {"milvus": {"uri": lite_uri, "full_text": True,
                                                                  "full_text_analyzer": "bm25s"}}}).init()



# ---- adaptive fusion's BM25 bound: document frequencies kept in Milvus ---------------------------

def test_bm25_bounds_are_bm25s_bounds_times_k1_plus_1(indexed, local) -> None:
    queries = [*QUERIES, *EXACT, "zzyzzyva", "the of and"]
    k1 = indexed.config.backend_configs.bm25.k1
    got = indexed.session.dense.bm25_bounds(queries)
    assert got == pytest.approx([b * (k1 + 1) for b in local.session.bm25.bounds(queries)], rel=1e-6)
    assert got[-2:] == [0.0, 0.0] and all(b > 0 for b in got[:-2])


@pytest.mark.parametrize("fusion", ["adaptive", "rrf", "convex"])
def test_hybrid_is_the_local_hybrid(indexed, local, fusion: str) -> None:
    """Same dense list (FLAT), same BM25 list and bound up to (k1 + 1): the same fused ranking."""
    options = {"top_k": 10, "fusion": fusion, "vector_weight": 0.5}
    got, want = indexed.hybrid_search(QUERIES, **options), local.hybrid_search(QUERIES, **options)
    assert ids(got) == ids(want)
    if fusion != "convex":  # convex scales min-max: the same ranking, scores of their own
        assert [h.score for q in got for h in q] == pytest.approx([h.score for q in want for h in q], rel=1e-5)


def test_document_frequencies_follow_add_upsert_delete(fresh) -> None:
    from collections import Counter

    store = fresh.session.dense.store

    def recounted() -> Counter:
        rows = store._client.query(store.collection, filter="", output_fields=["terms"], limit=1000,
                                   consistency_level="Strong")
        return Counter(t for r in rows for t in set(r["terms"].split()))

    def kept() -> dict:
        rows = store._client.query(store._stats.name, filter="", output_fields=["term", "df"], limit=16384,
                                   consistency_level="Strong")
        return {r["term"]: r["df"] for r in rows}

    assert kept() == dict(recounted()) and kept()["photosynthesi"] == 1
    fresh.add([NEW, {**NEW, "id": "n2", "contents": "Photosynthesis again, quokkas and the 15rα receptor."}])
    assert kept() == dict(recounted()) and kept()["quokka"] == 2 and kept()["15rα"] == 1
    fresh.add([{**NEW, "contents": "Numbats eat termites."}])  # n1 replaced: its old terms go
    assert kept() == dict(recounted()) and kept()["quokka"] == 1 and kept()["numbat"] == 1
    fresh.delete(ids=["n2"])
    fresh.delete(filters=cmp("meta.topic", "==", "history"))
    assert kept() == dict(recounted()) and "quokka" not in kept() and kept()["photosynthesi"] == 1


# ---- multi-query and fan-out in this mode --------------------------------------------------------

def test_multi_query_and_fanout_through_the_tools(indexed, fresh) -> None:
    mcp = MCP(fresh)
    for mode in ("bm25", "hybrid", "dense"):
        out = mcp.ok("retriever_multi_query_search", {
            "question_list": [["what causes earthquakes", "plate tectonics and volcanoes"]], "top_k": 3, "mode": mode})
        assert out["ret_ids"][0][0] == "doc11", mode
    fresh.add([NEW])  # in fresh's collection only
    names = [fresh.config.collection_name, indexed.config.collection_name]
    for mode in ("bm25", "hybrid", "dense"):
        out = mcp.ok("retriever_fanout_search", {"query_list": ["quokkas on Rottnest Island", "photosynthesis"],
                                                 "collections": names, "mode": mode, "top_k": 4})
        first = dict(zip(out["ret_ids"][0][:2], out["ret_collections"][0][:2]))  # each collection's best tie
        assert first.get("n1") == names[0], mode
        assert out["ret_ids"][1][:2] == ["doc00", "doc00"] and set(out["ret_collections"][1][:2]) == set(names), mode


def test_the_query_gate_acts_on_the_hybrid_milvus_returns(indexed) -> None:
    """The query gate (search/signals.py) as locally: once the collection's recent queries opened
    it, a query without a strong BM25 match comes back in dense's order."""
    import numpy as np
    from retriever.search import signals

    query = "light earthquakes sugar"  # three topics' words: BM25 and dense disagree below the top
    dense_ids = ids(indexed.search(query, top_k=10, mode="dense"))
    fused_ids = ids(indexed.hybrid_search(query, top_k=10))
    assert fused_ids != dense_ids  # else the test shows nothing
    gate = signals.gate_for(indexed.session)
    far = (np.array([1, 2]), np.array([0.8, 0.7])), (np.array([2]), np.array([1.0]))  # a gap of 0.1
    for _ in range(signals.GATE_WARM):
        gate.weigh([0.5, 0.5], *far, bound=10.0)
    assert ids(indexed.hybrid_search(query, top_k=10)) == dense_ids
