"""Where a session's documents live, chosen once when the session opens (`Session.held`): in the
local corpus and change log (`Local`: the vector index and BM25 follow the log), or in the index
backend itself (`Held`: Milvus with is_demo or full_text, indexes.base.HeldDocuments). Writes,
reads and searches go through one of the two; nothing else asks which."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn, Protocol

import numpy as np

from ..errors import AlreadyExistsError, ForbiddenError, IndexMissingError, NotYetSupportedError
from ..filters import Filter
from ..indexes import HeldDocuments, View
from ..indexes.milvus.sparse import RECORD as SPARSE_RECORD
from ..search import learned_sparse, run
from ..search.kinds import held_search
from ..search.spec import Spec
from ..security import visibility
from ..security.limits import caller_progress
from ..session import Session, bm25_manifest, build_bm25
from ..store.catalog import remember_corpus
from ..store.persist import read_manifest
from ..types import Document, Hits
from . import changes

Report = dict[str, Any]


class Documents(Protocol):
    def add(self, s: Session, docs: Sequence[Document], progress: bool) -> tuple[Session, Report]:
        """Embed `docs` with the session's model and add them; an id that exists is replaced."""
        ...

    def delete(self, s: Session, ids: Sequence[str], f: Filter | None, progress: bool) -> tuple[Session, Report]:
        """Delete by id and/or filter; ids not found are reported."""
        ...

    def get(self, s: Session, ids: Sequence[str]) -> dict[str, Document]:
        """The documents of `ids` that exist, by id."""
        ...

    def search(self, s: Session, spec: Spec) -> Hits:
        """Per query, its top `spec.k` hits from its ranker (the kind and its options) among what its filter leaves."""
        ...

    def rows(self, s: Session, tool: str) -> None:
        """Raise where `tool` needs the documents as local rows (a corpus file and change log here)."""
        ...

    def text_documents(self, s: Session) -> int | None:
        """How many documents BM25 ranks (None: no BM25 index)."""
        ...

    def bm25_index(self, s: Session, overwrite: bool, progress: bool) -> tuple[Session, Report]:
        """BM25 over the documents (bm25_index): the next session and the report."""
        ...


PIECE = 8  # embedding batches per progress step: a server's 8 requests in flight, the local model's sorted pieces


def embedded(s: Session, texts: list[str]) -> np.ndarray:
    """The passages' vectors. A caller who asked for progress (an MCP progressToken:
    limits.caller_progress) hears of them PIECE embedding batches at a time (done, total: chunks
    embedded), at most every PROGRESS_EVERY seconds, the last always."""
    assert s.embedder is not None
    report = caller_progress()
    if report is None:
        return s.embedder.encode_passages(texts)
    step, parts = s.config.batch_size * PIECE, []
    for start in range(0, len(texts), step):
        parts.append(s.embedder.encode_passages(texts[start : start + step]))
        report(min(start + step, len(texts)), len(texts), "chunks embedded")
    return np.concatenate(parts) if parts else s.embedder.encode_passages(texts)


class Local:
    """The corpus file and the change log hold the documents; the indexes follow the log (changes.py)."""

    def add(self, s: Session, docs: Sequence[Document], progress: bool) -> tuple[Session, Report]:
        _may_write(s, docs)
        vectors = embedded(s, [d.text for d in docs]) if s.embedder is not None else None
        replaced = sum(d.id in s.collection.row_of for d in docs)
        model = s.embedder.model_id if s.embedder is not None else None
        nxt = changes.commit(s, s.collection.with_added(docs, vectors, model), progress)
        return nxt, {"added": len(docs) - replaced, "replaced": replaced,
                     "documents": _count(nxt, visibility.rule(s.config))}

    def delete(self, s: Session, ids: Sequence[str], f: Filter | None, progress: bool) -> tuple[Session, Report]:
        c, rule = s.collection, visibility.rule(s.config)
        seen = c.live if rule is None else c.visible(rule)  # a document the caller cannot see is not found
        rows = {c.row_of[i] for i in ids if i in c.row_of and seen[c.row_of[i]]}
        if f is not None:
            rows.update(np.flatnonzero(c.mask(f) & seen).tolist())
        nxt = changes.commit(s, c.with_deleted(rows), progress) if rows else s
        return nxt, {"deleted": len(rows), "not_found": [i for i in ids if i not in c.row_of or not seen[c.row_of[i]]],
                     "documents": _count(nxt, rule)}

    def get(self, s: Session, ids: Sequence[str]) -> dict[str, Document]:
        """The documents of `ids` the caller sees: a hidden one is as missing (security/visibility.py)."""
        c, rule = s.collection, visibility.rule(s.config)
        found = {i: c.get(c.row_of[i]) for i in ids if i in c.row_of}
        return found if rule is None else {i: d for i, d in found.items() if rule.sees(d.metadata)}

    def search(self, s: Session, spec: Spec) -> Hits:
        return run.search(s, spec)

    def rows(self, s: Session, tool: str) -> None:
        return None

    def text_documents(self, s: Session) -> int | None:
        return s.bm25.live_documents(s.collection.live) if s.bm25 is not None else None

    def bm25_index(self, s: Session, overwrite: bool, progress: bool) -> tuple[Session, Report]:
        folder = s.config.paths().bm25
        if s.docs is None and s.bm25 is not None and not overwrite:  # built with its first add; follows the log
            return s, {"save_path": str(folder), **s.bm25.manifest, "documents": len(s.collection),
                       "lang": s.config.backend_configs.bm25.lang, "up_to_date": True}
        if read_manifest(folder) is not None and not overwrite:
            raise AlreadyExistsError(f"a BM25 index exists at {folder}; pass overwrite=true to rebuild it")
        if not len(s.collection):
            raise IndexMissingError("the collection has no documents; set corpus_path or call retriever_add")
        index = build_bm25(s, progress)
        manifest = bm25_manifest(s)
        remember_corpus(s.config)
        index.save(folder, manifest)
        return replace(s, bm25=index), {"save_path": str(folder), **manifest, "documents": len(s.collection),
                                        "lang": s.config.backend_configs.bm25.lang}


