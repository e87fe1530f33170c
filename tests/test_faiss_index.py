"""FAISS behind the index contract: appends without a copy (an older snapshot keeps seeing its own
rows), the index_factory hook, a clear error for a bad factory string."""

from __future__ import annotations

import numpy as np
import pytest
from retriever.errors import ConfigError, IndexMismatchError, InvalidInputError
from retriever.indexes import Change
from retriever.indexes.faiss.index import FaissIndex
from retriever.types import Document


def unit(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_an_add_appends_in_place_and_old_snapshots_keep_their_rows() -> None:
    base, extra = unit(50), unit(10, seed=1)
    old = FaissIndex.build(base, chunk=16)
    new = old.apply(Change([Document(f"n{i}", "t") for i in range(10)], extra, [], {}, 1))
    assert new._cpu is old._cpu  # the same FAISS index: no copy
    assert (len(old), len(new)) == (50, 60)
    rows, scores = old.search(extra, 60)
    assert rows.shape == (10, 50) and rows.max() < 50  # the appended rows are not the old snapshot's
    rows, _ = new.search(extra, 1)
    assert rows[:, 0].tolist() == list(range(50, 60))  # each new vector finds itself
    allowed = np.zeros(60, bool)
    allowed[[3, 55]] = True
    assert set(old.search(extra[:1], 5, allowed)[0][0].tolist()) == {3}
    assert set(new.search(extra[:1], 5, allowed)[0][0].tolist()) == {3, 55}
    with pytest.raises(IndexMismatchError, match="newest snapshot"):
        old.with_vectors(extra)


def test_an_ann_index_from_the_factory_string() -> None:
    vectors = unit(500, d=32)
    exact = FaissIndex.build(vectors, chunk=100)
    hnsw = FaissIndex.build(vectors, chunk=100, factory="HNSW32")
    queries = vectors[:20]
    e_rows, _ = exact.search(queries, 10)
    h_rows, _ = hnsw.search(queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(e_rows.tolist(), h_rows.tolist())])
    assert recall >= 0.9 and type(hnsw._cpu).__name__ == "IndexHNSWFlat"


def test_a_bad_factory_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="index_factory"):
        FaissIndex.build(unit(10), chunk=10, factory="NotAnIndex99")


@pytest.mark.parametrize("factory, tuning", [
    pytest.param("HNSW16", {"efSearch": 64}, id="hnsw"),
    pytest.param("IVF8,Flat", {"nprobe": 8}, id="ivf-flat-all-lists"),
    pytest.param("IVF8,PQ4x4", {"nprobe": 8}, id="ivf-pq"),
])
def test_filtered_and_snapshot_searches_work_on_every_ann_index(factory: str, tuning: dict) -> None:
    """IVF indexes refuse FAISS's generic search parameters: the selector must ride on their own."""
    vectors, extra = unit(600, d=16), unit(5, d=16, seed=2)
    index = FaissIndex.build(vectors, chunk=200, factory=factory, tuning=tuning)
    allowed = np.zeros(600, bool)
    allowed[::7] = True
    rows, _ = index.search(vectors[:10], 10, allowed)
    assert rows.shape == (10, 10) and all(allowed[r] for r in rows.ravel() if r >= 0)
    if factory == "IVF8,Flat":  # every list probed: the exact filtered top 10
        want = np.argsort(-(vectors[:10] @ vectors[allowed].T), axis=1, kind="stable")[:, :10]
        assert (rows == np.flatnonzero(allowed)[want]).all()
    newer = index.with_vectors(extra)
    rows, _ = index.search(extra, 5)  # the older snapshot: an ID range over its own rows
    assert rows.max() < 600 and len(newer) == 605


def test_search_settings_the_index_lacks_are_named() -> None:
    with pytest.raises(ConfigError, match="faiss.nprobe: the index .* has no nprobe"):
        FaissIndex.build(unit(100), chunk=100, factory="HNSW16", tuning={"nprobe": 4})
    index = FaissIndex.build(unit(300), chunk=100, factory="IVF4,Flat", tuning={"nprobe": 3})
    assert index._cpu.nprobe == 3


