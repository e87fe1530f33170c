"""Document lifecycle on FAISS + BM25: add (upsert) and delete without rebuilding, named
collections, and crash safety of every change."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from conftest import MCP, copy_built, run_and_kill
from retriever.errors import IndexMismatchError, InvalidInputError
from retriever.testing.projects import engine_for, write_project

NEW = [
    {"id": "n1", "contents": "Quokkas are small wallabies living on Rottnest Island near Perth.", "year": 2024,
     "topic": "zoology"},
    {"id": "n2", "title": "Axolotl", "text": "The axolotl regenerates limbs, spinal cord and heart tissue.",
     "metadata": {"year": 2025, "topic": "zoology"}},
]
QUOKKA = "small wallaby on Rottnest Island"
QUOKKA_TWICE = [QUOKKA, "axolotl"]



@pytest.fixture
def live(tmp_path: Path, built_project: Path):
    e = engine_for(copy_built(built_project, tmp_path / "p"))
    e.init()
    return e


def top_ids(e, query: str, k: int = 3) -> dict[str, list[str]]:
    return {mode: [h.id for h in getattr(e, mode)(query, top_k=k)[0]]
            for mode in ("search", "bm25_search", "hybrid_search")}


def test_added_documents_are_searchable_at_once_by_every_retriever(live) -> None:
    assert live.add(NEW) == {"added": 2, "replaced": 0, "documents": 32}
    assert all(ids[0] == "n1" for ids in top_ids(live, QUOKKA).values())
    hit = live.search("axolotl limb regeneration", top_k=1, mode="dense")[0][0]
    assert (hit.id, hit.text, hit.metadata) == ("n2", "Axolotl The axolotl regenerates limbs, spinal cord and heart "
                                                "tissue.", {"year": 2025, "topic": "zoology"})
    zoology = {"field": "meta.topic", "operator": "==", "value": "zoology"}
    assert sorted(h.id for h in live.bm25_search("island axolotl", top_k=10, filters=zoology)[0]) == ["n1", "n2"]


def test_re_adding_an_id_replaces_it(live) -> None:
    before = live.search("photosynthesis", top_k=1, mode="dense")[0][0]
    assert before.id == "doc00"
    out_text = "Quokka colonies thrive on islands without foxes."
    out = live.add([{"id": "doc00", "contents": out_text}])
    assert out == {"added": 0, "replaced": 1, "documents": 30}
    for mode in ("search", "bm25_search", "hybrid_search"):
        hits = getattr(live, mode)("photosynthesis light energy glucose", top_k=40)[0]
        assert [h.text for h in hits if h.id == "doc00"] in ([], [out_text])  # the old text is gone everywhere
        assert len({h.id for h in hits}) == len(hits)
    assert all(ids[0] == "doc00" for ids in top_ids(live, "quokka colonies foxes").values())


def test_delete_by_id_and_by_filter(live) -> None:
    assert live.delete(ids=["doc11", "nope"]) == {"deleted": 1, "not_found": ["nope"], "documents": 29}
    for ids in top_ids(live, "what causes earthquakes", k=29).values():
        assert "doc11" not in ids
    old = {"field": "meta.year", "operator": "<", "value": 2015}
    out = live.delete(filters=old)
    assert out["deleted"] == 6 and out["documents"] == 23
    every = [h for h in live.search("history science", top_k=30, mode="dense")[0]]
    assert len(every) == 23 and all(h.metadata["year"] >= 2015 for h in every)
    with pytest.raises(InvalidInputError, match="needs ids, filters or both"):
        live.delete()


def test_changes_survive_a_restart(live) -> None:
    live.add(NEW)
    live.delete(ids=["doc11"])
    e = engine_for(live.base_dir / "parameter.yaml")
    status = e.init()
    assert status["corpus"]["documents"] == 31 and status["corpus"]["added"] == 2
    assert status["dense_index"] == 32 and status["bm25_index"] == 31  # FAISS keeps tombstoned rows, masked
    assert status.get("warnings") is None  # BM25 matched the log: no rebuild
    assert all(ids[0] == "n1" for ids in top_ids(e, QUOKKA).values())
    assert all("doc11" not in ids for ids in top_ids(e, "earthquakes tectonic plates", k=31).values())


def test_a_change_log_of_another_model_is_refused(live) -> None:
    live.add(NEW)
    manifest_path = live.base_dir / "out" / "docs" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["model"] = "BAAI/bge-small-en-v1.5"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="embedded with 'BAAI/bge-small-en-v1.5'"):
        engine_for(live.base_dir / "parameter.yaml").init()


@pytest.mark.parametrize("documents, message", [
    pytest.param([], "non-empty list", id="empty"),
    pytest.param([{"contents": "x"}], "needs an 'id'", id="no-id"),
    pytest.param([{"id": "a"}], "no text field", id="no-text"),
    pytest.param([{"id": "a", "contents": "x"}, {"id": "a", "contents": "y"}], "duplicate id 'a'", id="dup"),
])
def test_bad_documents(live, documents: list, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        live.add(documents)


def test_named_collections_side_by_side(tmp_path: Path) -> None:
    path = write_project(tmp_path / "c", collection_name="notes", corpus_path=None)
    mcp = MCP(engine_for(path))
    mcp.ok("retriever_init")
    assert mcp.ok("retriever_add", {"documents": NEW})["documents"] == 2
    mcp.ok("bm25_index")
    assert mcp.ok("retriever_search", {"query_list": QUOKKA, "top_k": 5})["ret_ids"] == [["n1", "n2"]]
    assert mcp.ok("bm25_search", {"query_list": QUOKKA})["ret_ids"] == [["n1"]]
    assert "no corpus file" in mcp.error("retriever_embed")
    # A second collection in the same store, from the corpus file.
    mcp.ok("retriever_init", {"collection_name": "papers", "corpus_path": str(tmp_path / "c" / "corpus.jsonl")})
    mcp.ok("bm25_index")
    assert mcp.ok("bm25_search", {"query_list": QUOKKA})["ret_ids"] == [[]]
    listed = {c["name"]: c for c in mcp.ok("retriever_list_collections")["collections"]}
    assert listed["notes"]["documents"] == 2 and listed["notes"]["dimension"] == 384
    assert listed["notes"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert listed["papers"]["documents"] == 30 and listed["papers"]["bm25_index"]
    assert (tmp_path / "c" / "index" / "collections" / "notes" / "docs" / "manifest.json").is_file()
    assert "letters, digits and _" in mcp.error("retriever_init", {"collection_name": "bad-name!"})


def test_dense_search_of_an_empty_collection_finds_nothing(tmp_path: Path) -> None:
    """A named collection with no documents yet (FAISS asserted k > 0: an error with no message)."""
    mcp = MCP(engine_for(write_project(tmp_path / "c", collection_name="notes", corpus_path=None)))
    mcp.ok("retriever_init")
    assert mcp.ok("retriever_search", {"query_list": QUOKKA_TWICE, "top_k": 5})["ret_ids"] == [[], []]
    assert mcp.ok("retriever_search", {"query_list": QUOKKA_TWICE, "top_k": 5,
                                       "filters": {"field": "meta.year", "operator": ">=", "value": 2020}})["ret_ids"] == [[], []]


def test_lifecycle_tools_through_mcp(mcp_built: MCP, tmp_path: Path, built_project: Path) -> None:
    mcp = MCP(engine_for(copy_built(built_project, tmp_path / "m")))
    mcp.ok("retriever_init")
    assert mcp.ok("retriever_add", {"documents": NEW}) == {"added": 2, "replaced": 0, "documents": 32}
    out = mcp.ok("retriever_hybrid_search", {"query_list": QUOKKA, "top_k": 1, "return_metadata": True})
    assert out["ret_ids"] == [["n1"]] and out["ret_meta"][0][0]["topic"] == "zoology"
    assert mcp.ok("retriever_delete", {"ids": "n1"})["deleted"] == 1
    assert "n1" not in mcp.ok("bm25_search", {"query_list": QUOKKA, "top_k": 40})["ret_ids"][0]
    assert "needs an 'id'" in mcp.error("retriever_add", {"documents": [{"contents": "x"}]})


# ---- crash safety -------------------------------------------------------------------------------


def _change_forever(config: str, ready: multiprocessing.synchronize.Event) -> None:
    e = engine_for(Path(config))
    e.init()
    ready.set()
    i = 0
    while True:
        e.add([{"id": f"k{i}", "contents": f"Kangaroo number {1000 + i} hops across the outback plain {1000 + i}."}])
        if i % 3 == 2:
            e.delete(ids=[f"k{i - 1}"])
        i += 1


@pytest.mark.slow  # seconds: a subprocess, a crash loop or a SciFact pass; the full suite runs it
def test_killing_the_writer_mid_change_leaves_before_or_after(tmp_path: Path, built_project: Path) -> None:
    for delay in (0.4, 0.9, 1.7):
        path = copy_built(built_project, tmp_path / f"k{delay}")
        run_and_kill(_change_forever, path, delay)
        e = engine_for(path)
        status = e.init()
        store = e.session.collection
        added = [d.id for d in store.changes.docs]
        live_added = [store.ids[r] for r in store.live_rows().tolist() if r >= store.n_base]
        # Whole changes only: adds in order, every third one deleting the one before it.
        assert added == [f"k{i}" for i in range(len(added))]
        done = [f"k{i}" for i in range(len(added)) if not (i % 3 == 1 and i + 1 < len(added))]
        pending = [f"k{i}" for i in range(len(added)) if not (i % 3 == 1 and i + 2 < len(added))]
        assert live_added in (done, pending)  # the kill may fall between an add and its delete
        assert status["corpus"]["documents"] == 30 + len(live_added)
        assert status["bm25_index"] == 30 + len(live_added)  # rebuilt if the kill fell between the two writes
        for doc_id in live_added[-2:]:
            text = store.get(store.row_of[doc_id]).text
            assert e.search(text, top_k=1, mode="dense")[0][0].id == doc_id
            assert e.bm25_search(text, top_k=1)[0][0].id == doc_id


def test_adds_write_no_bm25_file_and_a_restart_rebuilds_the_delta_from_the_log(live) -> None:
    """Below rebuild_fraction an add keeps the saved BM25 index as it is (the log holds the added
    texts); a new process searches the same delta."""
    folder = live.session.config.paths().bm25
    before = (folder / "manifest.json").read_bytes()
    live.add(NEW[:1])
    live.delete(ids=["doc11"])
    assert (folder / "manifest.json").read_bytes() == before
    hits = [(h.id, h.score) for h in live.bm25_search(QUOKKA + " earthquakes", top_k=5)[0]]
    e = engine_for(live.base_dir / "parameter.yaml")
    status = e.init()
    assert status["bm25_index"] == 30 and status.get("warnings") is None
    assert [(h.id, h.score) for h in e.bm25_search(QUOKKA + " earthquakes", top_k=5)[0]] == hits
    assert hits[0][0] == "n1" and "doc11" not in [i for i, _ in hits]


def test_a_crash_between_the_log_and_a_bm25_rebuild_rebuilds_at_start(tmp_path: Path, built_project: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """rebuild_fraction 0 rebuilds on every change; the log is the commit point, so a rebuild
    that never reached the disk is made at the next start."""
    from retriever.indexes.bm25 import BM25Index

    path = copy_built(built_project, tmp_path / "p")
    live = engine_for(path, {"backend_configs": {"bm25": {"rebuild_fraction": 0}}})
    live.init()

    def crash(self, folder: Path, manifest: dict) -> None:
        raise OSError("killed before the BM25 index was written")

    monkeypatch.setattr(BM25Index, "save", crash)
    with pytest.raises(OSError):
        live.add(NEW)
    monkeypatch.undo()
    e = engine_for(path, {"backend_configs": {"bm25": {"rebuild_fraction": 0}}})
    status = e.init()
    assert status["bm25_index"] == 32 and e.session.bm25.delta is None
    assert e.bm25_search(QUOKKA, top_k=1)[0][0].id == "n1"


def test_past_rebuild_fraction_a_change_rebuilds_and_saves_bm25(live) -> None:
    """30 documents, rebuild_fraction 0.1: 3 changes stay a delta, the 4th rebuilds over the live
    documents; the rebuilt index scores as a clean build does."""
    folder = live.session.config.paths().bm25
    generation = lambda: json.loads((folder / "manifest.json").read_text())["log_generation"]  # noqa: E731
    live.add(NEW)
    live.delete(ids=["doc11"])
    assert live.session.bm25.delta is not None and generation() == 0
    live.add([{"id": "n3", "contents": "Wombats dig burrows and leave cube-shaped droppings."}])
    assert live.session.bm25.delta is None and generation() == 3
    fresh = engine_for(live.base_dir / "parameter.yaml")
    fresh.init()
    fresh.bm25_index(overwrite=True, progress=False)
    query = "wombat burrows quokka island earthquakes"
    assert [(h.id, h.score) for h in live.bm25_search(query, top_k=8)[0]] == \
        [(h.id, h.score) for h in fresh.bm25_search(query, top_k=8)[0]]


def test_a_bm25_index_ahead_of_a_restored_log_is_rebuilt(tmp_path: Path, built_project: Path) -> None:
    """The change log restored from a backup taken before a rebuild: BM25 covers rows the log does
    not have, so it is rebuilt at start (with a warning), not read past the collection."""
    import shutil

    path = copy_built(built_project, tmp_path / "p")
    live = engine_for(path, {"backend_configs": {"bm25": {"rebuild_fraction": 0}}})
    live.init()
    docs = live.session.config.paths().docs
    live.add(NEW[:1])
    shutil.copytree(docs, tmp_path / "backup")
    live.add(NEW[1:])  # rebuilt and saved over 32 documents
    shutil.rmtree(docs)
    shutil.copytree(tmp_path / "backup", docs)
    e = engine_for(path)
    status = e.init()
    assert any("change log does not have" in w for w in status["warnings"])
    assert status["bm25_index"] == 31
    assert "n2" not in [h.id for h in e.bm25_search("axolotl regenerates limbs", top_k=5)[0]]
    assert e.bm25_search(QUOKKA, top_k=1)[0][0].id == "n1"


def test_a_collection_without_a_corpus_file_answers_hybrid_after_its_first_add(tmp_path: Path) -> None:
    """Issue 30 named what such a collection lacked; issue 42: it lacks nothing. Its first add
    builds BM25, which follows every later add, so hybrid (the agent's default) answers at once;
    bm25_index there says the index is current instead of refusing."""
    mcp = MCP(engine_for(write_project(tmp_path / "p", corpus_path="")))
    mcp.ok("retriever_init")
    mcp.ok("retriever_add", {"documents": [{"id": "a", "contents": "quokka island"}, {"id": "b", "contents": "ice"}]})
    assert mcp.ok("retriever_search", {"query_list": "quokka"})["ret_ids"][0][0] == "a"
    assert mcp.ok("retriever_hybrid_search", {"query_list": "quokka"})["ret_ids"][0][0] == "a"
    mcp.ok("retriever_add", {"documents": [{"id": "c", "contents": "wombat burrow"}]})
    assert mcp.ok("bm25_search", {"query_list": "wombat"})["ret_ids"][0] == ["c"]
    assert mcp.ok("bm25_index")["up_to_date"] is True
