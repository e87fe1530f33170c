"""What `retriever_init` loads: one immutable Session per configuration, and how its parts are
loaded and derived (the corpus, the change log, the embedder, the dense and BM25 indexes)."""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .config import Config
from .documents.chunks import chunked_corpus
from .embedders import Embedder, build_embedder
from .errors import IndexMismatchError
from .filters import Filter
from .filters import parse as parse_filter
from .indexes import HeldDocuments, VectorBackend, VectorIndex, View, backend_for
from .indexes.bm25 import BM25Index
from .security import visibility
from .store.collection import ChangeLog, Collection
from .store.corpus import CorpusFile
from .store.manifests import corpus_manifest
from .store.persist import MANIFEST, check_manifest

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Seen:
    """What a restricted caller (security.visibility) sees, and so what its scores may count: BM25's
    statistics, hybrid's calibration and query gate come from these rows, never the whole collection,
    so a hidden document moves no score it gets (issue 47)."""

    rows: np.ndarray  # a mask over the collection's rows: the live ones it sees
    key: str  # names the rule (its field, missing and groups): what is learned from these rows is kept under it


class Allowed(NamedTuple):
    """The candidates of a search of a local collection."""

    rows: np.ndarray | None  # a mask over rows (None: all)
    filter: Filter | None
    seen: Seen | None = None  # None: the caller sees every document (the operator, an admin)


@dataclass(eq=False)
class Learned:
    """What a collection's searches learn as they run, kept with its session: hybrid's query gate
    per caller (search/signals.py) and the calibrated vector weight (search/calibration.py). The
    session a write derives from this one shares it; a collection opened anew (retriever_init, or
    loading what another process published) starts empty."""

    gates: OrderedDict[str, Any] = field(default_factory=OrderedDict)  # caller -> QueryGate, least recent first
    gates_lock: threading.Lock = field(default_factory=threading.Lock)
    calibration: dict[str, dict[str, Any]] = field(default_factory=dict)  # calibration key -> its result
    calibration_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        _LEARNED.add(self)


_LEARNED: weakref.WeakSet[Learned] = weakref.WeakSet()  # every live one: forget_learned (tests, benchmarks)


def forget_learned() -> None:
    """Every open collection's query gates and calibration memory back to empty, as in a fresh
    process (tests and benchmarks that share a session between cases)."""
    for learned in list(_LEARNED):
        with learned.gates_lock:
            learned.gates.clear()
        with learned.calibration_lock:
            learned.calibration.clear()


@dataclass(frozen=True)
class Session:
    """What `retriever_init` loaded. Replaced whole, never mutated, so a search that took a
    snapshot sees one consistent collection, model and index while a rebuild runs beside it."""

    config: Config
    collection: Collection  # the corpus and the change log, by row (empty where `held` holds the documents)
    embedder: Embedder | None
    dense: VectorIndex | None
    bm25: BM25Index | None
    index_backend: VectorBackend  # where the vectors live (indexes.backend_for; `backend` is the embedding one)
    held: HeldDocuments | None  # the backend holds the documents too (Milvus demo / full_text): writes go there
    warnings: tuple[str, ...] = ()
    learned: Learned = field(default_factory=Learned, compare=False, repr=False)

    @property
    def docs(self) -> CorpusFile | None:
        """The corpus file's store (None for a collection filled only by adds)."""
        return self.collection.base