class Held:
    """The index backend holds the documents (no corpus or change log here): everything goes to it,
    as the caller sees it (HeldDocuments.seen_by: the backend applies security.visibility)."""

    def __init__(self, store: HeldDocuments) -> None:
        self.store = store

    def add(self, s: Session, docs: Sequence[Document], progress: bool) -> tuple[Session, Report]:
        if s.embedder is None:
            raise NotYetSupportedError("the index backend holds the documents and their vectors: use an embedding "
                                       "backend, not 'bm25'")
        rule = visibility.rule(s.config)
        if rule is not None:  # the local rules (_may_write): its own groups only, and nothing it cannot see replaced
            visibility.check_written(s.config, (d.metadata for d in docs), "writing documents")
            if any(not rule.sees(d.metadata) for d in self.store.get(s.dense, [d.id for d in docs])):
                _not_replaced(rule)
        vectors = embedded(s, [d.text for d in docs])
        view = View(s.config, s.collection, s.embedder, learned_sparse.encoder_of(s.config))
        index, replaced = self.store.upsert(view, s.dense, docs, vectors)
        return replace(s, dense=index), {"added": len(docs) - replaced, "replaced": replaced,
                                         "documents": self.store.seen_by(rule).count(index)}

    def delete(self, s: Session, ids: Sequence[str], f: Filter | None, progress: bool) -> tuple[Session, Report]:
        seen = self.store.seen_by(visibility.rule(s.config))  # a document the caller cannot see is not found
        deleted, not_found = seen.delete(s.dense, ids, f)
        return s, {"deleted": deleted, "not_found": not_found, "documents": seen.count(s.dense)}

    def get(self, s: Session, ids: Sequence[str]) -> dict[str, Document]:
        """The documents of `ids` the caller sees: a hidden one is as missing."""
        return {d.id: d for d in self.store.seen_by(visibility.rule(s.config)).get(s.dense, ids)}

    def search(self, s: Session, spec: Spec) -> Hits:
        return held_search(s, self.store, spec)

    def rows(self, s: Session, tool: str) -> None:
        raise NotYetSupportedError(f"{tool} needs a corpus here, not documents kept in the index backend only: set "
                                   "is_demo: false and full_text: false")

    def text_documents(self, s: Session) -> int | None:
        return self.store.text_index(s.dense)

    def bm25_index(self, s: Session, overwrite: bool, progress: bool) -> tuple[Session, Report]:
        """Nothing to build: the backend fills its BM25 field as documents are written (full_text)."""
        held = self.text_documents(s)
        if held is None:
            raise NotYetSupportedError("demo mode keeps the documents only in Milvus, without BM25: set "
                                       "index_backend_configs.milvus.full_text: true (Milvus 2.5 or later), or "
                                       "is_demo: false to keep a corpus here")
        return s, {"collection": s.config.collection_name or "default", "full_text": True, "documents": held,
                   "lang": s.config.backend_configs.bm25.lang}


def _may_write(s: Session, docs: Sequence[Document]) -> None:
    """A caller that sees only some documents writes what its groups may see, and replaces none it cannot see."""
    rule = visibility.rule(s.config)
    if rule is None:
        return
    visibility.check_written(s.config, (d.metadata for d in docs), "writing documents")
    c = s.collection
    seen = c.visible(rule)
    if any(d.id in c.row_of and not seen[c.row_of[d.id]] for d in docs):
        _not_replaced(rule)


def _not_replaced(rule: visibility.Rule) -> NoReturn:
    raise ForbiddenError(f"writing documents: an id of this call names a document this caller ({rule.name}) may "
                         "not replace (security.visibility); choose other ids")


def _count(s: Session, rule: visibility.Rule | None) -> int:
    """The documents a reply tells of: those the caller sees."""
    return len(s.collection) if rule is None else int(s.collection.visible(rule).sum())


def held_sparse_index(s: Session) -> Report:
    """sparse_index where the backend holds the documents: nothing to build, it keeps each
    document's learned-sparse vector, written with the document (indexes/milvus/sparse.py)."""
    learned_sparse.SparseModel.of(s.config.sparse)  # names the setting where there is no sparse model
    saved = s.dense.manifest.get(SPARSE_RECORD) if s.dense is not None else None
    if saved is None:
        raise IndexMissingError("the index backend holds the documents and writes their learned-sparse vectors with "
                                "them: call retriever_index(overwrite=true) to build the collection with "
                                "sparse.model_name_or_path (a collection made without it has none)")
    return {"collection": s.config.collection_name or "default", "learned_sparse": True,
            "documents": len(s.dense) if s.dense is not None else 0, "model": saved.get("model")}


LOCAL = Local()


def documents_of(s: Session) -> Documents:
    """The session's documents: the one place that tells the two apart."""
    return LOCAL if s.held is None else Held(s.held)
