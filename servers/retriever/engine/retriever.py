"""Retriever: init / embed / index / search / bm25. The engine knows nothing of MCP.

Every method takes the UltraRAG tool arguments; an argument left as None takes the value from
parameter.yaml, for that call only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config, SourceConfig, load_config
from ..embedders import Embedder
from ..errors import (
    IndexMismatchError,
    IndexMissingError,
    InvalidInputError,
    LimitError,
    NotInitializedError,
    NotYetSupportedError,
)
from ..filters import parse as parse_filter
from ..indexes import View, check_backend
from ..search import DEFAULT_MODE, Ranker, kinds, learned_sparse, run, stored
from ..search.fanout import fanout
from ..search.hybrid import hybrid_options
from ..search.rankers import text_only
from ..search.results import as_queries, check_top_k, pick, search_groups
from ..search.spec import Spec
from ..security import visibility
from ..security.guard import check_client_config, check_path
from ..session import Session, disk_stamp, open_session, reopen
from ..store.catalog import recorded_corpus, remember_corpus
from ..store.collection import parse_documents
from ..store.corpus import CorpusFile
from ..store.embedfile import drop_finished_log, open_embeddings, write_embeddings
from ..store.locks import collection_lock
from ..store.manifests import dense_manifest, runtime_record
from ..store.persist import read_manifest
from ..types import Document, Hit
from .collections import Others, listed
from .documents import documents_of, held_sparse_index

log = logging.getLogger(__name__)
RowRankings = tuple[Sequence[np.ndarray], Sequence[np.ndarray]]  # per query: rows best first, scores


class Retriever:
    def __init__(self, config: Config | None = None, base_dir: Path | None = None, shared: bool = False) -> None:
        self.base_config = config or Config()
        self.base_dir = base_dir
        self.shared = shared  # served to many clients (HTTP): retriever_init may not change the settings
        self.ultrarag = False  # tool arguments read with UltraRAG's meanings (pipeline/ultrarag.py)
        self.session: Session | None = None
        self._write_lock = threading.RLock()  # one build at a time; a search takes it only to reload, never waits
        self._stamp: tuple[Any, ...] = ()  # the published files the session was read from (disk_stamp)
        self._others = Others()  # other collections opened by fan-out searches and collection_name

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
        """Load the corpus, the change log, the embedder and any saved indexes; refuse indexes
        that do not match."""
        with self._write_lock:
            cfg = self.base_config.with_overrides(overrides, self.base_dir)
            ignored = check_client_config(self.base_config, cfg, self.base_dir, http=self.shared)
            if overrides.get("corpus_path") is None:
                cfg = recorded_corpus(cfg)
            check_backend(cfg)
            self._stamp = disk_stamp(cfg)
            session = open_session(cfg)
            self.session = replace(session, warnings=(*ignored, *session.warnings)) if ignored else session
            self._others.clear()
            return self.status()

    def serve_read_only(self) -> None:
        """Served read-only (`serve --read-only`, `retriever deploy`): as security.read_only, no
        call writes a file, not even a search (the hybrid calibration stays in memory)."""
        with self._write_lock:
            self.base_config = _read_only(self.base_config)
            if self.session is not None:
                self.session = replace(self.session, config=_read_only(self.session.config))
            self._others.clear()

    def status(self) -> dict[str, Any]:
        s = self.session
        if s is None:
            return {"status": "not initialised"}
        out: dict[str, Any] = {"status": "ready", "collection": s.config.collection_name, "corpus": s.collection.info()}
        if s.config.is_multimodal:
            out["is_multimodal"] = True  # the documents are images; ret_psg holds their paths
        if s.embedder is not None:
            out["model"] = s.embedder.model_id
            out["dimension"] = s.embedder.dimension
            out["runtime"] = s.embedder.runtime
            out["runtime_reason"] = s.embedder.runtime_reason
        out["dense_index"] = len(s.dense) if s.dense is not None else None
        out["bm25_index"] = documents_of(s).text_documents(s)
        out["generation"] = s.collection.changes.generation  # of the change log this session serves
        if s.warnings:
            out["warnings"] = list(s.warnings)
        return out

    def need(self, tool: str) -> Session:
        """The current session, or an error that says to call retriever_init. What another process
        published since (a sync, `retriever index`, an add) is loaded first: a search answers from
        the newest published collection, never from one a writer has replaced."""
        s = self.session
        if s is None:
            raise NotInitializedError(tool)
        # a writer of this process holding the lock publishes its own sessions: serve the current one
        if self._stamp != disk_stamp(s.config) and self._write_lock.acquire(blocking=False):
            try:
                s = self.session
                if s is not None and self._stamp != (stamp := disk_stamp(s.config)):
                    log.info("%s: the collection was published anew by another writer; loading it", tool)
                    s = self.session = reopen(s)  # on failure the stamp stays: the next call tries again
                    self._stamp = stamp  # read before the load: a publish during it is seen next time
                    self._others.clear()
            finally:
                self._write_lock.release()
        return s  # type: ignore[return-value]

    def _need_embedder(self, tool: str) -> tuple[Session, Embedder]:
        s = self.need(tool)
        return s, self._embedder_of(s, tool)

    @staticmethod
    def _embedder_of(s: Session, tool: str) -> Embedder:
        if s.embedder is None:
            raise NotYetSupportedError(f"{tool}: backend is 'bm25', which has no embedder; use bm25_search")
        return s.embedder

    @contextmanager
    def _writing(self, tool: str) -> Iterator[Session]:
        """The current session, for a write: this process's write lock, the collection's lock
        across processes, and the session brought up to date if another process changed the
        collection since it was opened (so no acknowledged write of theirs is lost)."""
        with self._write_lock:
            s = self.need(tool)
            with collection_lock(s.config.paths().docs):
                on_disk = read_manifest(s.config.paths().docs)
                if (on_disk or {}).get("generation", 0) != s.collection.changes.generation:
                    log.warning("%s: the collection was changed by another process; reloading it first", tool)
                    s = self.session = open_session(s.config, s.embedder)
                try:
                    yield s
                finally:  # what this write published is what the session holds (the lock keeps others out)
                    self._stamp = disk_stamp(s.config)

    def _set(self, s: Session) -> None:
        """Serve `s`, which this process just published (under the write locks)."""
        self.session = s
        self._stamp = disk_stamp(s.config)

    def _publish(self, s: Session, **changes: Any) -> None:
        """Swap in a session with new indexes (a single attribute store: atomic for readers).
        Called under the write lock, so `s` is still the current session."""
        self.session = replace(s, **changes)

    # ---- dense -----------------------------------------------------------------------------

    def embed(self, embedding_path: str | None = None, overwrite: bool | None = None,
              progress: bool = True) -> dict[str, Any]:
        """Embed the corpus a chunk at a time into an .npy file (refuses to overwrite by default)."""
        with self._writing("retriever_embed") as s:
            embedder = self._embedder_of(s, "retriever_embed")
            cfg = s.config
            path = self._path(embedding_path, cfg.paths().embedding, "embedding_path")
            docs = _need_corpus(s, "retriever_embed")
            chunk = cfg.backend_configs.sentence_transformers.sentence_transformers_encode.encode_chunk_size
            manifest = dense_manifest(docs, embedder)
            remember_corpus(cfg)
            manifest |= runtime_record(embedder)
            write_embeddings(path, docs, embedder, chunk, pick(overwrite, cfg.overwrite), manifest, progress)
            return {"embedding_path": str(path), **manifest}

    def embeddings_valid(self, embedding_path: str | None = None) -> bool:
        """Whether the embedding file exists and matches this corpus and model (`retriever index`
        then keeps it; the resume log of a write killed just after finishing it is removed)."""
        s, embedder = self._need_embedder("retriever_index")
        path = self._path(embedding_path, s.config.paths().embedding, "embedding_path")
        try:
            open_embeddings(path, dense_manifest(s.docs, embedder))
        except IndexMismatchError:
            return False
        drop_finished_log(path)
        return True

    def index(self, embedding_path: str | None = None, overwrite: bool | None = None,
              index_path: str | None = None) -> dict[str, Any]:
        """Build the vector index from the embedding file and publish it atomically."""
        with self._writing("retriever_index") as s:
            view = View(s.config, s.collection, self._embedder_of(s, "retriever_index"),
                        learned_sparse.encoder_of(s.config) if s.held is not None else None)
            embedding_file = self._path(embedding_path, s.config.paths().embedding, "embedding_path")
            folder = self._path(index_path, s.config.paths().faiss, "index_path")
            index, report = s.index_backend.build(view, embedding_file, folder, pick(overwrite, s.config.overwrite))
            remember_corpus(s.config)
            self._publish(s, dense=index)
            return report

    def _k(self, s: Session, top_k: int | None) -> int:
        return check_top_k(pick(top_k, s.config.top_k))

    def search(self, query_list: str | Sequence[str], top_k: int | None = None,
               query_instruction: str | None = None, score_threshold: float | None = None,
               scale_score: bool = False, filters: dict[str, Any] | None = None,
               collection_name: str | None = None, ann: dict[str, int] | None = None, mode: str | None = None,
               **fusion: Any) -> list[list[Hit]]:
        """A search of kind `mode` (search/kinds.py: hybrid, dense, bm25, sparse; None: the best the
        collection answers, `default_mode`: hybrid where it has both indexes), per query its top
        `top_k` hits. `scale_score` maps scores to 0..1 (each kind's
        own map); `score_threshold` drops hits below it (after scaling, if asked); `filters` (see
        filters.py) limits the candidates before the top k is taken; `collection_name` searches that
        collection (None: the current one); `ann` sets an ANN index's nprobe / efSearch for this
        call (None: the YAML's); `fusion` (fusion, vector_weight, rrf_k, candidate_depth) sets
        hybrid's options for this call."""
        s = self.searched("search", collection_name)
        ranker = self._ranker(s, mode or self.default_mode(s), query_instruction, ann, fusion)
        spec = Spec(ranker, as_queries(query_list), self._k(s, top_k),
                    None if filters is None else parse_filter(filters), scale_score, score_threshold)
        return documents_of(s).search(s, spec)  # where the session's documents live (documents.py)

    def default_mode(self, s: Session | None = None) -> str:
        """The mode a search that names none runs (the library's, `retriever search`'s, the deploy
        service's /search): hybrid (search/kinds.py DEFAULT_MODE, the best we have) where the
        collection answers it, else the kind it has: dense without a BM25 index (a Milvus collection
        in demo mode, a corpus only embedded), bm25 without an embedding model."""
        s = s or self.session
        if s is None:
            return DEFAULT_MODE
        text = documents_of(s).text_documents(s) is not None
        if s.embedder is None:
            return "bm25"
        if s.dense is None and s.held is None:
            return "bm25" if text else DEFAULT_MODE  # nothing to search: hybrid's error names both indexes
        return DEFAULT_MODE if text else "dense"

    def _ranker(self, s: Session, mode: str, query_instruction: str | None, ann: dict[str, int] | None,
                fusion: dict[str, Any]) -> Ranker:
        """The kind `mode` names with this call's options (search/kinds.py), checked against the session."""
        k = kinds.of(mode)
        given = {name: value for name, value in fusion.items() if value is not None}
        if given and kinds.FUSION not in k.options:
            raise InvalidInputError(f"{', '.join(sorted(given))} apply to mode 'hybrid', not {mode!r}")
        h = hybrid_options(s.config.hybrid, **given) if given else s.config.hybrid
        return kinds.kind(mode, h, query_instruction, ann)

    def batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                     query_instruction: str | None = None, score_threshold: float | None = None,
                     scale_score: bool = False, filters: dict[str, Any] | None = None,
                     collection_name: str | None = None, ann: dict[str, int] | None = None) -> list[list[list[Hit]]]:
        """One search over every query of every group, split back into the groups."""
        return search_groups(
            lambda qs: self.search(qs, top_k, query_instruction, score_threshold, scale_score, filters,
                                   collection_name, ann, mode="dense"), batch_query_list)

    # ---- BM25 ------------------------------------------------------------------------------

    def bm25_index(self, overwrite: bool | None = None, progress: bool = True) -> dict[str, Any]:
        with self._writing("bm25_index") as s:
            text_only(s, "bm25_index")
            self.session, report = documents_of(s).bm25_index(s, pick(overwrite, s.config.overwrite), progress)
            return report

    def bm25_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                    score_threshold: float | None = None, scale_score: bool = False,
                    filters: dict[str, Any] | None = None, collection_name: str | None = None) -> list[list[Hit]]:
        """BM25 search (`search` with mode bm25). `scale_score` maps scores to 0..1 with expit(s / 8)."""
        return self.search(query_list, top_k, None, score_threshold, scale_score, filters, collection_name,
                           mode="bm25")

    # ---- learned sparse (search/learned_sparse.py) ---------------------------------------------

    def sparse_index(self, overwrite: bool | None = None, progress: bool = True) -> dict[str, Any]:
        """Encode the live documents with the YAML's sparse model into the inverted index (a
        progress bar on stderr with `progress`)."""
        with self._writing("sparse_index") as s:
            text_only(s, "sparse_index")
            if s.held is not None:  # the backend keeps each document's vector, written with it
                return held_sparse_index(s)
            return learned_sparse.build(s, pick(overwrite, s.config.overwrite), progress)

    def sparse_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                      score_threshold: float | None = None, scale_score: bool = False,
                      filters: dict[str, Any] | None = None, collection_name: str | None = None) -> list[list[Hit]]:
        """Learned-sparse search (`search` with mode sparse). `scale_score` maps scores to 0..1 with expit(s / 8)."""
        return self.search(query_list, top_k, None, score_threshold, scale_score, filters, collection_name,
                           mode="sparse")

    # ---- documents: add (upsert) and delete ----------------------------------------------------

    def add(self, documents: list[dict[str, Any]], progress: bool = False) -> dict[str, Any]:
        """Add documents (an id that exists is replaced), embedded with the session's model and
        searchable at once (see changes.py)."""
        if isinstance(documents, list) and len(documents) > self.config.limits.max_documents:
            raise LimitError(f"retriever_add: {len(documents)} documents in one call, the limit is "
                             f"{self.config.limits.max_documents} (limits.max_documents); send them in batches")
        with self._writing("retriever_add") as s:
            # an added image's relative path starts at the YAML's folder, as every path in a call
            images = (self.base_dir or Path.cwd()) if s.config.is_multimodal else None
            self.session, report = documents_of(s).add(s, parse_documents(documents, images, self.resolve_path),
                                                        progress)
            return report

    def ingest(self, source_id: str, text: str, metadata: dict[str, Any] | None = None,
               progress: bool = False) -> dict[str, Any]:
        """A document cut into chunks and added as `<source_id>:<n>` (documents/ingest.py)."""
        from .ingest import ingest

        with self._writing("retriever_ingest") as s:
            self.session, report = ingest(s, source_id, text, metadata or {}, progress)
            return report

    def sync(self, sources: Sequence[SourceConfig], progress: Callable[[int, int, str], None] | None = None,
             ) -> dict[str, Any]:
        """Bring the selected collection in step with `sources`' folders (engine/sync.py)."""
        import time

        from .sync import Syncer, Tally

        start = time.perf_counter()
        tally = Tally()
        with self._writing("sync_sources") as s:
            for source in sources:
                Syncer(s, source, tally, self._set, progress).run()
                s = self.need("sync_sources")
            return {"collection": s.config.collection_name, "sources": [src.name for src in sources],
                    **tally.report(), "documents": len(s.collection), "wall_seconds": round(time.perf_counter() - start, 3)}

    def ingest_records(self, source_id: str, records: list[dict[str, Any]], progress: bool = False) -> dict[str, Any]:
        """A document already cut into chunk records `<source_id>:<n>` (a file's, with its citations)."""
        from .ingest import check_source_id, ingest_records

        check_source_id(source_id)
        with self._writing("retriever_ingest") as s:
            self.session, report = ingest_records(s, source_id, records, progress)
            return report

    def delete(self, ids: Sequence[str] | None = None, filters: dict[str, Any] | None = None,
               progress: bool = False) -> dict[str, Any]:
        """Delete documents by id and/or by filter; unknown ids are reported, not an error."""
        with self._writing("retriever_delete") as s:
            if ids is None and filters is None:
                raise InvalidInputError("retriever_delete needs ids, filters or both")
            f = None if filters is None else parse_filter(filters)
            self.session, report = documents_of(s).delete(s, as_queries(ids, "ids") if ids is not None else [], f, progress)
            return report

    def fetcher(self, tool: str, collection_name: str | None = None) -> Callable[[Sequence[str]], dict[str, Document]]:
        """Reads documents by id where the session's documents live (documents.py)."""
        s = self.searched(tool, collection_name)
        return lambda ids: documents_of(s).get(s, ids)

    def list_collections(self) -> dict[str, Any]:
        """Every collection of the configured store: its documents, model, dimension, indexes."""
        found = listed(self.config)
        if visibility.rule(self.config) is not None:  # a caller that sees only some documents: no counts
            found = [{k: v for k, v in c.items() if k == "dimension" or isinstance(v, bool) or not isinstance(v, int)}
                     | {"documents": None} for c in found]
        return {"collections": found}

    # ---- hybrid, multi-query, fan-out (search/) ----------------------------------------------

    def hybrid_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                      query_instruction: str | None = None, fusion: str | None = None,
                      vector_weight: float | None = None, rrf_k: float | None = None,
                      candidate_depth: int | None = None, score_threshold: float | None = None,
                      scale_score: bool = False, filters: dict[str, Any] | None = None,
                      collection_name: str | None = None, ann: dict[str, int] | None = None) -> list[list[Hit]]:
        """Dense and BM25 at once, each `candidate_depth` deep, fused per query (see fusion.py):
        `search` with mode hybrid. Each hit carries its rank and score in each retriever.
        `scale_score` divides by the best possible fused score; `ann` as in `search`."""
        return self.search(query_list, top_k, query_instruction, score_threshold, scale_score, filters,
                           collection_name, ann, mode="hybrid", fusion=fusion, vector_weight=vector_weight,
                           rrf_k=rrf_k, candidate_depth=candidate_depth)

    def hybrid_batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                            **options: Any) -> list[list[list[Hit]]]:
        return search_groups(lambda qs: self.hybrid_search(qs, top_k, **options), batch_query_list)

    def multi_query_search(self, question_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                           mode: str = DEFAULT_MODE, query_instruction: str | None = None,
                           candidate_depth: int | None = None, score_threshold: float | None = None,
                           scale_score: bool = False, filters: dict[str, Any] | None = None) -> list[list[Hit]]:
        """Several phrasings per question, each searched `candidate_depth` deep with `mode`
        (dense, bm25 or hybrid), fused with RRF (k from the YAML) into one ranking per question."""
        s = self.need("retriever_multi_query_search")
        h = hybrid_options(s.config.hybrid, candidate_depth=candidate_depth)
        ranker, f = kinds.kind(mode, h, query_instruction, s=s), None if filters is None else parse_filter(filters)
        if s.held is not None:  # the backend holds the documents: its hits fused by id (search/stored.py)
            held = s.held
            return stored.multi_query(lambda qs: kinds.held_search(s, held, Spec(ranker, qs, h.candidate_depth, f)),
                                      question_list, self._k(s, top_k), h.rrf_k, scale_score, score_threshold)
        return run.multi_query(s, ranker, question_list, self._k(s, top_k), h.candidate_depth, h.rrf_k, f,
                               scale_score, score_threshold)

    def searched(self, tool: str, collection_name: str | None) -> Session:
        """The session a search reads: the current one, or collection `collection_name`'s."""
        return self.need(tool) if collection_name is None else self.collection_session(collection_name, tool)

    def check_opened(self, tool: str, collection_name: str | None, corpus_path: str | None) -> None:
        """A call that names the collection or the corpus it works on (as UltraRAG's do) names the
        ones retriever_init opened."""
        s = self.need(tool)
        if collection_name is not None and collection_name != s.config.collection_name:
            raise InvalidInputError(f"{tool} works on the collection retriever_init opened "
                                    f"({s.config.collection_name!r}), not {collection_name!r}; call retriever_init "
                                    "with that collection_name first")
        if corpus_path and s.config.corpus_path is not None:
            given = self._path(corpus_path, s.config.corpus_path, "corpus_path").resolve()
            if given != s.config.corpus_path.resolve():
                raise InvalidInputError(f"{tool} works on the corpus retriever_init opened ({s.config.corpus_path}), "
                                        f"not {given}; call retriever_init with that corpus_path first")

    def collection_session(self, name: str, tool: str = "retriever_fanout_search") -> Session:
        """The session of collection `name` ("" = the default): the current one, or one opened with
        the current settings and model (kept until the next retriever_init)."""
        s = self.need(tool)
        return s if name == s.config.collection_name else self._others.session(self.base_config, self.base_dir, name, s)

    def fanout_search(self, query_list: str | Sequence[str], collections: Sequence[str], top_k: int | None = None,
                      mode: str = DEFAULT_MODE, query_instruction: str | None = None, candidate_depth: int | None = None,
                      filters: dict[str, Any] | None = None, score_threshold: float | None = None,
                      scale_score: bool = False) -> tuple[list[list[Hit]], dict[str, str]]:
        """One search over several collections, fused with RRF (see search/fanout.py)."""
        s = self.need("retriever_fanout_search")
        h = hybrid_options(s.config.hybrid, candidate_depth=candidate_depth)
        return fanout(self.collection_session, as_queries(query_list), collections, self._k(s, top_k), h, mode,
                      query_instruction, filters, score_threshold, scale_score)

    # ---- helpers ---------------------------------------------------------------------------

    def resolve_path(self, given: str, what: str) -> Path:
        """A path from a call: relative to the YAML's folder, inside the allowed roots."""
        return self._path(given, Path(given), what)

    def _path(self, given: str | None, default: Path, what: str = "path") -> Path:
        """A path from a call (relative: against the YAML's folder), inside the allowed roots."""
        if not given:
            return default
        path = Path(given)
        path = path if path.is_absolute() or self.base_dir is None else self.base_dir / path
        return check_path(path, self.base_config, self.base_dir, what)


def _need_corpus(s: Session, tool: str) -> CorpusFile:
    if s.docs is None:
        raise IndexMissingError(f"{tool}: this collection has no corpus file (corpus_path is null); its documents "
                                "come from retriever_add, which embeds and indexes them as they arrive")
    return s.docs


def _read_only(cfg: Config) -> Config:
    return cfg.model_copy(update={"security": cfg.security.model_copy(update={"read_only": True})})