def test_a_call_sets_nprobe_and_ef_search_for_itself() -> None:
    """Per call, over the YAML's: all lists probed = exact; the index's own setting is untouched."""
    vectors, queries = unit(800, d=16), unit(20, d=16, seed=3)
    exact = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :10]
    ivf = FaissIndex.build(vectors, chunk=400, factory="IVF16,Flat", tuning={"nprobe": 1})
    default, _ = ivf.search(queries, 10)
    full, _ = ivf.search(queries, 10, ann={"nprobe": 16})
    assert (full == exact).all() and (default != exact).any()  # one list of 16 misses some
    assert ivf._cpu.nprobe == 1 and (ivf.search(queries, 10)[0] == default).all()
    allowed = np.zeros(800, bool)
    allowed[::3] = True
    rows, _ = ivf.search(queries, 10, allowed, ann={"nprobe": 16})
    keep = np.flatnonzero(allowed)
    assert (rows == keep[np.argsort(-(queries @ vectors[keep].T), axis=1, kind="stable")[:, :10]]).all()
    hnsw = FaissIndex.build(vectors, chunk=400, factory="HNSW8", tuning={"efSearch": 10})
    recall = [np.mean([len(set(r) & set(e)) / 10 for r, e in zip(hnsw.search(queries, 10, ann=a)[0], exact)])
              for a in (None, {"efSearch": 400})]
    assert recall[1] == 1.0 and recall[0] <= recall[1] and hnsw._cpu.hnsw.efSearch == 10
    with pytest.raises(InvalidInputError, match="ef_search: this collection's FAISS index .*IndexIVFFlat"):
        ivf.search(queries, 10, ann={"efSearch": 64})
    with pytest.raises(InvalidInputError, match="nprobe: .*IndexFlat.* nprobe is for IVF"):
        FaissIndex.build(vectors, chunk=400).search(queries, 10, ann={"nprobe": 4})


def ivf_engine(config, factory: str, nprobe: int):  # noqa: ANN001, ANN201 - a Path in, a Retriever out
    """The sample project with an IVF index from the YAML, embedded and indexed."""
    from retriever.testing.projects import engine_for

    engine = engine_for(config, {"index_backend_configs": {"faiss": {"index_factory": factory, "nprobe": nprobe}}})
    engine.init()
    engine.embed(progress=False)
    engine.index()
    return engine


def test_nprobe_through_the_tools(tmp_path) -> None:
    from conftest import MCP
    from retriever.testing.projects import write_project

    engine = ivf_engine(write_project(tmp_path / "p"), "IVF4,Flat", 1)
    engine.bm25_index(progress=False)
    mcp = MCP(engine)
    s = engine.session
    docs = np.load(s.config.paths().embedding)
    query = s.embedder.encode_queries(["cells and DNA"], "")[0]
    exact = [s.collection.get(int(r)).id for r in np.argsort(-(docs @ query), kind="stable")[:5]]
    out = mcp.ok("retriever_search", {"query_list": ["cells and DNA"], "top_k": 5, "nprobe": 4})  # every list
    assert out["ret_ids"][0] == exact
    one = mcp.ok("retriever_search", {"query_list": ["cells and DNA"], "top_k": 5})["ret_ids"][0]
    assert one != exact  # the YAML's nprobe 1 searches one list of 4
    hybrid = mcp.ok("retriever_hybrid_search", {"query_list": ["cells and DNA"], "top_k": 5, "nprobe": 4,
                                                "return_metadata": True})
    ranks = hybrid["ret_sources"]["dense"]["rank"][0]
    assert [exact[r - 1] for r in ranks if r is not None and r <= 5] == [i for i, r in zip(hybrid["ret_ids"][0], ranks)
                                                                         if r is not None and r <= 5]
    batch = mcp.ok("retriever_batch_search", {"batch_query_list": [["cells and DNA"]], "top_k": 5, "nprobe": 4})
    assert batch["ret_ids_ls"][0][0] == exact
    assert "ef_search" in mcp.error("retriever_search", {"query_list": ["x"], "ef_search": 32})
    assert "greater than or equal to 1" in mcp.error("retriever_search", {"query_list": ["x"], "nprobe": 0})


