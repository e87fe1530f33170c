"""Retriever: init / embed / index / search / bm25. The engine knows nothing of MCP.

Every method takes the UltraRAG tool arguments; an argument left as None takes the value from
parameter.yaml, for that call only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from . import compute
from .config import Config, HybridConfig, load_config
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
from .filters import parse as parse_filter
from .fusion import SCALERS
from .hybrid import Fused, fused_rows, max_fused_score
from .indexes import VectorIndex, index_backend
from .persist import check_manifest, read_manifest
from .results import as_queries, build_hits, check_top_k, pick, search_groups
from .sparse import BM25Index
from .types import Hit

log = logging.getLogger(__name__)
Allowed = np.ndarray | None  # boolean mask over rows: the candidates a filter keeps
RowRankings = tuple[Sequence[np.ndarray], Sequence[np.ndarray]]  # per query: rows best first, scores


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


def corpus_manifest(docs: DocStore) -> dict[str, Any]:
    """What every index built from `docs` records of them."""
    return {"count": len(docs), "corpus_fingerprint": docs.fingerprint}


def dense_manifest(docs: DocStore, embedder: Embedder) -> dict[str, Any]:
    """What a dense index or embedding file made from `docs` with `embedder` records."""
    return {"model": embedder.model_id, "dimension": embedder.dimension, **corpus_manifest(docs)}


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
                check_manifest(index.manifest, corpus_manifest(s.docs), bcfg.save_path,
                               "call bm25_index(overwrite=true)")
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
            write_embeddings(path, s.docs, embedder, chunk, pick(overwrite, cfg.overwrite), manifest, progress)
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
            if read_manifest(folder) is not None and not pick(overwrite, s.config.overwrite):
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

    def _dense_rows(self, s: Session, embedder: Embedder, queries: list[str], k: int,
                    query_instruction: str | None, allowed: Allowed) -> RowRankings:
        if s.dense is None:
            raise IndexMissingError("no dense index is loaded; call retriever_embed then retriever_index")
        vectors = embedder.encode_queries(queries, pick(query_instruction, s.config.query_instruction))
        return s.dense.search(vectors, k, allowed)

    def _dense_scaler(self, s: Session) -> Callable[[float], float]:
        normalized = s.config.backend_configs.sentence_transformers.sentence_transformers_encode.normalize_embeddings
        return SCALERS["cosine" if normalized else "dot_product"]

    def search(self, query_list: str | Sequence[str], top_k: int | None = None,
               query_instruction: str | None = None, score_threshold: float | None = None,
               scale_score: bool = False, filters: dict[str, Any] | None = None) -> list[list[Hit]]:
        """Dense search. `scale_score` maps scores to 0..1 (cosine: (s + 1) / 2; inner product:
        expit(s / 100)); `score_threshold` drops hits below it (after scaling, if asked);
        `filters` (see filters.py) limits the candidates before the top k is taken."""
        s, embedder = self._need_embedder("retriever_search")
        queries = as_queries(query_list)
        rows, scores = self._dense_rows(s, embedder, queries, check_top_k(pick(top_k, s.config.top_k)),
                                        query_instruction, _allowed(s, filters))
        return build_hits(s.docs, rows, scores, self._dense_scaler(s) if scale_score else None, score_threshold)

    def batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                     query_instruction: str | None = None, score_threshold: float | None = None,
                     scale_score: bool = False, filters: dict[str, Any] | None = None) -> list[list[list[Hit]]]:
        """One search over every query of every group, split back into the groups."""
        return search_groups(
            lambda qs: self.search(qs, top_k, query_instruction, score_threshold, scale_score, filters),
            batch_query_list)

    # ---- BM25 ------------------------------------------------------------------------------

    def bm25_index(self, overwrite: bool | None = None, progress: bool = True) -> dict[str, Any]:
        with self._write_lock:
            s = self._need("bm25_index")
            bcfg = s.config.backend_configs.bm25
            if read_manifest(bcfg.save_path) is not None and not pick(overwrite, s.config.overwrite):
                raise AlreadyExistsError(f"a BM25 index exists at {bcfg.save_path}; pass overwrite=true to rebuild it")
            index = BM25Index.build(s.docs.texts(), bcfg, show_progress=progress)
            manifest = corpus_manifest(s.docs)
            index.save(bcfg.save_path, manifest)
            self._publish(s, bm25=index)
            return {"save_path": str(bcfg.save_path), **manifest, "lang": bcfg.lang}

    def _bm25_rows(self, s: Session, queries: list[str], k: int, allowed: Allowed) -> RowRankings:
        if s.bm25 is None:
            raise IndexMissingError("no BM25 index is loaded; call bm25_index")
        return s.bm25.search(queries, k, allowed)

    def bm25_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                    score_threshold: float | None = None, scale_score: bool = False,
                    filters: dict[str, Any] | None = None) -> list[list[Hit]]:
        """BM25 search. `scale_score` maps scores to 0..1 with expit(s / 8)."""
        s = self._need("bm25_search")
        rows, scores = self._bm25_rows(s, as_queries(query_list), check_top_k(pick(top_k, s.config.top_k)),
                                       _allowed(s, filters))
        return build_hits(s.docs, rows, scores, SCALERS["bm25"] if scale_score else None, score_threshold)

    # ---- hybrid ----------------------------------------------------------------------------

    def _hybrid_rows(self, s: Session, embedder: Embedder, queries: list[str], h: HybridConfig, k: int,
                     query_instruction: str | None, allowed: Allowed) -> list[Fused]:
        """Per query, the fused top `k` of dense and BM25, each searched `h.candidate_depth` deep,
        dense on the compute thread while BM25 runs on this one."""
        if s.dense is None or s.bm25 is None:
            raise IndexMissingError("hybrid search needs both indexes: call retriever_embed + retriever_index "
                                    "and bm25_index")
        dense = compute.submit(self._dense_rows, s, embedder, queries, h.candidate_depth, query_instruction, allowed)
        b_rows, b_scores = self._bm25_rows(s, queries, h.candidate_depth, allowed)
        d_rows, d_scores = dense.result()
        weights = [h.vector_weight, 1.0 - h.vector_weight]
        return [fused_rows(s.docs, {"dense": (d_rows[i], d_scores[i]), "bm25": (b_rows[i], b_scores[i])},
                           h.fusion, weights, h.rrf_k, k) for i in range(len(queries))]

    def hybrid_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                      query_instruction: str | None = None, fusion: str | None = None,
                      vector_weight: float | None = None, rrf_k: float | None = None,
                      candidate_depth: int | None = None, score_threshold: float | None = None,
                      scale_score: bool = False, filters: dict[str, Any] | None = None) -> list[list[Hit]]:
        """Dense and BM25 at once, each `candidate_depth` deep, fused per query (see fusion.py).
        Each hit carries its rank and score in each retriever. `scale_score` divides by the best
        possible fused score."""
        s, embedder = self._need_embedder("retriever_hybrid_search")
        queries = as_queries(query_list)
        k = check_top_k(pick(top_k, s.config.top_k))
        h = hybrid_options(s.config.hybrid, fusion=fusion, vector_weight=vector_weight, rrf_k=rrf_k,
                           candidate_depth=candidate_depth)
        fused = self._hybrid_rows(s, embedder, queries, h, k, query_instruction, _allowed(s, filters))
        best = max_fused_score(h.fusion, [h.vector_weight, 1.0 - h.vector_weight], h.rrf_k)
        return _fused_hits(s.docs, fused, best if scale_score else None, score_threshold)

    def hybrid_batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                            **options: Any) -> list[list[list[Hit]]]:
        return search_groups(lambda qs: self.hybrid_search(qs, top_k, **options), batch_query_list)

    def multi_query_search(self, question_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                           mode: str = "hybrid", query_instruction: str | None = None,
                           candidate_depth: int | None = None, score_threshold: float | None = None,
                           scale_score: bool = False, filters: dict[str, Any] | None = None) -> list[list[Hit]]:
        """Several phrasings per question, each searched `candidate_depth` deep with `mode`
        (dense, bm25 or hybrid), fused with RRF (k from the YAML) into one ranking per question.
        The phrasings' rankings stay rows and scores: no document is read until the fused top k."""
        tool = "retriever_multi_query_search"
        s = self._need(tool)
        k = check_top_k(pick(top_k, s.config.top_k))
        h = hybrid_options(s.config.hybrid, candidate_depth=candidate_depth)
        if mode not in ("dense", "bm25", "hybrid"):
            raise InvalidInputError(f"mode must be one of ['bm25', 'dense', 'hybrid'], got {mode!r}")
        allowed = _allowed(s, filters)

        def rankings(queries: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
            if mode == "bm25":
                return list(zip(*self._bm25_rows(s, queries, h.candidate_depth, allowed)))
            _, embedder = self._need_embedder(tool)
            if mode == "dense":
                return list(zip(*self._dense_rows(s, embedder, queries, h.candidate_depth, query_instruction,
                                                  allowed)))
            return [(rows, scores) for rows, scores, _ in
                    self._hybrid_rows(s, embedder, queries, h, h.candidate_depth, query_instruction, allowed)]

        fused = [fused_rows(s.docs, {str(i): ranking for i, ranking in enumerate(group)}, "rrf", None, h.rrf_k, k)
                 for group in search_groups(rankings, question_list, "question_list")]
        best = max_fused_score("rrf", [1.0], h.rrf_k)  # equal weights summing to 1, whatever the count
        return _fused_hits(s.docs, fused, best if scale_score else None, score_threshold)

    # ---- helpers ---------------------------------------------------------------------------

    def _path(self, given: str | None, default: Path) -> Path:
        if not given:
            return default
        path = Path(given)
        return path if path.is_absolute() or self.base_dir is None else self.base_dir / path


def _allowed(s: Session, filters: dict[str, Any] | None) -> Allowed:
    """The rows a filter keeps (None: every row)."""
    return None if filters is None else s.docs.mask(parse_filter(filters))


def hybrid_options(base: HybridConfig, **overrides: Any) -> HybridConfig:
    """The YAML's hybrid section with per-call values, checked like the YAML."""
    try:
        return HybridConfig.model_validate({**base.model_dump(), **{k: v for k, v in overrides.items() if v is not None}})
    except ValidationError as e:
        raise InvalidInputError("; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())) from None


def _fused_hits(docs: DocStore, fused: list[Fused], best: float | None, threshold: float | None) -> list[list[Hit]]:
    """Hits of fused rankings; with `best`, scores are divided by it (0..1)."""
    return build_hits(docs, [f[0] for f in fused], [f[1] for f in fused],
                      (lambda x: x / best) if best else None, threshold, [f[2] for f in fused])
