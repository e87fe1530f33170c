"""Milvus as a collection's index backend (Milvus Lite in process, or a server). Normally it holds
the corpus rows' vectors and follows the change log like FAISS; in demo mode (`is_demo`) it holds
the documents themselves, there is no corpus file here, and writes and hits go straight to it."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..corpus import DocStore
from ..embedfile import open_embeddings
from ..errors import IndexMissingError
from ..filters import Filter
from ..manifests import dense_manifest
from ..persist import check_manifest
from ..types import Document, Hit
from .base import Change, Vectors, View
from .milvus_filters import to_milvus
from .milvus_index import MilvusIndex, build_collection, shared_store

if TYPE_CHECKING:
    from ..config import Config

log = logging.getLogger(__name__)


class MilvusBackend:
    def __init__(self, demo: bool) -> None:
        self.holds_documents = demo

    def manifest(self, view: View) -> dict[str, Any]:
        """What a Milvus collection records: in demo mode there is no corpus file to fingerprint."""
        e = view.embedder
        if self.holds_documents:
            return {"model": e.model_id, "dimension": e.dimension, "is_demo": True}
        return {**dense_manifest(view.collection.base, e), "is_demo": False}

    def load(self, view: View, warnings: list[str]) -> MilvusIndex | None:
        """The collection, checked against the view; one behind the change log (a crash between
        the log and the Milvus write) is brought up to date from the log."""
        store = shared_store(view.config.index_backend_configs.milvus, view.config.collection_name)
        if not store.exists():
            return None
        info = store.info() or {}
        check_manifest(info, self.manifest(view), f"Milvus collection {store.collection!r}",
                       "call retriever_index(overwrite=true) to rebuild it, or pick another collection_name")
        if self.holds_documents:
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
        store = shared_store(cfg.index_backend_configs.milvus, cfg.collection_name)
        info = {**self.manifest(view), "log_generation": view.collection.changes.generation}
        if self.holds_documents:
            batches = _corpus_batches(view)
        else:
            if view.collection.base is None:
                raise IndexMissingError("retriever_index: this collection has no corpus file (corpus_path is null); "
                                        "its documents come from retriever_add")
            vectors = open_embeddings(embedding_file or cfg.paths().embedding,
                                      dense_manifest(view.collection.base, view.embedder))
            batches = _row_batches(view, vectors)
        index = build_collection(store, info, batches, overwrite)
        index = index.with_rows(None if self.holds_documents else view.collection.row_of)
        return index, {"collection": store.collection, **info, "documents": len(index)}

    def describe(self, cfg: Config) -> list[dict[str, Any]]:
        """Every collection of the Milvus store (uri), as its recorded info says."""
        from .milvus import list_collections

        mcfg = cfg.index_backend_configs.milvus
        out = []
        for name in list_collections(mcfg.uri, mcfg.token or os.environ.get("MILVUS_TOKEN")):
            store = shared_store(mcfg, name)
            info = store.info() or {}
            out.append({"name": name, "index_backend": "milvus", "documents": store.count(),
                        "model": info.get("model"), "dimension": info.get("dimension"), "is_demo": info.get("is_demo")})
        return out

    # ---- demo mode: the documents live in Milvus ---------------------------------------------------

    def hits(self, view: View, index: Any, vectors: np.ndarray, k: int, f: Filter | None,
             ann: dict[str, int] | None = None) -> list[list[Hit]]:
        if not isinstance(index, MilvusIndex):
            raise IndexMissingError("the Milvus collection does not exist yet; call retriever_index or retriever_add")
        return index.search_hits(vectors, k, f, ann)

    def upsert(self, view: View, index: Any, docs: Sequence[Document], vectors: np.ndarray) -> tuple[MilvusIndex, int]:
        if not isinstance(index, MilvusIndex):
            store = shared_store(view.config.index_backend_configs.milvus, view.config.collection_name)
            index = build_collection(store, {**self.manifest(view), "log_generation": 0}, [], overwrite=False)
            replaced = 0
        else:
            replaced = len(index.store.get([d.id for d in docs]))
        index.write(docs, vectors)
        return index, replaced

    def delete(self, index: Any, ids: Sequence[str], f: Filter | None) -> tuple[int, list[str]]:
        if not isinstance(index, MilvusIndex):
            raise IndexMissingError("the Milvus collection does not exist yet; call retriever_index or retriever_add")
        store = index.store
        found = set(store.get(list(ids))) if ids else set()
        deleted = store.delete(ids=sorted(found)) if found else 0
        if f is not None:
            deleted += store.delete(expr=to_milvus(f, store.fields.id, store.fields.metadata))
        return deleted, [i for i in ids if i not in found]


def _row_batches(view: View, vectors: np.ndarray) -> Vectors:
    rows, chunk = view.collection, view.config.index_backend_configs.milvus.index_chunk_size
    for start in range(0, rows.n_base, chunk):
        live = [r for r in range(start, min(start + chunk, rows.n_base)) if rows.live[r]]
        yield [rows.get(r) for r in live], np.asarray(vectors[live], dtype=np.float32)
    added, added_vectors = rows.live_added()
    if added and added_vectors is not None:
        yield added, added_vectors


def _corpus_batches(view: View) -> Vectors:
    cfg = view.config
    if cfg.corpus_path is None:
        raise IndexMissingError("retriever_index in demo mode embeds corpus_path into Milvus; set corpus_path, "
                                "or add documents with retriever_add")
    docs, chunk = DocStore.open(cfg.corpus_path, cfg.duplicate_ids, cfg.is_multimodal), cfg.index_backend_configs.milvus.index_chunk_size
    for start in range(0, len(docs), chunk):
        batch = [docs.get(r) for r in range(start, min(start + chunk, len(docs)))]
        yield batch, view.embedder.encode_passages([d.text for d in batch])
