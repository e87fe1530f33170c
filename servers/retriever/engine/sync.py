"""A collection kept in step with folders of files (`retriever sync`, the `sync_sources` tool).

What the collection holds of a source is read from its own chunks (each carries its file's
path, size, mtime and sha256: sources/records.py), so there is no second record to drift from
it. A file whose size and mtime match is skipped unread; one whose bytes hash the same is
re-stamped from its stored chunks (no parse, no embedding); a new file with the bytes of a
removed one is a move (its chunks copied under the new id); anything else is parsed, cut and
embedded, and a chunk whose text the collection already holds takes its stored vector. Files
gone from the folder lose their chunks.

Changes are committed in batches (commit_chunks, or every 30 s) through the change log
(engine/changes.py); BM25 follows each as a delta and is rebuilt once at the end. A file's new
chunks and the deletion of its old ones are one commit, so a search never sees half a file,
and a sync killed at any point leaves the collection at its last commit; the next sync finds
what is left to do from the chunks themselves."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..config.sources import SourceConfig
from ..documents.pieces import pieces_for
from ..errors import NotYetSupportedError, RetrieverError
from ..security.limits import check_cancel
from ..session import Session, bm25_manifest, build_bm25
from ..sources.formats import parse_path
from ..sources.records import FileStamp, chunk_records
from ..sources.walk import File, doc_id, sha256_of, walk
from ..store.collection import parse_documents
from ..types import Document
from . import changes

log = logging.getLogger(__name__)
Progress = Callable[[int, int, str], None]  # files done, files in all, what is happening
BATCH_SECONDS = 30.0  # at most this long between two commits (what a kill can cost)


@dataclass
class Held:
    """One file as the collection holds it: its chunks' rows and documents, its stamp."""

    rows: list[int] = field(default_factory=list)
    docs: list[Document] = field(default_factory=list)
    size: int = -1
    mtime_ns: int = -1
    sha256: str = ""
    format: str = ""


@dataclass
class Tally:
    files: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    touched: int = 0
    moved: int = 0
    deleted: int = 0
    failed: int = 0
    chunks_added: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    reused: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("walk", "hash", "parse", "chunk", "embed", "index"), 0.0))

    def report(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "seconds"}
        out["seconds"] = {k: round(v, 3) for k, v in self.seconds.items()}
        return out


