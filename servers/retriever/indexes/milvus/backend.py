"""Milvus as a collection's index backend (Milvus Lite in process, or a server). Normally it holds
the corpus rows' vectors and follows the change log like FAISS; in demo mode (`is_demo`) it holds
the documents themselves, there is no corpus file here, and writes and hits go straight to it.
With `full_text` it holds the documents and also ranks BM25 (fulltext.py): dense, BM25 and
hybrid search all read Milvus alone."""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import IndexMismatchError, IndexMissingError, NotYetSupportedError
from ...filters import Filter
from ...security.visibility import Rule
from ...store.corpus import CorpusFile
from ...store.embedfile import open_embeddings
from ...store.manifests import dense_manifest
from ...store.persist import check_manifest
from ...types import Document, Hit
from ..base import Change, SparseEncoding, Vectors, View
from . import sparse as milvus_sparse
from .filters import where
from .fulltext import FullText, check_collection, probe
from .index import MilvusIndex, build_collection, shared_store
from .store import MilvusStore

if TYPE_CHECKING:
    from ...config import Config

log = logging.getLogger(__name__)


class MilvusBackend:
    """The vector backend of a Milvus collection; with `holds` (is_demo or full_text) also the
    collection's document store (indexes.base.HeldDocuments): backend_for hands it out as both."""

    def __init__(self, demo: bool, full_text: FullText | None = None) -> None:
        self.full_text = full_text
        self.holds = demo or full_text is not None
        self.rule: Rule | None = None  # the caller's visibility (seen_by); None: every document

    def seen_by(self, rule: Rule | None) -> MilvusBackend:
        """This collection as a caller of `rule` sees it: its visibility ANDed into every search, read,
        count and delete as a Milvus expression (filters.visible); a copy, this one unchanged."""
        if rule == self.rule:
            return self
        seen = copy.copy(self)
        seen.rule = rule
        return seen

    def _store(self, cfg: Config) -> MilvusStore:
        """The session's collection, creating and searching BM25 as this session's settings say (a
        store is shared by the sessions of one process, which may differ in full_text)."""
        store = shared_store(cfg.index_backend_configs.milvus, cfg.collection_name, self.full_text)
        store.full_text = self.full_text
        return store

    def manifest(self, view: View) -> dict[str, Any]:
        """What a Milvus collection records: in demo mode there is no corpus file to fingerprint;
        with full_text, the analyzer and BM25 parameters too."""
        e = view.embedder
        learned = {milvus_sparse.RECORD: view.sparse.record} if self.holds and view.sparse is not None else {}
        if self.full_text is not None:
            return {"model": e.model_id, "dimension": e.dimension, "is_demo": True, "full_text": self.full_text.record(),
                    **learned}
        if self.holds:
            return {"model": e.model_id, "dimension": e.dimension, "is_demo": True, **learned}
        return {**dense_manifest(view.collection.base, e), "is_demo": False}

    def load(self, view: View, warnings: list[str]) -> MilvusIndex | None:
        """The collection, checked against the view; one behind the change log (a crash between
        the log and the Milvus write) is brought up to date from the log."""
        store = self._store(view.config)
        if not store.exists():
            if self.full_text is not None:
                probe(store, self.full_text)  # refused here, at retriever_init, by a Milvus without BM25
            if self.holds and milvus_sparse.wanted(view.config):
                milvus_sparse.probe(store)  # a sparse model: refused at retriever_init by a Milvus without sparse vectors
            return None
        if self.full_text is not None:
            check_collection(store, self.full_text)
        info = store.info() or {}
        check_manifest(info, self.manifest(view), f"Milvus collection {store.collection!r}",
                       "call retriever_index(overwrite=true) to rebuild it, or pick another collection_name")
        if self.holds:
            return MilvusIndex(store, None, info)
        rows = view.collection
        index = MilvusIndex(store, rows.row_of, info)
        if info.get("log_generation", 0) != rows.changes.generation:
            warnings.append(f"Milvus collection {store.collection!r} predates the last add or delete; brought up to date")
            log.warning(warnings[-1])
            docs, vectors = rows.live_added()
            dead = {rows.ids[r] for r in rows.changes.deleted.tolist()} - set(rows.row_of)
            index = index.apply(Change(docs, vectors, sorted(dead), rows.row_of, rows.changes.generation))
        return index

    def build(self, view: View, embedding_file: Path | None, index_path: Path,
              overwrite: bool) -> tuple[MilvusIndex, dict[str, Any]]:
        """(Re)build the collection: the live corpus rows with their vectors from the embedding file
        and the change log's documents; in demo mode the corpus file embedded as it streams in."""
        cfg = view.config
        store = self._store(cfg)
        info = {**self.manifest(view), "log_generation": view.collection.changes.generation}
        sparse = view.sparse if self.holds else None
        if sparse is not None:
            milvus_sparse.probe(store)
        if self.holds:
            batches = _corpus_batches(view, embedding_file or cfg.paths().embedding)
        else:
            if view.collection.base is None:
                raise IndexMissingError("retriever_index: this collection has no corpus file (corpus_path is null); "
                                        "its documents come from retriever_add")
            vectors = open_embeddings(embedding_file or cfg.paths().embedding,
                                      dense_manifest(view.collection.base, view.embedder))
            batches = _row_batches(view, vectors)
        index = build_collection(store, info, batches, overwrite, sparse)
        index = index.with_rows(None if self.holds else view.collection.row_of)
        return index, {"collection": store.collection, **info, "documents": len(index)}

    def describe(self, cfg: Config) -> list[dict[str, Any]]:
        """Every collection of the Milvus store (uri), as its recorded info says."""
        from .df import SUFFIX
        from .store import list_collections

        mcfg = cfg.index_backend_configs.milvus
        out = []
        names = list_collections(mcfg.uri, mcfg.token or os.environ.get("MILVUS_TOKEN"))
        for name in names:
            if name.endswith(SUFFIX) and name[: -len(SUFFIX)] in names:  # a full_text collection's df (df.py)
                continue
            store = shared_store(mcfg, name)
            info = store.info() or {}
            out.append({"name": name, "index_backend": "milvus", "documents": store.count(),
                        "model": info.get("model"), "dimension": info.get("dimension"), "is_demo": info.get("is_demo"),
                        **({"full_text": True} if "full_text" in info else {})})
        return out

    # ---- demo mode: the documents live in Milvus (each read as `rule` sees them: seen_by) -------------

    def hits(self, index: Any, vectors: np.ndarray, k: int, f: Filter | None,
             ann: dict[str, int] | None = None) -> list[list[Hit]]:
        return _held(index).search_hits(vectors, k, f, ann, self.rule)

    def text_hits(self, index: Any, queries: Sequence[str], k: int, f: Filter | None) -> list[list[Hit]]:
        if self.full_text is None:
            raise NotYetSupportedError("demo mode keeps the documents only in Milvus, without BM25: set "
                                       "index_backend_configs.milvus.full_text: true (Milvus 2.5 or later) for BM25 "
                                       "and hybrid search there, or is_demo: false to keep a corpus here")
        return _held(index).text_hits(queries, k, f, self.rule)

    def text_bounds(self, index: Any, queries: Sequence[str]) -> list[float] | None:
        """Adaptive fusion's BM25 bound per query, over the documents `rule` sees (None: not known here)."""
        if self.full_text is None or not isinstance(index, MilvusIndex):
            return None
        return index.bm25_bounds(queries, self.rule)

    def sparse_hits(self, index: Any, encoder: SparseEncoding, queries: Sequence[str], k: int,
                    f: Filter | None) -> list[list[Hit]]:
        """Learned-sparse hits ranked by Milvus, where the collection was made with `encoder`'s model."""
        held = _held(index)
        milvus_sparse.check(held.manifest, encoder, held.store.collection)
        return held.sparse_hits(encoder.queries(list(queries)), k, f, self.rule)

    def text_index(self, index: Any) -> int | None:
        return None if self.full_text is None else (len(index) if index is not None else 0)

    def get(self, index: Any, ids: Sequence[str]) -> list[Document]:
        return index.get(ids, self.rule) if isinstance(index, MilvusIndex) else []

    def count(self, index: Any) -> int:
        return index.count(self.rule) if isinstance(index, MilvusIndex) else 0

    def upsert(self, view: View, index: Any, docs: Sequence[Document], vectors: np.ndarray) -> tuple[MilvusIndex, int]:
        if not isinstance(index, MilvusIndex):
            store = self._store(view.config)
            if view.sparse is not None:
                milvus_sparse.probe(store)
            index = build_collection(store, {**self.manifest(view), "log_generation": 0}, [], overwrite=False)
            replaced = 0
        else:
            replaced = len(index.store.get([d.id for d in docs]))
        sparse = None
        if index.manifest.get(milvus_sparse.RECORD) is not None:  # made with a sparse model: its vectors, same model
            milvus_sparse.check(index.manifest, view.sparse, index.store.collection)
            sparse = milvus_sparse.encoded(view.sparse, [d.text for d in docs]) if view.sparse is not None else None
        index.write(docs, vectors, sparse)
        return index, replaced

    def delete(self, index: Any, ids: Sequence[str], f: Filter | None) -> tuple[int, list[str]]:
        """Only what `rule` sees: an id it cannot see is not found, a filter deletes only the documents it sees."""
        held, rule = _held(index), self.rule
        store = held.store
        found = {d.id for d in held.get(ids, rule)} if ids else set()
        deleted = store.delete(ids=sorted(found)) if found else 0
        if f is not None and rule is not None:  # the ids the expression finds, checked with Rule.sees (filters.visible)
            seen = held.matching(f, rule)
            deleted += store.delete(ids=seen) if seen else 0
        elif f is not None:
            deleted += store.delete(expr=where(f, None, store.fields.id, store.fields.metadata))
        return deleted, [i for i in ids if i not in found]


