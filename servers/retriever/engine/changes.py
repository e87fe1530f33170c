"""How a local collection changes: its change log (store/collection.py) is the commit point, and
the indexes follow it (`VectorIndex.apply`, BM25's delta). documents.Local's add and delete end
here; the engine holds the write lock and publishes the session this returns."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..indexes import Change
from ..indexes.bm25 import BM25Index
from ..search import learned_sparse
from ..session import Session, bm25_after, bm25_manifest, build_bm25
from ..store.catalog import remember_corpus
from ..store.collection import ChangeLog, Collection
from ..store.manifests import corpus_manifest

Report = dict[str, Any]


def commit(s: Session, changes: ChangeLog, progress: bool, rebuild_bm25: bool = True) -> Session:
    """Publish the new change log (the commit point), then bring the indexes up to it: FAISS
    appends the new vectors, Milvus upserts and deletes, BM25 takes the added documents as its
    delta (or is rebuilt and saved past rebuild_fraction: session.bm25_after), the learned-sparse
    index encodes the added documents and is saved (learned_sparse.follow; deletes are masked)."""
    paths = s.config.paths()
    remember_corpus(s.config)
    changes.save(paths.docs, corpus_manifest(s.docs))
    collection = Collection(s.docs, changes)
    nxt = replace(s, collection=collection)
    before = len(s.collection.changes.docs)
    added = changes.docs[before:]
    vectors = changes.vectors[before:] if changes.vectors is not None else None
    newly = set(changes.deleted.tolist()) - set(s.collection.changes.deleted.tolist())
    gone = {s.collection.ids[r] for r in newly} - {d.id for d in added}
    change = Change(added, vectors, sorted(gone), collection.row_of, changes.generation)
    dense = s.dense.apply(change) if s.dense is not None else None
    bm25 = bm25_after(nxt, s.bm25, progress, rebuild_bm25) if s.bm25 is not None and len(collection) else None
    if bm25 is None and s.docs is None and len(collection) and not s.config.is_multimodal:
        bm25 = first_bm25(nxt, progress)
    nxt = replace(nxt, dense=dense, bm25=bm25)
    if added:
        learned_sparse.follow(nxt)  # the learned-sparse index, where there is one, encodes the added now
    return nxt


def first_bm25(s: Session, progress: bool) -> BM25Index:
    """A collection filled only by adds, ingests and syncs gets its BM25 index with its first
    documents (then it follows the log as a delta), so hybrid search, the agent's default,
    answers there too."""
    index = build_bm25(s, progress)
    index.save(s.config.paths().bm25, bm25_manifest(s))
    return index
