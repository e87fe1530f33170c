"""What changes a collection: embeddings and indexes built (`retriever_embed`, `retriever_index`,
`bm25_index`, `sparse_index`), documents added, ingested, synced with folders and deleted. Each
runs under the write locks (lifecycle.py `_writing`) and publishes the session it made.

Every method takes the UltraRAG tool arguments; an argument left as None takes the value from
parameter.yaml, for that call only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import SourceConfig
from ..errors import IndexMismatchError, IndexMissingError, InvalidInputError, LimitError
from ..filters import parse as parse_filter
from ..indexes import View
from ..search import learned_sparse
from ..search.rankers import text_only
from ..search.results import as_queries, pick
from ..session import Session
from ..store.catalog import remember_corpus
from ..store.collection import parse_documents
from ..store.corpus import CorpusFile
from ..store.embedfile import drop_finished_log, open_embeddings, write_embeddings
from ..store.manifests import dense_manifest, runtime_record
from .documents import documents_of, held_sparse_index
from .lifecycle import Lifecycle


class Writes(Lifecycle):
    """The Retriever's writes (retriever.py's class inherits them)."""

    # ---- builds: embeddings and indexes ----------------------------------------------------

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

    def bm25_index(self, overwrite: bool | None = None, progress: bool = True) -> dict[str, Any]:
        with self._writing("bm25_index") as s:
            text_only(s, "bm25_index")
            self.session, report = documents_of(s).bm25_index(s, pick(overwrite, s.config.overwrite), progress)
            return report

    def sparse_index(self, overwrite: bool | None = None, progress: bool = True) -> dict[str, Any]:
        """Encode the live documents with the YAML's sparse model into the inverted index (a
        progress bar on stderr with `progress`)."""
        with self._writing("sparse_index") as s:
            text_only(s, "sparse_index")
            if s.held is not None:  # the backend keeps each document's vector, written with it
                return held_sparse_index(s)
            return learned_sparse.build(s, pick(overwrite, s.config.overwrite), progress)

    # ---- documents: add (upsert), ingest, sync and delete ---------------------------------------

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


def _need_corpus(s: Session, tool: str) -> CorpusFile:
    if s.docs is None:
        raise IndexMissingError(f"{tool}: this collection has no corpus file (corpus_path is null); its documents "
                                "come from retriever_add, which embeds and indexes them as they arrive")
    return s.docs
