"""The write side of a collection: add (upsert) and delete.

Each function takes the current Session and returns the next one (plus a report); the engine
holds the write lock and publishes the result. A collection changes through its change log
(collection.py), which is the commit point; the indexes follow it (`VectorIndex.apply`). Where
the index backend holds the documents itself (Milvus demo mode), changes go straight to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import NotYetSupportedError
from ..filters import Filter
from ..indexes import Change, View
from ..session import Session, bm25_after
from ..store.catalog import remember_corpus
from ..store.collection import ChangeLog, Collection
from ..store.manifests import corpus_manifest
from ..types import Document

Report = dict[str, Any]


def add(s: Session, docs: Sequence[Document], progress: bool) -> tuple[Session, Report]:
    """Embed `docs` with the session's model and add them; an id that exists is replaced."""
    vectors = s.embedder.encode_passages([d.text for d in docs]) if s.embedder is not None else None
    if s.backend.holds_documents:
        if vectors is None or s.embedder is None:
            raise NotYetSupportedError("the index backend holds the documents and their vectors: use an embedding "
                                       "backend, not 'bm25'")
        index, replaced = s.backend.upsert(View(s.config, s.collection, s.embedder), s.dense, docs, vectors)
        return replace(s, dense=index), {"added": len(docs) - replaced, "replaced": replaced, "documents": len(index)}
    replaced = sum(d.id in s.collection.row_of for d in docs)
    model = s.embedder.model_id if s.embedder is not None else None
    nxt = commit(s, s.collection.with_added(docs, vectors, model), progress)
    return nxt, {"added": len(docs) - replaced, "replaced": replaced, "documents": len(nxt.collection)}


def delete(s: Session, ids: Sequence[str], f: Filter | None, progress: bool) -> tuple[Session, Report]:
    """Delete by id and/or filter; ids not found are reported."""
    if s.backend.holds_documents:
        deleted, not_found = s.backend.delete(s.dense, ids, f)
        return s, {"deleted": deleted, "not_found": not_found, "documents": len(s.dense) if s.dense else 0}
    rows = {s.collection.row_of[i] for i in ids if i in s.collection.row_of}
    if f is not None:
        rows.update(np.flatnonzero(s.collection.mask(f)).tolist())
    nxt = commit(s, s.collection.with_deleted(rows), progress) if rows else s
    return nxt, {"deleted": len(rows), "not_found": [i for i in ids if i not in s.collection.row_of],
                 "documents": len(nxt.collection)}


def commit(s: Session, changes: ChangeLog, progress: bool) -> Session:
    """Publish the new change log (the commit point), then bring the indexes up to it: FAISS
    appends the new vectors, Milvus upserts and deletes, BM25 takes the added documents as its
    delta (or is rebuilt and saved past rebuild_fraction: session.bm25_after)."""
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
    bm25 = bm25_after(nxt, s.bm25, progress) if s.bm25 is not None and len(collection) else None
    return replace(nxt, dense=dense, bm25=bm25)
