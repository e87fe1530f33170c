"""MilvusStore on Milvus Lite and on a real Milvus 2.3.5 server (the `milvus_server` marker).

Each behaviour runs on both where it applies; the server cases need the private network
namespace that `make test` sets up (retriever.testing.milvus_server).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from retriever.errors import IndexMismatchError, InvalidInputError, MissingDependencyError
from retriever.indexes.milvus.store import (
    MilvusError,
    MilvusFields,
    MilvusLiteLockedError,
    MilvusStore,
    list_collections,
    validate_collection_name,
)

BACKENDS = [
    pytest.param("lite", id="lite"),
    pytest.param("server", id="server", marks=pytest.mark.milvus_server),
]
DIM = 8


@pytest.fixture(params=BACKENDS)
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "lite":
        return str(tmp_path / "milvus.db")
    return request.getfixturevalue("milvus_server_uri")


def make_store(uri: str, **kwargs) -> MilvusStore:
    return MilvusStore(uri, None, f"t_{uuid.uuid4().hex[:12]}", **kwargs)


@pytest.fixture
def store(uri: str) -> Iterator[MilvusStore]:
    s = make_store(uri)
    s.create(DIM, {"model": "test-model"})
    yield s
    s.drop()
    s.close()


def rows(n: int, seed: int = 0, prefix: str = "d") -> tuple[list[str], np.ndarray, list[str], list[dict]]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"{prefix}{i}" for i in range(n)]
    return ids, vectors, [f"text of {i}" for i in ids], [{"bucket": n % 10, "name": i} for n, i in enumerate(ids)]


def test_round_trip(store: MilvusStore) -> None:
    ids, vectors, texts, metas = rows(50)
    assert store.upsert(ids, vectors, texts, metas) == 50
    assert store.count() == 50
    hits = store.search(vectors[:3], k=5)
    assert [h[0][0] for h in hits] == ["d0", "d1", "d2"]  # each vector finds itself first
    first = hits[0][0]
    assert first[1] == pytest.approx(1.0, abs=1e-5) and first[2] == "text of d0" and first[3] == metas[0]
    scores = [s for _, s, _, _ in hits[0]]
    assert scores == sorted(scores, reverse=True)
    assert store.get(["d7", "nope"]) == {"d7": ("text of d7", metas[7])}
    assert store.delete(ids=["d1", "d2", "nope"]) == 2
    assert store.count() == 48


def test_reads_see_writes_at_once(store: MilvusStore) -> None:
    ids, vectors, texts, metas = rows(20)
    for i in range(5):  # each write is read back by the very next call
        store.upsert(ids[i:i + 1], vectors[i:i + 1], texts[i:i + 1], metas[i:i + 1])
        assert store.count() == i + 1
        assert store.search(vectors[i:i + 1], k=1)[0][0][0] == ids[i]
    store.delete(ids=["d3"])
    assert store.count() == 4
    assert "d3" not in [h[0] for h in store.search(vectors[3:4], k=5)[0]]
    assert store.get(["d3"]) == {}


def test_lite_flushes_once_per_write_burst(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lite 3.x searches unflushed rows by brute force in Python (30x slower at 5k rows): the
    first read after writes flushes, once for a bulk upsert of many chunks, not on later reads."""
    store = make_store(str(tmp_path / "m.db"), chunk=7)
    store.create(DIM, {"model": "test-model"})
    flushed: list[str] = []
    real = store._client.flush
    monkeypatch.setattr(store._client, "flush", lambda name, **kw: (flushed.append(name), real(name, **kw)))
    ids, vectors, texts, metas = rows(30)
    store.upsert(ids, vectors, texts, metas)  # 5 upsert calls
    assert flushed == []
    for i in range(3):
        assert store.search(vectors[i:i + 1], k=1)[0][0][0] == ids[i]
    assert store.count() == 30 and flushed == [store.collection]
    store.delete(ids=["d0"])
    assert store.count() == 29 and len(flushed) == 2
    store.close()


ANN_INDEXES = [
    pytest.param({"index_type": "HNSW", "params": {"M": 4, "efConstruction": 16}}, {"ef": 10}, "efSearch", 500,
                 id="hnsw-ef"),
    pytest.param({"index_type": "IVF_FLAT", "params": {"nlist": 16}}, {"nprobe": 1}, "nprobe", 16, id="ivf-nprobe"),
]


