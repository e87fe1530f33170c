"""Retriever: init / embed / index / search / bm25. The engine knows nothing of MCP.

Every method takes the UltraRAG tool arguments; an argument left as None takes the value from
parameter.yaml, for that call only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config, load_config
from .corpus import DocStore
from .embedders import Embedder, build_embedder
from .embedfile import open_embeddings, write_embeddings
from .errors import (
    AlreadyExistsError,
    IndexMismatchError,
    IndexMissingError,
    InvalidInputError,
    NotInitializedError,
    NotYetSupportedError,
)
from .indexes import VectorIndex, index_backend
from .persist import check_manifest, read_manifest
from .sparse import BM25Index
from .types import Hit

log = logging.getLogger(__name__)


def as_queries(query_list: str | Sequence[str], name: str = "query_list") -> list[str]:
    """A single string or a list of strings -> a non-empty list of strings."""
    if isinstance(query_list, str):
        return [query_list]
    if not isinstance(query_list, Sequence) or not query_list:
        raise InvalidInputError(f"{name} must be a string or a non-empty list of strings")
    bad = [i for i, q in enumerate(query_list) if not isinstance(q, str)]
    if bad:
        raise InvalidInputError(f"{name}[{bad[0]}] is {type(query_list[bad[0]]).__name__}, expected a string")
    return list(query_list)


def check_top_k(top_k: int) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InvalidInputError(f"top_k must be an integer >= 1, got {top_k!r}")
    return top_k


class Retriever:
    def __init__(self, config: Config | None = None, base_dir: Path | None = None) -> None:
        self.config = config or Config()
        self.base_dir = base_dir
        self.docs: DocStore | None = None
        self.embedder: Embedder | None = None
        self.dense: VectorIndex | None = None
        self.bm25: BM25Index | None = None
        self.warnings: list[str] = []
        self._lock = threading.RLock()

    @classmethod
    def from_yaml(cls, path: str | Path = "parameter.yaml") -> Retriever:
        return cls(load_config(path), Path(path).resolve().parent)

    # ---- lifecycle -------------------------------------------------------------------------

    def init(self, **overrides: Any) -> dict[str, Any]:
        """Load the corpus, the embedder and any saved indexes; refuse indexes that do not match."""
        with self._lock:
            cfg = self.config.with_overrides(overrides, self.base_dir)
            if cfg.is_demo:
                raise NotYetSupportedError("is_demo is accepted but not active in this release; set is_demo: false")
            if cfg.is_multimodal:
                raise NotYetSupportedError("is_multimodal is accepted but not active in this release")
            index_backend(cfg)  # fail early on an inactive index backend
            docs = DocStore.open(cfg.corpus_path)
            warnings: list[str] = []
            embedder = None if cfg.backend == "bm25" else build_embedder(cfg)
            if embedder is not None:
                warnings += embedder.warnings
            dense = self._load_dense(cfg, docs, embedder, warnings)
            bm25 = self._load_bm25(cfg, docs, warnings)
            if self.docs is not None:
                self.docs.close()
            self.config, self.docs, self.embedder, self.dense, self.bm25 = cfg, docs, embedder, dense, bm25
            self.warnings = warnings
            return self.status()

    def _dense_expected(self, docs: DocStore, embedder: Embedder) -> dict[str, Any]:
        return {
            "model": embedder.model_id, "dimension": embedder.dimension,
            "count": len(docs), "corpus_fingerprint": docs.fingerprint,
        }

    def _refuse_or_skip(self, cfg: Config, err: IndexMismatchError, warnings: list[str]) -> None:
        if not cfg.overwrite:
            raise err
        warnings.append(f"not loaded (overwrite is true, rebuild it): {err}")
        log.warning(warnings[-1])

    def _load_dense(self, cfg: Config, docs: DocStore, embedder: Embedder | None, warnings: list[str]) -> VectorIndex | None:
        if embedder is None:
            return None
        fcfg = cfg.index_backend_configs.faiss
        try:
            index = index_backend(cfg).load(fcfg.index_path, use_gpu=fcfg.index_use_gpu)
            if index is not None:
                check_manifest(index.manifest, self._dense_expected(docs, embedder), fcfg.index_path,
                               "call retriever_embed and retriever_index with overwrite=true")
                warnings += index.warnings
            return index
        except IndexMismatchError as e:
            self._refuse_or_skip(cfg, e, warnings)
            return None

    def _load_bm25(self, cfg: Config, docs: DocStore, warnings: list[str]) -> BM25Index | None:
        bcfg = cfg.backend_configs.bm25
        try:
            index = BM25Index.load(bcfg.save_path, bcfg.lang)
            if index is not None:
                check_manifest(index.manifest, {"count": len(docs), "corpus_fingerprint": docs.fingerprint},
                               bcfg.save_path, "call bm25_index(overwrite=true)")
            return index
        except IndexMismatchError as e:
            self._refuse_or_skip(cfg, e, warnings)
            return None

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": "ready" if self.docs else "not initialised"}
        if self.docs is not None:
            out["corpus"] = self.docs.info()
        if self.embedder is not None:
            out["model"] = self.embedder.model_id
            out["dimension"] = self.embedder.dimension
        out["dense_index"] = len(self.dense) if self.dense is not None else None
        out["bm25_index"] = len(self.bm25) if self.bm25 is not None else None
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    def _require(self, tool: str) -> tuple[Config, DocStore]:
        if self.docs is None:
            raise NotInitializedError(tool)
        return self.config, self.docs

    def _require_embedder(self, tool: str) -> Embedder:
        self._require(tool)
        if self.embedder is None:
            raise NotYetSupportedError(f"{tool}: backend is 'bm25', which has no embedder; use bm25_search")
        return self.embedder

    # ---- dense -----------------------------------------------------------------------------

    def embed(self, embedding_path: str | None = None, overwrite: bool | None = None,
              progress: bool = True) -> dict[str, Any]:
        """Embed the corpus a chunk at a time into an .npy file (refuses to overwrite by default)."""
        with self._lock:
            cfg, docs = self._require("retriever_embed")
            embedder = self._require_embedder("retriever_embed")
            path = self._path(embedding_path, cfg.embedding_path)
            overwrite = cfg.overwrite if overwrite is None else overwrite
            chunk = cfg.backend_configs.sentence_transformers.sentence_transformers_encode.encode_chunk_size
            manifest = self._dense_expected(docs, embedder)
            write_embeddings(path, docs, embedder, chunk, overwrite, manifest, progress)
            return {"embedding_path": str(path), **manifest}

    def embeddings_valid(self, embedding_path: str | None = None) -> bool:
        """Whether the embedding file exists and matches this corpus and model."""
        cfg, docs = self._require("retriever_index")
        try:
            open_embeddings(self._path(embedding_path, cfg.embedding_path),
                            self._dense_expected(docs, self._require_embedder("retriever_index")))
        except IndexMismatchError:
            return False
        return True

    def index(self, embedding_path: str | None = None, overwrite: bool | None = None,
              index_path: str | None = None) -> dict[str, Any]:
        """Build the vector index from the embedding file and publish it atomically."""
        with self._lock:
            cfg, docs = self._require("retriever_index")
            embedder = self._require_embedder("retriever_index")
            fcfg = cfg.index_backend_configs.faiss
            folder = self._path(index_path, fcfg.index_path)
            overwrite = cfg.overwrite if overwrite is None else overwrite
            if read_manifest(folder) is not None and not overwrite:
                raise AlreadyExistsError(f"an index exists at {folder}; pass overwrite=true to rebuild it")
            expected = self._dense_expected(docs, embedder)
            vectors = open_embeddings(self._path(embedding_path, cfg.embedding_path), expected)
            backend = index_backend(cfg)
            index = backend.build(vectors, fcfg.index_chunk_size, use_gpu=fcfg.index_use_gpu)
            index.save(folder, expected)
            self.dense = index
            out = {"index_path": str(folder), **expected}
            if index.warnings:
                out["warnings"] = index.warnings
            return out

    def search(self, query_list: str | Sequence[str], top_k: int | None = None,
               query_instruction: str | None = None) -> list[list[Hit]]:
        cfg, docs = self._require("retriever_search")
        embedder = self._require_embedder("retriever_search")
        queries = as_queries(query_list)
        k = check_top_k(cfg.top_k if top_k is None else top_k)
        dense = self.dense
        if dense is None:
            raise IndexMissingError("no dense index is loaded; call retriever_embed then retriever_index")
        instruction = cfg.query_instruction if query_instruction is None else query_instruction
        vectors = embedder.encode_queries(queries, instruction)
        rows, scores = dense.search(vectors, k)
        return [self._hits(docs, r, s) for r, s in zip(rows, scores)]

    def batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                     query_instruction: str | None = None) -> list[list[list[Hit]]]:
        """One search over every query of every group, split back into the groups."""
        groups = [as_queries(g, "batch_query_list item") for g in as_batch(batch_query_list)]
        flat = self.search([q for g in groups for q in g], top_k, query_instruction)
        return _split(flat, groups)

    # ---- BM25 ------------------------------------------------------------------------------

    def bm25_index(self, overwrite: bool | None = None, progress: bool = True) -> dict[str, Any]:
        with self._lock:
            cfg, docs = self._require("bm25_index")
            bcfg = cfg.backend_configs.bm25
            overwrite = cfg.overwrite if overwrite is None else overwrite
            if read_manifest(bcfg.save_path) is not None and not overwrite:
                raise AlreadyExistsError(f"a BM25 index exists at {bcfg.save_path}; pass overwrite=true to rebuild it")
            index = BM25Index.build(docs.texts(), bcfg, show_progress=progress)
            manifest = {"count": len(docs), "corpus_fingerprint": docs.fingerprint}
            index.save(bcfg.save_path, manifest)
            self.bm25 = index
            return {"save_path": str(bcfg.save_path), **manifest, "lang": bcfg.lang}

    def bm25_search(self, query_list: str | Sequence[str], top_k: int | None = None) -> list[list[Hit]]:
        cfg, docs = self._require("bm25_search")
        queries = as_queries(query_list)
        k = check_top_k(cfg.top_k if top_k is None else top_k)
        bm25 = self.bm25
        if bm25 is None:
            raise IndexMissingError("no BM25 index is loaded; call bm25_index")
        rows, scores = bm25.search(queries, k)
        return [self._hits(docs, r, s) for r, s in zip(rows, scores)]

    # ---- helpers ---------------------------------------------------------------------------

    def _path(self, given: str | None, default: Path) -> Path:
        if not given:
            return default
        path = Path(given)
        return path if path.is_absolute() or self.base_dir is None else self.base_dir / path

    @staticmethod
    def _hits(docs: DocStore, rows: np.ndarray, scores: np.ndarray) -> list[Hit]:
        hits = []
        for row, score in zip(rows.tolist(), scores.tolist()):
            if row < 0:  # FAISS marks missing results with -1
                continue
            doc = docs.get(row)
            hits.append(Hit(row=row, id=doc.id, text=doc.text, score=score, metadata=doc.metadata))
        return hits


def as_batch(batch_query_list: Any) -> list[Any]:
    if isinstance(batch_query_list, str) or not isinstance(batch_query_list, Sequence) or not batch_query_list:
        raise InvalidInputError("batch_query_list must be a non-empty list of query lists")
    return list(batch_query_list)


def _split(flat: list[list[Hit]], groups: list[list[str]]) -> list[list[list[Hit]]]:
    out, start = [], 0
    for g in groups:
        out.append(flat[start : start + len(g)])
        start += len(g)
    return out
