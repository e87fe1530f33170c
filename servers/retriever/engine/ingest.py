"""A document into a collection as chunks: cut by the `chunking` settings (one chunk if `by` is
none), added as `<source_id>:<n>` through the change log (changes.py), searchable at once.
Ingesting a source again replaces its chunks: the new ones are written first, then the left-over
old ones deleted, so a crash in between never loses the document."""

from __future__ import annotations

from typing import Any

from ..config import ChunkingConfig, Config, SourceConfig
from ..documents.pieces import pieces_for
from ..documents.split import chunk_records, chunks_of
from ..errors import InvalidInputError
from ..filters import parse as parse_filter
from ..security.limits import check_count
from ..session import Session
from ..store.collection import parse_documents
from .documents import documents_of


def chunking(cfg: Config) -> ChunkingConfig:
    """The YAML's chunking, or where it cuts nothing (`by: none`) a source's default: a long
    document as one record is found by neither dense search (the model reads its start) nor BM25."""
    return cfg.chunking if cfg.chunking.by != "none" else SourceConfig.model_fields["chunking"].default


def ingest(s: Session, source_id: str, text: str, metadata: dict[str, Any],
           progress: bool) -> tuple[Session, dict[str, Any]]:
    check_source_id(source_id)
    limit = s.config.limits.max_chunks
    cut = chunking(s.config)
    chunks = chunks_of(text, cut, limit, pieces_for(s.config, cut))
    check_count(f"retriever_ingest: chunks of {source_id!r}", len(chunks), "max_chunks", limit,
                "send a shorter document or cut it with larger chunking.length; nothing was added")
    return ingest_records(s, source_id, list(chunk_records(metadata, text, chunks, source_id)), progress)


def check_source_id(source_id: str) -> None:
    if not source_id or ":" in source_id:
        raise InvalidInputError(f"retriever_ingest: source_id must be non-empty without ':', got {source_id!r}")


def ingest_records(s: Session, source_id: str, records: list[dict[str, Any]],
                   progress: bool) -> tuple[Session, dict[str, Any]]:
    """A document's chunk records (ids `<source_id>:<n>`) in, its chunks from before that are left over out."""
    if not records:
        raise InvalidInputError(f"retriever_ingest: {source_id!r} has no text")
    docs = parse_documents(records)
    where = documents_of(s)
    s, report = where.add(s, docs, progress)
    # the source's chunks from an earlier, longer version: removed once the new ones are in
    stale = parse_filter({"operator": "AND", "conditions": [
        {"field": "meta.source_id", "operator": "==", "value": source_id},
        {"field": "id", "operator": "not in", "value": [d.id for d in docs]}]})
    s, removed = where.delete(s, [], stale, progress)
    return s, {"source_id": source_id, "ids": [d.id for d in docs], "replaced": report["replaced"],
               "removed": removed["deleted"], "documents": removed["documents"]}