def _indexed(store: MilvusStore, n: int) -> None:
    """Flush, wait until the index covers every row, then reload: until then a Milvus server
    searches its growing segments with an interim index of its own, whatever the settings."""
    store._client.flush(store.collection)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        index = store._client.describe_index(store.collection, "vector")
        if index.get("indexed_rows", 0) >= n and not index.get("pending_index_rows", 0):
            break
        time.sleep(0.5)
    store._client.release_collection(store.collection)
    store._client.load_collection(store.collection)


@pytest.mark.milvus_server
@pytest.mark.parametrize(("index_params", "low", "name", "high"), ANN_INDEXES)
def test_a_call_sets_ef_or_nprobe(milvus_server_uri: str, index_params: dict, low: dict, name: str,
                                  high: int) -> None:
    """The YAML's low setting misses neighbours; a call's high one finds them all, and leaves the
    YAML's in place. (Milvus Lite searches exactly at any setting, so only a server shows it.)"""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((2000, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[:20] + 0.5 * rng.standard_normal((20, 16)).astype(np.float32)
    ids = [f"d{i}" for i in range(2000)]
    exact = [{ids[r] for r in row} for row in np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :10]]
    store = make_store(milvus_server_uri, index_params=index_params, search_params={"params": low})
    store.create(16, {"model": "test-model"})
    try:
        store.upsert(ids, vectors, ids, [{}] * 2000)
        _indexed(store, 2000)

        def recall(ann: dict | None) -> float:
            found = store.search(queries, k=10, ann=ann)
            return float(np.mean([len({h[0] for h in hits} & want) / 10 for hits, want in zip(found, exact)]))

        assert recall(None) < 0.9 and recall({name: high}) >= 0.98 and recall(None) < 0.9  # HNSW: near, not always exact
    finally:
        store.drop()
        store.close()


def test_a_call_s_ef_or_nprobe_reaches_milvus(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search request carries the call's value over the YAML's, and the next call the YAML's."""
    hnsw = make_store(uri, index_params={"index_type": "HNSW", "params": {"M": 8, "efConstruction": 64}},
                      search_params={"params": {"ef": 10}})
    hnsw.create(DIM, {"model": "test-model"})
    sent: list[dict] = []
    real = hnsw._client.search
    monkeypatch.setattr(hnsw._client, "search", lambda *a, **kw: (sent.append(kw["search_params"]), real(*a, **kw))[1])
    try:
        ids, vectors, texts, metas = rows(50)
        hnsw.upsert(ids, vectors, texts, metas)
        assert hnsw.search(vectors[:1], k=10, ann={"efSearch": 200})[0][0][0] == "d0"
        hnsw.search(vectors[:1], k=10)
        assert [p["params"] for p in sent] == [{"ef": 200}, {"ef": 10}]
    finally:
        hnsw.drop()
        hnsw.close()


def test_ef_or_nprobe_on_another_index_type_is_refused(uri: str) -> None:
    hnsw = make_store(uri, index_params={"index_type": "HNSW", "params": {"M": 8, "efConstruction": 64}})
    flat = make_store(uri)
    try:
        for store in (hnsw, flat):
            store.create(DIM, {"model": "test-model"})
        vectors = rows(1)[1]
        with pytest.raises(InvalidInputError, match="nprobe: this Milvus collection's index is HNSW"):
            hnsw.search(vectors, k=10, ann={"nprobe": 8})
        with pytest.raises(InvalidInputError, match="ef_search: this Milvus collection's index is FLAT"):
            flat.search(vectors, k=10, ann={"efSearch": 64})
    finally:
        for store in (hnsw, flat):
            store.drop()
            store.close()


def test_a_released_collection_is_loaded_before_the_first_read(store: MilvusStore) -> None:
    """A new process finds a collection released (Milvus Lite releases it when the process that
    loaded it ends; a server after a release or restart): its first read loads it."""
    ids, vectors, texts, metas = rows(20)
    store.upsert(ids, vectors, texts, metas)
    store._client.release_collection(store.collection)
    fresh = MilvusStore(store.uri, None, store.collection)
    try:
        assert fresh.search(vectors[:1], k=1)[0][0][0] == "d0"
        assert fresh.count() == 20
    finally:
        fresh.close()


def test_upsert_replaces(store: MilvusStore) -> None:
    ids, vectors, texts, metas = rows(10)
    store.upsert(ids, vectors, texts, metas)
    store.upsert(["d4"], vectors[9:10], ["new text"], [{"bucket": 99}])
    assert store.count() == 10
    assert store.get(["d4"]) == {"d4": ("new text", {"bucket": 99})}
    top = store.search(vectors[9:10], k=2)[0]
    assert {h[0] for h in top} == {"d4", "d9"}  # d4 now carries d9's vector
    assert "d4" not in [h[0] for h in store.search(vectors[4:5], k=1)[0]]


def test_search_with_expr(store: MilvusStore) -> None:
    ids, vectors, texts, metas = rows(100)
    store.upsert(ids, vectors, texts, metas)
    expr = 'metadata["bucket"] == 7'
    hits = store.search(vectors[:4], k=20, expr=expr)
    assert all(len(h) == 10 for h in hits)  # every match comes back, not a post-filtered short list
    assert all(meta["bucket"] == 7 for h in hits for _, _, _, meta in h)
    assert store.count(expr) == 10
    assert store.delete(expr='metadata["bucket"] == 1 or metadata["bucket"] == 2') == 20
    assert store.count() == 80


def test_info_round_trip_and_dimension_mismatch(uri: str) -> None:
    s = make_store(uri)
    try:
        s.create(DIM, {"model": "all-minilm-l6-v2"})
        assert s.info() == {"model": "all-minilm-l6-v2", "dimension": DIM, "format_version": 1}
        s.create(DIM, {"model": "ignored, exists"})  # idempotent
        assert s.info()["model"] == "all-minilm-l6-v2"
        with pytest.raises(IndexMismatchError, match=f"{DIM}-dimensional vectors, not 16"):
            s.create(16, {"model": "other"})
        assert s.collection in list_collections(uri)
    finally:
        s.drop()
        s.close()
    assert s.collection not in list_collections(uri)


def test_custom_field_names(uri: str) -> None:
    fields = MilvusFields(id="doc_id", vector="emb", text="body", metadata="meta", text_max_length=40)
    s = make_store(uri, fields=fields)
    try:
        s.create(DIM, {})
        ids, vectors, texts, metas = rows(3)
        s.upsert(ids, vectors, texts, metas)
        assert s.search(vectors[:1], k=1, expr='meta["bucket"] >= 0')[0][0][:3] == ("d0", pytest.approx(1, abs=1e-5),
                                                                                    "text of d0")
        with pytest.raises(InvalidInputError, match="document 'long'.*exceeds text_max_length=40"):
            s.upsert(["long"], vectors[:1], ["é" * 21], [{}])  # 42 UTF-8 bytes
        assert s.count() == 3
    finally:
        s.drop()
        s.close()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("has-dash", id="dash"),
        pytest.param("has space", id="space"),
        pytest.param("x" * 256, id="too-long"),
        pytest.param("名字", id="non-ascii"),
    ],
)
def test_collection_name_is_validated(name: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="invalid collection name"):
        MilvusStore(str(tmp_path / "m.db"), None, name)