def test_an_ivf_index_from_the_yaml_answers_filtered_searches(tmp_path) -> None:
    from retriever.testing.projects import engine_for, write_project

    config = write_project(tmp_path / "p")
    engine = ivf_engine(config, "IVF2,Flat", 2)
    flt = {"field": "meta.topic", "operator": "==", "value": "biology"}
    hits = engine.search("cells and DNA", 3, filters=flt, mode="dense")[0]
    assert len(hits) == 3 and all(h.metadata["topic"] == "biology" for h in hits)
    exact = engine_for(config)
    exact.init(overwrite=True)
    exact.index(overwrite=True)
    assert [h.id for h in exact.search("cells and DNA", 3, filters=flt, mode="dense")[0]] == [h.id for h in hits]  # all lists probed


def test_ann_training_samples_enough_rows_for_every_list() -> None:
    from retriever.indexes.faiss.index import new_index, training_rows

    ivf = new_index(8, "IVF4096,Flat")
    rows = training_rows(ivf, 1_000_000)
    assert len(rows) == 50 * 4096 and (np.diff(rows) > 0).all() and rows[-1] < 1_000_000
    assert (training_rows(ivf, 1_000_000) == rows).all()  # the same sample every build
    assert len(training_rows(new_index(8, "HNSW16"), 1_000_000)) == 100_000
    assert (training_rows(ivf, 5_000) == np.arange(5_000)).all()


class _Watched:
    """A FAISS index that notes whether an add began while a search was inside it."""

    def __init__(self, index: object) -> None:
        import threading

        self._index, self._lock = index, threading.Lock()
        self.searching, self.overlapped = 0, False

    def __getattr__(self, name: str) -> object:
        return getattr(self._index, name)

    def search(self, *args: object, **kwargs: object) -> object:
        with self._lock:
            self.searching += 1
        try:
            return self._index.search(*args, **kwargs)
        finally:
            with self._lock:
                self.searching -= 1

    def add(self, *args: object) -> None:
        with self._lock:
            self.overlapped |= self.searching > 0
        if not self.overlapped:  # the real add inside a search crashes the process (seen: a segfault)
            self._index.add(*args)


def test_an_add_waits_for_a_search_inside_the_same_index() -> None:
    """A long search runs on the compute thread as a whole call (as a small MCP search does); an
    add sent meanwhile is taken back by its own thread after compute.PATIENCE and would reach
    the index while the search is inside it, without the index's lock."""
    import threading
    import time

    import faiss
    from retriever import compute

    rng = np.random.default_rng(0)
    real = faiss.IndexFlatIP(64)
    real.add(rng.standard_normal((200_000, 64), dtype=np.float32))
    watched = _Watched(real)
    index = FaissIndex(watched, {})
    queries = rng.standard_normal((3_000, 64), dtype=np.float32)
    started = time.perf_counter()
    search = compute.executor().submit(compute.whole(lambda: index.search(queries, 10)))
    while not watched.searching:
        time.sleep(0.001)
    added = threading.Thread(target=index.with_vectors, args=(rng.standard_normal((5, 64), dtype=np.float32),))
    added.start()
    rows, _ = search.result(timeout=120)
    took = time.perf_counter() - started
    added.join(120)
    assert took > 3 * compute.PATIENCE, f"the search took {took:.2f} s: too short to show the race"
    assert not watched.overlapped
    assert rows.shape == (3_000, 10) and real.ntotal == 200_005