def open_session(cfg: Config, embedder: Embedder | None = None, reader: bool = False) -> Session:
    """Open the corpus and change log, build the embedder, load the saved indexes (refusing any
    that does not match; with `overwrite` it is skipped with a warning, to be rebuilt). An
    `embedder` given is used instead of building one (another collection, the same model).

    The embedder is built on a thread of its own while the corpus and BM25 load: its runtime's
    start-up (onnxruntime's session, OpenVINO's compiled model) releases the GIL. A corpus or
    BM25 error goes up first, once the embedder's build has finished; then the embedder's, then
    the dense index's. A `reader` (a search loading what another process published) writes no
    BM25 index of its own."""
    index_backend, held = backend_for(cfg)  # chosen here, once: the session carries both
    bm25_warnings: list[str] = []
    # leaving the block waits for the build, also when a load fails (its own outcome then dropped)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="retriever-embedder") as pool:
        # in a copy of the caller's context: whatever a build reads of a client's call (guard.py's
        # FROM_CLIENT, limits.py's CANCEL) is the call's; building an embedder reads neither today
        building = (pool.submit(contextvars.copy_context().run, build_embedder, cfg)
                    if embedder is None and cfg.backend != "bm25" else None)
        docs = None
        if cfg.corpus_path is not None and held is None:  # a backend holding the documents: no corpus file here
            path = cfg.corpus_path if cfg.chunking.by == "none" else chunked_corpus(cfg)
            docs = CorpusFile.open(path, cfg.duplicate_ids, cfg.is_multimodal)
        paths = cfg.paths()
        collection = Collection(docs, ChangeLog.load(paths.docs, corpus_manifest(docs), cfg.is_multimodal))
        corpus_only = Session(cfg, collection, None, None, None, index_backend, held)  # BM25 needs no embedder
        bm25 = None if held is not None else _guard(cfg, bm25_warnings, lambda: load_bm25(corpus_only, bm25_warnings, reader))
    if building is not None:
        embedder = building.result()
    warnings: list[str] = list(embedder.warnings) if embedder else []
    draft = Session(cfg, collection, embedder, None, None, index_backend, held)
    dense = _guard(cfg, warnings, lambda: load_dense(draft, warnings))
    warnings += bm25_warnings  # after the embedder's and the dense index's, as they are read
    return Session(cfg, collection, embedder, dense, bm25, index_backend, held, tuple(warnings))


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
    return s.index_backend.load(View(s.config, s.collection, s.embedder), warnings)


def bm25_manifest(s: Session) -> dict[str, Any]:
    return {**corpus_manifest(s.docs), "log_generation": s.collection.changes.generation,
            "collection_rows": s.collection.rows}


def bm25_after(s: Session, index: BM25Index, progress: bool, rebuild: bool = True, save: bool = True) -> BM25Index:
    """`index` brought up to the session's collection: the documents added since, as a delta
    (search/bm25.py's Delta), or, past `rebuild_fraction` of changes (or for an index built before
    deltas, or one ahead of the log), BM25 rebuilt over the live documents and saved. `rebuild`
    false: a delta whatever its size (a sync rebuilds once at its end); `save` false: what must be
    rebuilt is rebuilt in memory only (a reader loading what a writer published writes nothing)."""
    c = s.collection
    built = index.manifest.get("collection_rows")
    if built is not None and index.avgdl is not None and not ahead_of_log(index, c):
        start = int(index.delta.rows[-1]) + 1 if index.delta is not None and len(index.delta) else int(built)
        new = np.flatnonzero(c.live[start:]) + start
        changed = len(new) + (len(index.delta) if index.delta is not None else 0)
        changed += int(np.count_nonzero(~c.live[index.base_rows()]))
        if not rebuild or changed <= s.config.backend_configs.bm25.rebuild_fraction * index.documents:
            return index.with_added(released(s, c.texts(new.tolist())), new) if len(new) else index
    rebuilt = build_bm25(s, progress)
    if save:
        rebuilt.save(s.config.paths().bm25, bm25_manifest(s))
    return rebuilt


def ahead_of_log(index: BM25Index, c: Collection) -> bool:
    """Built over rows or changes the change log does not have (a log restored from a backup)."""
    return bool(index.manifest.get("collection_rows", 0) > c.rows
                or index.manifest.get("log_generation", 0) > c.changes.generation)