def test_longest_collection_name_is_accepted() -> None:
    assert validate_collection_name("A_9" * 85) == "A_9" * 85


@pytest.mark.parametrize(
    "kwargs, message",
    [
        pytest.param({"ids": None, "expr": None}, "exactly one of ids or expr", id="neither"),
        pytest.param({"expr": "  "}, "use drop", id="empty-expr"),
    ],
)
def test_delete_arguments(store: MilvusStore, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        store.delete(**kwargs)


def test_duplicate_ids_in_one_upsert_are_refused(store: MilvusStore) -> None:
    _, vectors, texts, metas = rows(3)
    with pytest.raises(InvalidInputError, match="'d1' twice"):
        store.upsert(["d0", "d1", "d1"], vectors, texts, metas)
    assert store.count() == 0


HOLDER = """
import sys, time
from retriever.indexes.milvus.store import MilvusStore
MilvusStore(sys.argv[1], None, "held")
print("open", flush=True)
time.sleep(120)
"""


def test_lite_second_process_gets_a_clear_error(tmp_path: Path) -> None:
    db = str(tmp_path / "held.db")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, db], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(MilvusLiteLockedError, match="open in another process"):
            MilvusStore(db, None, "held")
    finally:
        holder.kill()
        holder.wait()
    MilvusStore(db, None, "held").close()  # free again once the holder is gone


def test_missing_pymilvus_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pymilvus", None)
    with pytest.raises(MissingDependencyError, match=r"mcp-retriever\[milvus\]"):
        MilvusStore(str(tmp_path / "m.db"), None, "c")


