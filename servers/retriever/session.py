"""What `retriever_init` loads: one immutable Session per configuration, and how its parts are
loaded and derived (the corpus, the change log, the embedder, the dense and BM25 indexes)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .collection import ChangeLog, Collection
from .config import COLLECTION_NAME, Config
from .corpus import DocStore
from .embedders import Embedder, build_embedder
from .errors import IndexMismatchError
from .filters import Filter
from .filters import parse as parse_filter
from .indexes import IndexBackend, VectorIndex, View, backend_for
from .manifests import corpus_manifest
from .persist import atomic_write_text, check_manifest, read_manifest
from .sparse import BM25Index

log = logging.getLogger(__name__)
Allowed = tuple[np.ndarray | None, Filter | None]  # the candidates: a mask over rows (None: all), the filter


@dataclass(frozen=True)
class Session:
    """What `retriever_init` loaded. Replaced whole, never mutated, so a search that took a
    snapshot sees one consistent collection, model and index while a rebuild runs beside it."""

    config: Config
    store: Collection
    embedder: Embedder | None
    dense: VectorIndex | None
    bm25: BM25Index | None
    warnings: tuple[str, ...] = ()

    @property
    def backend(self) -> IndexBackend:
        """The dense index backend the config selects (stateless, chosen by config)."""
        return backend_for(self.config)

    @property
    def docs(self) -> DocStore | None:
        """The corpus file's store (None for a collection filled only by adds)."""
        return self.store.base


def open_session(cfg: Config, embedder: Embedder | None = None) -> Session:
    """Open the corpus and change log, build the embedder, load the saved indexes (refusing any
    that does not match; with `overwrite` it is skipped with a warning, to be rebuilt). An
    `embedder` given is used instead of building one (another collection, the same model)."""
    holds = backend_for(cfg).holds_documents  # the index backend keeps the documents: no corpus file here
    docs = DocStore.open(cfg.corpus_path) if cfg.corpus_path is not None and not holds else None
    paths = cfg.paths()
    store = Collection(docs, ChangeLog.load(paths.docs, corpus_manifest(docs)))
    if embedder is None and cfg.backend != "bm25":
        embedder = build_embedder(cfg)
    warnings: list[str] = list(embedder.warnings) if embedder else []
    draft = Session(cfg, store, embedder, None, None)
    dense = _guard(cfg, warnings, lambda: load_dense(draft, warnings))
    bm25 = _guard(cfg, warnings, lambda: load_bm25(draft, warnings))
    return Session(cfg, store, embedder, dense, bm25, tuple(warnings))


def _guard(cfg: Config, warnings: list[str], load: Any) -> Any:
    try:
        return load()
    except IndexMismatchError as err:
        if not cfg.overwrite:
            raise
        warnings.append(f"not loaded (overwrite is true, rebuild it): {err}")
        log.warning(warnings[-1])
        return None


def load_dense(s: Session, warnings: list[str]) -> VectorIndex | None:
    """The saved dense index, from the session's index backend (indexes/)."""
    if s.embedder is None:
        return None
    return s.backend.load(View(s.config, s.store, s.embedder), warnings)


def bm25_manifest(s: Session) -> dict[str, Any]:
    return {**corpus_manifest(s.docs), "log_generation": s.store.log.generation}


def load_bm25(s: Session, warnings: list[str]) -> BM25Index | None:
    """The saved BM25 index; one built before the last add or delete (a crash between the two
    writes) is rebuilt over the live documents, with a warning."""
    if s.backend.holds_documents:
        return None
    bcfg = s.config.backend_configs.bm25
    folder = s.config.paths().bm25
    index = BM25Index.load(folder, bcfg.lang)
    if index is None:
        return None
    check_manifest(index.manifest, corpus_manifest(s.docs), folder, "call bm25_index(overwrite=true)")
    if not len(s.store):
        return None
    if index.manifest.get("log_generation", 0) != s.store.log.generation:
        warnings.append(f"{folder} predates the last add or delete; rebuilt over the live documents")
        log.warning(warnings[-1])
        index = build_bm25(s, progress=False)
        index.save(folder, bm25_manifest(s))
    return index


def build_bm25(s: Session, progress: bool) -> BM25Index:
    """BM25 over the live documents of the collection."""
    rows = s.store.live_rows()
    identity = len(rows) == s.store.rows
    return BM25Index.build(s.store.texts(rows.tolist()), s.config.backend_configs.bm25, show_progress=progress,
                           rows=None if identity else rows.astype(np.int64))


def describe(cfg: Config) -> dict[str, Any]:
    """A collection as its manifests record it: documents, model, dimension, indexes present."""
    paths = cfg.paths()
    dense, bm25, changes = (read_manifest(p) for p in (paths.faiss, paths.bm25, paths.docs))
    base = next((m["count"] for m in (dense, bm25) if m), None)
    out: dict[str, Any] = {"name": cfg.collection_name, "index_backend": "faiss",
                           "model": (dense or changes or {}).get("model"), "dimension": (dense or changes or {}).get("dimension"),
                           "dense_index": dense is not None, "bm25_index": bm25 is not None}
    if changes:
        out["documents"] = (base or 0) + changes["added"] - changes["deleted"]
    else:
        out["documents"] = base
    return out


SETTINGS = "collection.json"


def remember_corpus(cfg: Config) -> None:
    """A named collection records its corpus file on its first write, so opening it by name
    later (retriever_init, fan-out) finds the same corpus."""
    if cfg.collection_name:
        path = cfg.collections_path / cfg.collection_name / SETTINGS
        if not path.is_file():
            corpus = str(cfg.corpus_path) if cfg.corpus_path is not None else None
            atomic_write_text(path, json.dumps({"corpus_path": corpus}))


def recorded_corpus(cfg: Config) -> Config:
    """`cfg` with the corpus file its named collection recorded (unchanged if none)."""
    path = cfg.collections_path / cfg.collection_name / SETTINGS
    if not cfg.collection_name or not path.is_file():
        return cfg
    corpus = json.loads(path.read_text(encoding="utf-8"))["corpus_path"]
    return cfg.model_copy(update={"corpus_path": Path(corpus) if corpus else None})


def collection_names(cfg: Config) -> list[str]:
    """The default collection ("") and every named one under collections_path."""
    root = cfg.collections_path
    named = sorted(p.name for p in root.iterdir() if p.is_dir() and COLLECTION_NAME.fullmatch(p.name)) if root.is_dir() else []
    return ["", *named]


def candidates(s: Session, filters: dict[str, Any] | None) -> Allowed:
    """The candidate rows (live, passing the filter; None: every row) and the parsed filter."""
    f = None if filters is None else parse_filter(filters)
    return s.store.allowed(f), f
