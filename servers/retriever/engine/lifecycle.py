"""The session a Retriever serves (retriever.py): `retriever_init` opens it, a search brings it up to
date with what another writer published, and a write holds this process's lock and the
collection's lock across processes while it changes it (writes.py).

Paths from a call are resolved here too: relative to the YAML's folder, inside the allowed roots.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config import Config
from ..embedders import Embedder
from ..errors import NotInitializedError, NotYetSupportedError
from ..indexes import check_backend
from ..security.guard import check_client_config, check_path
from ..session import Session, disk_stamp, open_session, reopen
from ..store.catalog import recorded_corpus
from ..store.locks import collection_lock
from ..store.persist import read_manifest
from .collections import Others
from .documents import documents_of

log = logging.getLogger(__name__)


class Lifecycle:
    """The session, its reloads and the write locks; the searches (retriever.py) and the writes
    (writes.py) build on it."""

    def __init__(self, config: Config | None = None, base_dir: Path | None = None, shared: bool = False) -> None:
        self.base_config = config or Config()
        self.base_dir = base_dir
        self.shared = shared  # served to many clients (HTTP): retriever_init may not change the settings
        self.ultrarag = False  # tool arguments read with UltraRAG's meanings (pipeline/ultrarag.py)
        self.session: Session | None = None
        self._write_lock = threading.RLock()  # one build at a time; a search takes it only to reload, never waits
        self._stamp: tuple[Any, ...] = ()  # the published files the session was read from (disk_stamp)
        self._others = Others()  # other collections opened by fan-out searches and collection_name

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


def _read_only(cfg: Config) -> Config:
    return cfg.model_copy(update={"security": cfg.security.model_copy(update={"read_only": True})})
