"""Retriever: init / embed / index / search / bm25. The engine knows nothing of MCP.

Every method takes the UltraRAG tool arguments; an argument left as None takes the value from
parameter.yaml, for that call only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
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
from .types import Document, Hit

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


@dataclass(frozen=True)
class Session:
    """What `retriever_init` loaded. Replaced whole, never mutated, so a search that took a
    snapshot sees one consistent corpus, model and index while a rebuild runs beside it."""

    config: Config
    docs: DocStore
    embedder: Embedder | None
    dense: VectorIndex | None
    bm25: BM25Index | None
    warnings: tuple[str, ...] = ()


def dense_manifest(docs: DocStore, embedder: Embedder) -> dict[str, Any]:
    """What a dense index or embedding file made from `docs` with `embedder` records."""
    return {"model": embedder.model_id, "dimension": embedder.dimension,
            "count": len(docs), "corpus_fingerprint": docs.fingerprint}


class Retriever:
    def __init__(self, config: Config | None = None, base_dir: Path | None = None) -> None:
        self.base_config = config or Config()
        self.base_dir = base_dir
        self.session: Session | None = None
        self._write_lock = threading.Lock()  # one build at a time; searches never wait on it

    @classmethod
    def from_yaml(cls, path: str | Path = "parameter.yaml") -> Retriever:
        return cls(load_config(path), Path(path).resolve().parent)

    # Read-only views of the current session, for callers and tests.
    config = property(lambda self: self.session.config if self.session else self.base_config)
    docs = property(lambda self: self.session.docs if self.session else None)
    embedder = property(lambda self: self.session.embedder if self.session else None)
    dense = property(lambda self: self.session.dense if self.session else None)
    bm25 = property(lambda self: self.session.bm25 if self.session else None)

    # ---- lifecycle -------------------------------------------------------------------------

    def init(self, **overrides: Any) -> dict[str, Any]:
        """Load the corpus, the embedder and any saved indexes; refuse indexes that do not match."""
        with self._write_lock:
            cfg = self.base_config.with_overrides(overrides, self.base_dir)
            if cfg.is_demo:
                raise NotYetSupportedError("is_demo is accepted but not active in this release; set is_demo: false")
            if cfg.is_multimodal:
                raise NotYetSupportedError("is_multimodal is accepted but not active in this release")
            index_backend(cfg)  # fail early on an inactive index backend
            docs = DocStore.open(cfg.corpus_path)
            embedder = None if cfg.backend == "bm25" else build_embedder(cfg)
            warnings: list[str] = list(embedder.warnings) if embedder else []
            draft = Session(cfg, docs, embedder, None, None)
            dense = self._load_dense(draft, warnings)
            bm25 = self._load_bm25(draft, warnings)
            self.session = Session(cfg, docs, embedder, dense, bm25, tuple(warnings))
            return self.status()

    @staticmethod
    def _refuse_or_skip(cfg: Config, err: IndexMismatchError, warnings: list[str]) -> None:
        if not cfg.overwrite:
            raise err
        warnings.append(f"not loaded (overwrite is true, rebuild it): {err}")
        log.warning(warnings[-1])

    def _load_dense(self, s: Session, warnings: list[str]) -> VectorIndex | None:
        if s.embedder is None:
            return None
        expected = dense_manifest(s.docs, s.embedder)
        fcfg = s.config.index_backend_configs.faiss
        try:
            index = index_backend(s.config).load(fcfg.index_path, use_gpu=fcfg.index_use_gpu)
            if index is not None:
                check_manifest(index.manifest, expected, fcfg.index_path,
                               "call retriever_embed and retriever_index with overwrite=true")
                warnings += index.warnings
            return index
        except IndexMismatchError as e:
            self._refuse_or_skip(s.config, e, warnings)
            return None

    def _load_bm25(self, s: Session, warnings: list[str]) -> BM25Index | None:
        bcfg = s.config.backend_configs.bm25
        try:
            index = BM25Index.load(bcfg.save_path, bcfg.lang)
            if index is not None:
                check_manifest(index.manifest, {"count": len(s.docs), "corpus_fingerprint": s.docs.fingerprint},
                               bcfg.save_path, "call bm25_index(overwrite=true)")
            return index
        except IndexMismatchError as e:
            self._refuse_or_skip(s.config, e, warnings)
            return None

    def status(self) -> dict[str, Any]:
        s = self.session
        if s is None:
            return {"status": "not initialised"}
        out: dict[str, Any] = {"status": "ready", "corpus": s.docs.info()}
        if s.embedder is not None:
            out["model"] = s.embedder.model_id
            out["dimension"] = s.embedder.dimension
        out["dense_index"] = len(s.dense) if s.dense is not None else None
        out["bm25_index"] = len(s.bm25) if s.bm25 is not None else None
        if s.warnings:
            out["warnings"] = list(s.warnings)
        return out

    def _need(self, tool: str) -> Session:
        s = self.session
        if s is None:
            raise NotInitializedError(tool)
        return s

    def _need_embedder(self, tool: str) -> tuple[Session, Embedder]:
        s = self._need(tool)
        if s.embedder is None:
            raise NotYetSupportedError(f"{tool}: backend is 'bm25', which has no embedder; use bm25_search")
        return s, s.embedder

    def _publish(self, s: Session, **changes: Any) -> None:
        """Swap in a session with new indexes (a single attribute store: atomic for readers).
        Called under the write lock, so `s` is still the current session."""
        self.session = replace(s, **changes)

    # ---- dense -----------------------------------------------------------------------------

    def embed(self, embedding_path: str | None = None, overwrite: bool | None = None,
              progress: bool = True) -> dict[str, Any]:
        """Embed the corpus a chunk at a time into an .npy file (refuses to overwrite by default)."""
        with self._write_lock:
            s, embedder = self._need_embedder("retriever_embed")
            cfg = s.config
            path = self._path(embedding_path, cfg.embedding_path)
            chunk = cfg.backend_configs.sentence_transformers.sentence_transformers_encode.encode_chunk_size
            manifest = dense_manifest(s.docs, embedder)
            write_embeddings(path, s.docs, embedder, chunk, _pick(overwrite, cfg.overwrite), manifest, progress)
            return {"embedding_path": str(path), **manifest}

    def embeddings_valid(self, embedding_path: str | None = None) -> bool:
        """Whether the embedding file exists and matches this corpus and model."""
        s, embedder = self._need_embedder("retriever_index")
        try:
            open_embeddings(self._path(embedding_path, s.config.embedding_path), dense_manifest(s.docs, embedder))
        except IndexMismatchError:
            return False
        return True

    def index(self, embedding_path: str | None = None, overwrite: bool | None = None,
              index_path: str | None = None) -> dict[str, Any]:
        """Build the vector index from the embedding file and publish it atomically."""
        with self._write_lock:
            s, embedder = self._need_embedder("retriever_index")
            fcfg = s.config.index_backend_configs.faiss
            folder = self._path(index_path, fcfg.index_path)
            if read_manifest(folder) is not None and not _pick(overwrite, s.config.overwrite):
                raise AlreadyExistsError(f"an index exists at {folder}; pass overwrite=true to rebuild it")
            expected = dense_manifest(s.docs, embedder)
            vectors = open_embeddings(self._path(embedding_path, s.config.embedding_path), expected)
            index = index_backend(s.config).build(vectors, fcfg.index_chunk_size, use_gpu=fcfg.index_use_gpu)
            index.save(folder, expected)
            self._publish(s, dense=index)
            out = {"index_path": str(folder), **expected}
            if index.warnings:
                out["warnings"] = index.warnings
            return out

    def search(self, query_list: str | Sequence[str], top_k: int | None = None,
               query_instruction: str | None = None) -> list[list[Hit]]:
        s, embedder = self._need_embedder("retriever_search")
        queries = as_queries(query_list)
        k = check_top_k(_pick(top_k, s.config.top_k))
        if s.dense is None:
            raise IndexMissingError("no dense index is loaded; call retriever_embed then retriever_index")
        vectors = embedder.encode_queries(queries, _pick(query_instruction, s.config.query_instruction))
        rows, scores = s.dense.search(vectors, k)
        return _hits(s.docs, rows, scores)

    def batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                     query_instruction: str | None = None) -> list[list[list[Hit]]]:
        """One search over every query of every group, split back into the groups."""
        groups = [as_queries(g, "batch_query_list item") for g in as_batch(batch_query_list)]
        flat = self.search([q for g in groups for q in g], top_k, query_instruction)
        return _split(flat, groups)

    # ---- BM25 ------------------------------------------------------------------------------

    def bm25_index(self, overwrite: bool | None = None, progress: bool = True) -> dict[str, Any]:
        with self._write_lock:
            s = self._need("bm25_index")
            bcfg = s.config.backend_configs.bm25
            if read_manifest(bcfg.save_path) is not None and not _pick(overwrite, s.config.overwrite):
                raise AlreadyExistsError(f"a BM25 index exists at {bcfg.save_path}; pass overwrite=true to rebuild it")
            index = BM25Index.build(s.docs.texts(), bcfg, show_progress=progress)
            manifest = {"count": len(s.docs), "corpus_fingerprint": s.docs.fingerprint}
            index.save(bcfg.save_path, manifest)
            self._publish(s, bm25=index)
            return {"save_path": str(bcfg.save_path), **manifest, "lang": bcfg.lang}

    def bm25_search(self, query_list: str | Sequence[str], top_k: int | None = None) -> list[list[Hit]]:
        s = self._need("bm25_search")
        queries = as_queries(query_list)
        k = check_top_k(_pick(top_k, s.config.top_k))
        if s.bm25 is None:
            raise IndexMissingError("no BM25 index is loaded; call bm25_index")
        rows, scores = s.bm25.search(queries, k)
        return _hits(s.docs, rows, scores)

    # ---- helpers ---------------------------------------------------------------------------

    def _path(self, given: str | None, default: Path) -> Path:
        if not given:
            return default
        path = Path(given)
        return path if path.is_absolute() or self.base_dir is None else self.base_dir / path



def _pick(given: Any, default: Any) -> Any:
    """A tool argument overrides the YAML value for this call only."""
    return default if given is None else given


def _hits(docs: DocStore, rows: Sequence[np.ndarray], scores: Sequence[np.ndarray]) -> list[list[Hit]]:
    """Per query, the hits of its rows; a document found by several queries is read once."""
    seen: dict[int, Document] = {}
    out = []
    for query_rows, query_scores in zip(rows, scores):
        hits = []
        for row, score in zip(query_rows.tolist(), query_scores.tolist()):
            if row < 0:  # FAISS marks missing results with -1
                continue
            doc = seen.get(row) or seen.setdefault(row, docs.get(row))
            hits.append(Hit(row=row, id=doc.id, text=doc.text, score=score, metadata=doc.metadata))
        out.append(hits)
    return out


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