def load_bm25(s: Session, warnings: list[str], reader: bool = False) -> BM25Index | None:
    """The saved BM25 index, with the documents added since it was built as its delta (or
    rebuilt over the live documents when the changes since pass rebuild_fraction; a `reader`
    takes the delta whatever its size and saves nothing: the writer publishes its own)."""
    bcfg = s.config.backend_configs.bm25
    folder = s.config.paths().bm25
    index = BM25Index.load(folder, bcfg)
    if index is None:
        return None
    check_manifest(index.manifest, corpus_manifest(s.docs), folder, "call bm25_index(overwrite=true)")
    if not len(s.collection):
        return None
    if index.manifest.get("log_generation", 0) != s.collection.changes.generation:
        if ahead_of_log(index, s.collection):
            warnings.append(f"{folder} was built over changes the change log does not have; rebuilt over the "
                            "live documents")
            log.warning(warnings[-1])
        index = bm25_after(s, index, progress=False, rebuild=not reader, save=not reader)
    return index


def build_bm25(s: Session, progress: bool) -> BM25Index:
    """BM25 over the live documents of the collection."""
    rows = s.collection.live_rows()
    identity = len(rows) == s.collection.rows
    return BM25Index.build(released(s, s.collection.texts(rows.tolist())), s.config.backend_configs.bm25,
                           show_progress=progress, rows=None if identity else rows.astype(np.int64))


def released(s: Session, texts: Iterator[str], every: int = 50_000) -> Iterator[str]:
    """`texts`, with the corpus file's pages let go every `every` texts (a large corpus read once
    need not stay resident)."""
    for i, text in enumerate(texts, start=1):
        yield text
        if i % every == 0 and s.docs is not None:
            s.docs.release()
    if s.docs is not None:
        s.docs.release()


def candidates(s: Session, filters: dict[str, Any] | None) -> Allowed:
    """The candidate rows (live, passing the filter, seen by the caller; None: every row) and the parsed filter."""
    return candidate_rows(s, None if filters is None else parse_filter(filters))


def candidate_rows(s: Session, f: Filter | None) -> Allowed:
    """The candidate rows of a search of a local collection: live, passing `f`, and only those the
    caller sees where security.visibility is on (security/visibility.py); None: every row."""
    rule = visibility.rule(s.config)
    if rule is None:
        return Allowed(s.collection.allowed(f), f)
    seen = Seen(s.collection.visible(rule), seen_key(rule))
    return Allowed(s.collection.allowed(f, rule), f, seen)


def seen_key(rule: visibility.Rule) -> str:
    """The name of a rule (its field, missing and groups) that what is learned from its searches is kept under."""
    field_, missing, groups = rule.key
    return f"{field_}|{missing}|{','.join(sorted(groups))}"


def reopen(s: Session, tries: int = 3) -> Session:
    """`s`'s collection loaded again; a writer that publishes during the load removes the version
    being read, so a missing file means: read the newer one."""
    for attempt in range(tries):
        try:
            return open_session(s.config, s.embedder, reader=True)
        except FileNotFoundError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def disk_stamp(cfg: Config) -> tuple[Any, ...]:
    """Each published manifest the session loads from (change log, FAISS, BM25): its inode, size
    and mtime. Publishing renames a new folder into place, so a new publish changes it; three
    stat calls per search. A manifest that was not there last time (a collection without a change
    log) is looked for with os.access, which says so without the exception os.stat raises."""
    global _stamped
    seen, names, there = _stamped
    if seen is not cfg:  # the paths of the configuration stamped last, kept (a session's config is replaced, never changed)
        paths = cfg.paths()
        names, there = _manifests(paths.docs, paths.faiss, paths.bm25), [True, True, True]
        _stamped = (cfg, names, there)
    out: list[Any] = []
    for i, name in enumerate(names):
        if not there[i] and not os.access(name, os.F_OK):
            out.append(None)
            continue
        try:
            st = os.stat(name)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
            there[i] = True
        except OSError:
            out.append(None)
            there[i] = False  # a hint only: the next call asks os.access first
    return tuple(out)


# disk_stamp's last configuration, its manifests and which of them were there
_stamped: tuple[Config | None, tuple[str, ...], list[bool]] = (None, (), [])


@functools.lru_cache(maxsize=64)
def _manifests(*folders: Path) -> tuple[str, ...]:
    """The manifest files of `folders`, as strings for os.stat: joined once, not at every search."""
    return tuple(str(folder / MANIFEST) for folder in folders)
