"""FAISS as a collection's index backend: the corpus index in its folder (FaissIndex) with the
vectors of the documents added since (the change log) appended at load."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import AlreadyExistsError, IndexMismatchError, IndexMissingError
from ...store.embedfile import open_embeddings
from ...store.manifests import dense_manifest, runtime_record
from ...store.persist import check_manifest, read_manifest
from ..base import Change, VectorIndex, View, ann_settings
from .index import FaissIndex

if TYPE_CHECKING:
    from ...config import Config


class FaissBackend:
    """Vectors only: the documents live in the local corpus and change log."""

    def load(self, view: View, warnings: list[str]) -> VectorIndex | None:
        """The corpus index from disk (an empty one when there is no corpus) with the change
        log's vectors appended."""
        folder = view.config.paths().faiss
        fcfg = view.config.index_backend_configs.faiss
        index: FaissIndex | None = FaissIndex.load(folder, use_gpu=fcfg.index_use_gpu, tuning=ann_settings(fcfg))
        if index is not None:
            check_manifest(index.manifest, dense_manifest(view.collection.base, view.embedder), folder,
                           "call retriever_embed and retriever_index with overwrite=true")
            warnings += index.warnings
        elif view.collection.base is None:
            index = FaissIndex.empty(view.embedder.dimension)
        return with_log(view, index) if index is not None else None

    def build(self, view: View, embedding_file: Path | None, index_path: Path,
              overwrite: bool) -> tuple[VectorIndex, dict[str, Any]]:
        fcfg = view.config.index_backend_configs.faiss
        if view.collection.base is None:
            raise IndexMissingError("retriever_index: this collection has no corpus file (corpus_path is null); its "
                                    "documents come from retriever_add, which embeds and indexes them as they arrive")
        if read_manifest(index_path) is not None and not overwrite:
            raise AlreadyExistsError(f"an index exists at {index_path}; pass overwrite=true to rebuild it")
        expected = dense_manifest(view.collection.base, view.embedder)
        vectors = open_embeddings(embedding_file or view.config.paths().embedding, expected)
        index = FaissIndex.build(vectors, fcfg.index_chunk_size, use_gpu=fcfg.index_use_gpu, factory=fcfg.index_factory,
                                 tuning=ann_settings(fcfg))
        index.save(index_path, expected | runtime_record(view.embedder))
        report: dict[str, Any] = {"index_path": str(index_path), **expected, **runtime_record(view.embedder)}
        if index.warnings:
            report["warnings"] = index.warnings
        return with_log(view, index), report

    def describe(self, cfg: Config) -> list[dict[str, Any]] | None:
        return None  # the collections are local folders (session.describe)


def with_log(view: View, index: VectorIndex) -> VectorIndex:
    """`index` (of the corpus rows) plus the vectors of the documents added since."""
    added = view.collection.changes
    if not added.docs:
        return index
    if added.vectors is None or added.model != view.embedder.model_id:
        raise IndexMismatchError(f"{view.config.paths().docs}: the added documents were embedded with "
                                 f"{added.model!r}, this session uses {view.embedder.model_id!r}; add them again "
                                 "with this model, or restore the model")
    return index.apply(Change(added.docs, added.vectors, [], view.collection.row_of, added.generation))