def _held(index: Any) -> MilvusIndex:
    if not isinstance(index, MilvusIndex):
        raise IndexMissingError("the Milvus collection does not exist yet; call retriever_index or retriever_add")
    return index


def _row_batches(view: View, vectors: np.ndarray) -> Vectors:
    rows, chunk = view.collection, view.config.index_backend_configs.milvus.index_chunk_size
    for start in range(0, rows.n_base, chunk):
        live = [r for r in range(start, min(start + chunk, rows.n_base)) if rows.live[r]]
        yield [rows.get(r) for r in live], np.asarray(vectors[live], dtype=np.float32)
    added, added_vectors = rows.live_added()
    if added and added_vectors is not None:
        yield added, added_vectors


def _corpus_batches(view: View, embedding_file: Path) -> Vectors:
    """corpus_path's documents with their vectors: from the embedding file where it exists and
    matches this corpus and model (retriever_embed made it), else embedded as they stream in."""
    cfg = view.config
    if cfg.corpus_path is None:
        raise IndexMissingError("retriever_index in demo mode embeds corpus_path into Milvus; set corpus_path, "
                                "or add documents with retriever_add")
    docs, chunk = CorpusFile.open(cfg.corpus_path, cfg.duplicate_ids, cfg.is_multimodal), cfg.index_backend_configs.milvus.index_chunk_size
    stored = None
    if embedding_file.is_file():
        try:
            stored = open_embeddings(embedding_file, dense_manifest(docs, view.embedder))
            log.info("Milvus: the corpus's vectors come from %s", embedding_file)
        except IndexMismatchError as e:
            log.info("Milvus: embedding the corpus (%s)", e)
    for start in range(0, len(docs), chunk):
        rows = range(start, min(start + chunk, len(docs)))
        batch = [docs.get(r) for r in rows]
        if stored is not None:
            yield batch, np.asarray(stored[start:rows.stop], dtype=np.float32)
        else:
            yield batch, view.embedder.encode_passages([d.text for d in batch])