def test_unreachable_server_is_a_clear_error_without_secrets() -> None:
    with pytest.raises(MilvusError, match=r"cannot connect to Milvus at http://127.0.0.1:9\b") as caught:
        MilvusStore("http://user:secret@127.0.0.1:9", "token-secret", "c")
    assert "secret" not in str(caught.value)


META = [
    {"year": 2019, "tag": "a", "n": {"x": 1}},
    {"year": 2020, "tag": "b", "n": {"x": 2}},
    {"year": 2021, "tag": "a"},
    {"year": 2022, "tag": 'c"q'},
    {"tag": "a"},
    {"year": None, "tag": "b"},
]


# Expressions that mean the same on Lite 3.2.2 and the 2.3.5 server. Lite refuses `in` on a
# JSON path and treats a missing or null key as unknown under `!=` and `not`, where the server
# counts it as different: a portable "not equal" is `(f != v or not (exists f))`, and `in` is
# a chain of `==` joined by `or`.
@pytest.mark.parametrize(
    "expr, expected",
    [
        pytest.param('metadata["year"] >= 2020', {1, 2, 3}, id="range"),
        pytest.param('metadata["year"] == 2019 or metadata["year"] == 2021', {0, 2}, id="in-as-or"),
        pytest.param('metadata["year"] != 2019 or not (exists metadata["year"])', {1, 2, 3, 4, 5}, id="ne-missing"),
        pytest.param('metadata["tag"] == "c\\"q"', {3}, id="escaped-quote"),
        pytest.param('metadata["n"]["x"] == 2', {1}, id="nested"),
        pytest.param('metadata["year"] > 2019 and metadata["tag"] != "b"', {2, 3}, id="and"),
        pytest.param('id in ["d1", "d2"]', {1, 2}, id="ids"),
    ],
)
def test_portable_expressions(store: MilvusStore, expr: str, expected: set[int]) -> None:
    ids, vectors, texts, _ = rows(len(META))
    store.upsert(ids, vectors, texts, META)
    assert store.count(expr) == len(expected)
    assert {h[0] for h in store.search(vectors[:1], k=10, expr=expr)[0]} == {f"d{i}" for i in expected}


def test_another_client_with_strong_reads_sees_writes_at_once(store: MilvusStore) -> None:
    reader = MilvusStore(store.uri, None, store.collection, read_consistency="Strong")
    try:
        assert reader.count() == 0
        ids, vectors, texts, metas = rows(5)
        store.upsert(ids, vectors, texts, metas)
        assert reader.count() == 5
        store.delete(ids=["d0"])
        assert reader.count() == 4
        assert reader.search(vectors[:1], k=1)[0][0][0] != "d0"
    finally:
        reader.close()


def test_read_consistency_is_validated(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="read_consistency must be one of"):
        MilvusStore(str(tmp_path / "m.db"), None, "c", read_consistency="strong-ish")


def test_milvus_config_maps_ultrarag_keys_and_forbids_typos() -> None:
    from pydantic import ValidationError
    from retriever.config.milvus import MilvusConfig

    cfg = MilvusConfig(uri="x.db", text_field_name="body", id_max_length=64, index_chunk_size=10)
    assert cfg.fields() == MilvusFields(id="id", vector="vector", text="body", metadata="metadata", id_max_length=64)
    with pytest.raises(ValidationError, match="index_chunk"):
        MilvusConfig(index_chunk=5)
    with pytest.raises(ValidationError, match="not a valid Milvus field name"):
        MilvusConfig(text_field_name="has-dash")


def test_a_filter_milvus_cannot_read_is_not_echoed_back(store: MilvusStore) -> None:
    """A value with a control character became `\\u0001` in the expression, which Milvus refuses,
    echoing the whole expression (the caller's values) in its error."""
    from retriever.errors import InvalidInputError
    from retriever.filters import parse
    from retriever.indexes.milvus.filters import to_milvus
    from retriever.indexes.milvus.store import MilvusError

    with pytest.raises(InvalidInputError, match="control character U\\+0001"):
        to_milvus(parse({"field": "meta.name", "operator": "==", "value": "secret-ish \x01 value"}))
    ids, vectors, texts, metas = rows(10)
    store.upsert(ids, vectors, texts, metas)
    with pytest.raises(MilvusError) as failed:  # an expression no Milvus parses (Lite and the server), by hand
        store.search(vectors[:1], k=3, expr='metadata["name"] == "pass-7f1c" ))')
    assert "pass-7f1c" not in str(failed.value) and "<the filter expression>" in str(failed.value)
