"""The write side of a collection: add (upsert), delete, and building a Milvus collection.

Each function takes the current Session and returns the next one (plus a report); the engine
holds the write lock and publishes the result. FAISS and BM25 collections change through the
change log (collection.py), which is the commit point; the indexes follow it. In `is_demo` mode
Milvus holds every document and changes go straight to it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .collection import ChangeLog, Collection
from .corpus import DocStore
from .embedders import Embedder
from .errors import IndexMissingError, NotYetSupportedError
from .filters import Filter, to_milvus
from .indexes import Change
from .indexes.milvus_index import MilvusIndex, build_collection, shared_store
from .session import Session, bm25_manifest, build_bm25, corpus_manifest, milvus_manifest, remember_corpus
from .types import Document

Report = dict[str, Any]


def add(s: Session, docs: Sequence[Document], progress: bool) -> tuple[Session, Report]:
    """Embed `docs` with the session's model and add them; an id that exists is replaced."""
    vectors = s.embedder.encode_passages([d.text for d in docs]) if s.embedder is not None else None
    if s.config.is_demo:
        return _demo_add(s, docs, vectors)
    replaced = sum(d.id in s.store.row_of for d in docs)
    model = s.embedder.model_id if s.embedder is not None else None
    nxt = commit(s, s.store.with_added(docs, vectors, model), progress)
    return nxt, {"added": len(docs) - replaced, "replaced": replaced, "documents": len(nxt.store)}


def delete(s: Session, ids: Sequence[str], f: Filter | None, progress: bool) -> tuple[Session, Report]:
    """Delete by id and/or filter; ids not found are reported."""
    if s.config.is_demo:
        return _demo_delete(s, ids, f)
    rows = {s.store.row_of[i] for i in ids if i in s.store.row_of}
    if f is not None:
        rows.update(np.flatnonzero(s.store.mask(f)).tolist())
    nxt = commit(s, s.store.with_deleted(rows), progress) if rows else s
    return nxt, {"deleted": len(rows), "not_found": [i for i in ids if i not in s.store.row_of],
                 "documents": len(nxt.store)}


def commit(s: Session, changes: ChangeLog, progress: bool) -> Session:
    """Publish the new change log (the commit point), then bring the indexes up to it: FAISS
    appends the new vectors, Milvus upserts and deletes, BM25 is rebuilt over the live
    documents and saved."""
    paths = s.config.paths()
    remember_corpus(s.config)
    changes.save(paths.docs, corpus_manifest(s.docs))
    store = Collection(s.docs, changes)
    nxt = replace(s, store=store)
    before = len(s.store.log.docs)
    added = changes.docs[before:]
    vectors = changes.vectors[before:] if changes.vectors is not None else None
    newly = set(changes.deleted.tolist()) - set(s.store.log.deleted.tolist())
    gone = {s.store.ids[r] for r in newly} - {d.id for d in added}
    change = Change(added, vectors, sorted(gone), store.row_of, changes.generation)
    dense = s.dense.apply(change) if s.dense is not None else None
    bm25 = None
    if s.bm25 is not None and len(store):
        bm25 = build_bm25(nxt, progress)
        bm25.save(paths.bm25, bm25_manifest(nxt))
    return replace(nxt, dense=dense, bm25=bm25)


# ---- Milvus ------------------------------------------------------------------------------------


def index_milvus(s: Session, embedder: Embedder, vectors: np.ndarray | None, overwrite: bool) -> tuple[Session, Report]:
    """(Re)build the Milvus collection: the live corpus rows with their vectors from the
    embedding file and the change log's documents; in demo mode the corpus file embedded as it
    streams in."""
    mcfg = s.config.index_backend_configs.milvus
    store = shared_store(mcfg, s.config.collection_name)
    info = {**milvus_manifest(s), "log_generation": s.store.log.generation}
    batches = _demo_batches(s, embedder) if s.config.is_demo else _batches(s, vectors)  # type: ignore[arg-type]
    index = build_collection(store, info, batches, overwrite)
    index = index.with_rows(None if s.config.is_demo else s.store.row_of)
    remember_corpus(s.config)
    return replace(s, dense=index), {"collection": store.collection, **info, "documents": len(index)}


def _batches(s: Session, vectors: np.ndarray) -> Iterator[tuple[list[Document], np.ndarray]]:
    store, chunk = s.store, s.config.index_backend_configs.milvus.index_chunk_size
    for start in range(0, store.n_base, chunk):
        rows = [r for r in range(start, min(start + chunk, store.n_base)) if store.live[r]]
        yield [store.get(r) for r in rows], np.asarray(vectors[rows], dtype=np.float32)
    added, added_vectors = store.live_added()
    if added and added_vectors is not None:
        yield added, added_vectors


def _demo_batches(s: Session, embedder: Embedder) -> Iterator[tuple[list[Document], np.ndarray]]:
    if s.config.corpus_path is None:
        raise IndexMissingError("retriever_index in demo mode embeds corpus_path into Milvus; set corpus_path, "
                                "or add documents with retriever_add")
    docs, chunk = DocStore.open(s.config.corpus_path), s.config.index_backend_configs.milvus.index_chunk_size
    for start in range(0, len(docs), chunk):
        batch = [docs.get(r) for r in range(start, min(start + chunk, len(docs)))]
        yield batch, embedder.encode_passages([d.text for d in batch])


def _demo_index(s: Session) -> MilvusIndex:
    if isinstance(s.dense, MilvusIndex):
        return s.dense
    store = shared_store(s.config.index_backend_configs.milvus, s.config.collection_name)
    return build_collection(store, {**milvus_manifest(s), "log_generation": 0}, [], overwrite=False)


def _demo_add(s: Session, docs: Sequence[Document], vectors: np.ndarray | None) -> tuple[Session, Report]:
    if vectors is None:
        raise NotYetSupportedError("demo mode stores vectors in Milvus: use an embedding backend, not 'bm25'")
    index = _demo_index(s)
    replaced = len(index.store.get([d.id for d in docs])) if index is s.dense else 0
    index.write(docs, vectors)
    return replace(s, dense=index), {"added": len(docs) - replaced, "replaced": replaced, "documents": len(index)}


def _demo_delete(s: Session, ids: Sequence[str], f: Filter | None) -> tuple[Session, Report]:
    if not isinstance(s.dense, MilvusIndex):
        raise IndexMissingError("the Milvus collection does not exist yet; call retriever_index or retriever_add")
    store = s.dense.store
    found = set(store.get(list(ids))) if ids else set()
    deleted = store.delete(ids=sorted(found)) if found else 0
    if f is not None:
        deleted += store.delete(expr=to_milvus(f, store.fields.id, store.fields.metadata))
    return s, {"deleted": deleted, "not_found": [i for i in ids if i not in found], "documents": len(s.dense)}
