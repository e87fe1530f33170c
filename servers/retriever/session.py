"""What `retriever_init` loads: one immutable Session per configuration, and how its parts are
loaded and derived (the corpus, the change log, the embedder, the dense and BM25 indexes)."""

from __future__ import annotations

import json
import logging
import os
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
from .indexes import Change, VectorIndex
from .indexes.faiss import FaissIndex
from .indexes.milvus_index import MilvusIndex, shared_store
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
    def docs(self) -> DocStore | None:
        """The corpus file's store (None for a collection filled only by adds)."""
        return self.store.base


def corpus_manifest(docs: DocStore | None) -> dict[str, Any]:
    """What every index built from the corpus file records of it."""
    return {"count": len(docs) if docs is not None else 0,
            "corpus_fingerprint": docs.fingerprint if docs is not None else None}


def dense_manifest(docs: DocStore | None, embedder: Embedder) -> dict[str, Any]:
    """What a dense index or embedding file made from `docs` with `embedder` records."""
    return {"model": embedder.model_id, "dimension": embedder.dimension, **corpus_manifest(docs)}


def open_session(cfg: Config, embedder: Embedder | None = None) -> Session:
    """Open the corpus and change log, build the embedder, load the saved indexes (refusing any
    that does not match; with `overwrite` it is skipped with a warning, to be rebuilt). An
    `embedder` given is used instead of building one (another collection, the same model)."""
    # demo mode keeps every document in Milvus: no corpus file is read at start
    docs = DocStore.open(cfg.corpus_path) if cfg.corpus_path is not None and not cfg.is_demo else None
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
    """The corpus index from disk (an empty one when there is no corpus) with the change log's
    vectors appended."""
    if s.embedder is None:
        return None
    if s.config.index_backend == "milvus":
        return load_milvus(s, warnings)
    folder = s.config.paths().faiss
    fcfg = s.config.index_backend_configs.faiss
    index: VectorIndex | None = FaissIndex.load(folder, use_gpu=fcfg.index_use_gpu)
    if index is not None:
        check_manifest(index.manifest, dense_manifest(s.docs, s.embedder), folder,
                       "call retriever_embed and retriever_index with overwrite=true")
        warnings += index.warnings
    elif s.docs is None:
        index = FaissIndex.empty(s.embedder.dimension)
    return with_log(s, index)


def with_log(s: Session, index: VectorIndex | None) -> VectorIndex | None:
    """`index` (of the corpus rows) plus the vectors of the documents added since."""
    added = s.store.log
    if index is None or not added.docs:
        return index
    if added.vectors is None or added.model != (s.embedder.model_id if s.embedder else None):
        raise IndexMismatchError(f"{s.config.paths().docs}: the added documents were embedded with "
                                 f"{added.model!r}, this session uses {s.embedder.model_id if s.embedder else None!r};"
                                 " add them again with this model, or restore the model")
    return index.apply(Change(added.docs, added.vectors, [], s.store.row_of, added.generation))


def milvus_manifest(s: Session) -> dict[str, Any]:
    """What a Milvus collection records: in demo mode there is no corpus file to fingerprint."""
    embedder = s.embedder
    if embedder is None:
        raise IndexMismatchError("a Milvus collection needs an embedding backend, not 'bm25'")
    if s.config.is_demo:
        return {"model": embedder.model_id, "dimension": embedder.dimension, "is_demo": True}
    return {**dense_manifest(s.docs, embedder), "is_demo": False}


def load_milvus(s: Session, warnings: list[str]) -> MilvusIndex | None:
    """The Milvus collection, checked against this session; one behind the change log (a crash
    between the log and the Milvus write) is brought up to date from the log."""
    store = shared_store(s.config.index_backend_configs.milvus, s.config.collection_name)
    if not store.exists():
        return None
    info = store.info() or {}
    check_manifest(info, milvus_manifest(s), f"Milvus collection {store.collection!r}",
                   "call retriever_index(overwrite=true) to rebuild it, or pick another collection_name")
    if s.config.is_demo:
        return MilvusIndex(store, None, info)
    index = MilvusIndex(store, s.store.row_of, info)
    log_ = s.store.log
    if info.get("log_generation", 0) != log_.generation:
        warnings.append(f"Milvus collection {store.collection!r} predates the last add or delete; brought up to date")
        log.warning(warnings[-1])
        docs, vectors = s.store.live_added()
        dead = {s.store.ids[r] for r in log_.deleted.tolist()} - set(s.store.row_of)
        index = index.apply(Change(docs, vectors, sorted(dead), s.store.row_of, log_.generation))
    return index


def bm25_manifest(s: Session) -> dict[str, Any]:
    return {**corpus_manifest(s.docs), "log_generation": s.store.log.generation}


def load_bm25(s: Session, warnings: list[str]) -> BM25Index | None:
    """The saved BM25 index; one built before the last add or delete (a crash between the two
    writes) is rebuilt over the live documents, with a warning."""
    if s.config.is_demo:
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


def describe_milvus(cfg: Config) -> list[dict[str, Any]]:
    """Every collection of the Milvus store (uri), as its recorded info says."""
    from .indexes.milvus import list_collections

    mcfg = cfg.index_backend_configs.milvus
    out = []
    for name in list_collections(mcfg.uri, mcfg.token or os.environ.get("MILVUS_TOKEN")):
        store = shared_store(mcfg, name)
        info = store.info() or {}
        out.append({"name": name, "index_backend": "milvus", "documents": store.count(), "model": info.get("model"),
                    "dimension": info.get("dimension"), "is_demo": info.get("is_demo")})
    return out


def candidates(s: Session, filters: dict[str, Any] | None) -> Allowed:
    """The candidate rows (live, passing the filter; None: every row) and the parsed filter."""
    f = None if filters is None else parse_filter(filters)
    return s.store.allowed(f), f