def held_files(s: Session, source: str) -> dict[str, Held]:
    """Doc id -> what the collection holds of it, for the chunks a sync of `source` wrote."""
    c = s.collection
    out: dict[str, Held] = {}
    for i, d in enumerate(c.changes.docs):
        row = c.n_base + i
        m = d.metadata
        if not c.live[row] or m.get("sync_source") != source or "source_id" not in m:
            continue
        h = out.setdefault(str(m["source_id"]), Held())
        h.rows.append(row)
        h.docs.append(d)
        h.size, h.mtime_ns, h.sha256, h.format = m.get("size", -1), m.get("mtime_ns", -1), m.get("sha256", ""), m.get(
            "format", "")
    for h in out.values():
        order = np.argsort([int(d.metadata.get("split_id", 0)) for d in h.docs], kind="stable")
        h.docs = [h.docs[i] for i in order]
    return out


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class Batch:
    """Chunks to add and rows to drop, committed together."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.docs: list[Document] = []
        self.drop: list[int] = []
        self.since = time.monotonic()

    def due(self) -> bool:
        return len(self.docs) >= self.size or time.monotonic() - self.since > BATCH_SECONDS


class Syncer:
    """One collection's sync of one source."""

    def __init__(self, s: Session, source: SourceConfig, tally: Tally, publish: Callable[[Session], None],
                 progress: Progress | None) -> None:
        if s.held is not None:
            raise NotYetSupportedError("sync keeps a local collection (a corpus and change log) in step; the index "
                                       "backend holds this collection's documents (Milvus demo / full_text): use "
                                       "index_backend faiss, or milvus with is_demo: false and full_text: false")
        self.s, self.source, self.tally, self.publish, self.progress = s, source, tally, publish, progress
        docs, vectors = s.collection.live_added()
        self.cache: dict[bytes, np.ndarray] = {}
        if vectors is not None and s.embedder is not None and s.collection.changes.model == s.embedder.model_id:
            self.cache = {_key(d.text): vectors[i] for i, d in enumerate(docs)}
        self.batch = Batch(self.source.commit_chunks)
        self.committed = False
        self.pieces = pieces_for(s.config, source.chunking)

    def run(self) -> None:
        t = self.tally
        start = time.perf_counter()
        files = list(walk(self.source))
        held = held_files(self.s, self.source.name)
        t.seconds["walk"] += time.perf_counter() - start
        t.files += len(files)
        here = {doc_id(self.source, f.rel) for f in files}
        gone = {i: h for i, h in held.items() if i not in here}
        by_sha = {h.sha256: i for i, h in gone.items() if h.sha256}
        for n, f in enumerate(files):
            check_cancel("sync")
            try:
                moved = self.file(f, held.get(doc_id(self.source, f.rel)), gone, by_sha)
                if moved is not None:
                    del gone[moved]
            except Exception as e:  # noqa: BLE001 - one bad file is listed; the others go on
                t.failed += 1
                t.errors.append({"path": f.rel, "error": self._message(e)})
                log.warning("sync: %s", t.errors[-1]["error"])
            if self.batch.due():
                self.commit()
            if self.progress is not None:
                self.progress(n + 1, len(files), f.rel)
        for h in gone.values():
            self.batch.drop += h.rows
            t.deleted += 1
            t.chunks_deleted += len(h.rows)
        self.commit()
        self.settle_bm25()

    def settle_bm25(self) -> None:
        """BM25 rebuilt over the live chunks once the sync has changed any: between commits it
        follows as a delta, whose statistics (document count, lengths, idf) are the base's; after
        a sync its scores are what a fresh index of the folder gives."""
        s = self.s
        behind = s.bm25 is not None and (
            (s.bm25.delta is not None and len(s.bm25.delta) > 0)  # a sync killed before its rebuild, say
            or s.bm25.manifest.get("log_generation") != s.collection.changes.generation)
        if s.bm25 is None or not (self.committed or behind):
            return
        start = time.perf_counter()
        index = build_bm25(s, progress=False)
        index.save(s.config.paths().bm25, bm25_manifest(s))
        self.s = replace(s, bm25=index)
        self.publish(self.s)
        self.tally.seconds["index"] += time.perf_counter() - start

    def _message(self, e: Exception) -> str:
        text = str(e) if isinstance(e, RetrieverError) else f"{type(e).__name__}: {e}"
        return text.replace(str(self.source.path), "<source>")

    def file(self, f: File, h: Held | None, gone: dict[str, Held], by_sha: dict[str, str]) -> str | None:
        """Bring one file up to date in the batch; the id of a removed file it moved from, if any."""
        t = self.tally
        if h is not None and h.size == f.size and h.mtime_ns == f.mtime_ns:
            t.unchanged += 1
            return None
        start = time.perf_counter()
        sha = sha256_of(f.path)
        t.seconds["hash"] += time.perf_counter() - start
        stamp = FileStamp(self.source.name, f.rel, f.size, f.mtime_ns, sha)
        new_id = doc_id(self.source, f.rel)
        fmt = _format_of(f.rel)
        if h is not None and h.sha256 == sha and h.format == fmt:  # same bytes, a new mtime: re-stamp
            self.copy(h, new_id, stamp)
            t.touched += 1
            return None
        old = gone.get(by_sha.get(sha, ""))
        if h is None and old is not None and old.format == fmt:  # a removed file's bytes under a new name
            self.copy(old, new_id, stamp)
            t.moved += 1
            return by_sha.pop(sha)
        start = time.perf_counter()
        parsed = parse_path(f.path, self.s.config.limits, f.rel)
        t.seconds["parse"] += time.perf_counter() - start
        start = time.perf_counter()
        limit = self.s.config.limits.max_chunks
        records = chunk_records(new_id, parsed, stamp, self.source.chunking, limit, self.source.context,
                                self.pieces)
        if len(records) > limit:
            raise RetrieverError(f"{f.rel}: more than limits.max_chunks ({limit}) chunks; raise it or chunk larger")
        docs = parse_documents(records) if records else []
        t.seconds["chunk"] += time.perf_counter() - start
        if not docs:
            t.errors.append({"path": f.rel, "error": "no text found (nothing indexed)"})
        self.batch.docs += docs
        if h is not None:
            self.batch.drop += h.rows
            t.chunks_deleted += len(h.rows)
        t.chunks_added += len(docs)
        if h is None:
            t.new += 1
        else:
            t.changed += 1
        return None

    def copy(self, h: Held, new_id: str, stamp: FileStamp) -> None:
        """`h`'s chunks again, under `new_id` with `stamp`: same texts, so their vectors are reused."""
        fields = stamp.fields()
        for d in h.docs:
            n = d.metadata.get("split_id", 0)
            self.batch.docs.append(Document(f"{new_id}:{n}", d.text, {**d.metadata, **fields, "source_id": new_id}))
        self.batch.drop += h.rows
        self.tally.chunks_added += len(h.docs)
        self.tally.chunks_deleted += len(h.rows)

    def vectors(self, docs: Sequence[Document]) -> np.ndarray | None:
        s = self.s
        if s.embedder is None:
            return None
        keys = [_key(d.text) for d in docs]
        todo = sorted({k: i for i, k in enumerate(keys) if k not in self.cache}.values())
        if todo:
            start = time.perf_counter()
            fresh = s.embedder.encode_passages([docs[i].text for i in todo])
            self.tally.seconds["embed"] += time.perf_counter() - start
            for i, v in zip(todo, fresh):
                self.cache[keys[i]] = v
        self.tally.embedded += len(todo)
        self.tally.reused += len(docs) - len(todo)
        return np.stack([self.cache[k] for k in keys]).astype(np.float32) if docs else None

    def commit(self) -> None:
        b = self.batch
        if not b.docs and not b.drop:
            return
        vectors = self.vectors(b.docs)
        start = time.perf_counter()
        model = self.s.embedder.model_id if self.s.embedder is not None else None
        log_ = self.s.collection.with_changes(b.docs, vectors, model, b.drop)
        self.s = changes.commit(self.s, log_, progress=False, rebuild_bm25=False)  # rebuilt once at the end
        self.committed = True
        self.publish(self.s)
        self.tally.seconds["index"] += time.perf_counter() - start
        self.batch = Batch(self.source.commit_chunks)


def _format_of(rel: str) -> str:
    from ..sources.formats import format_of

    try:
        return format_of(rel) or "text"
    except RetrieverError:
        return ""
