"""A collection: the base corpus plus the documents added and deleted since, addressed by row.

Rows only grow. Rows 0..n-1 are the corpus file's records; added documents follow in the order
they came. Deleting a document tombstones its row; adding an id that exists tombstones the old
row and appends the new one (upsert). The change log (added records, their vectors, the deleted
rows) is one folder published with `persist.publish`, so a crash in the middle of an add or a
delete leaves the collection as it was before or after. Indexes derive from corpus + log: the
dense index appends the logged vectors to the corpus index, BM25 covers the live rows and
records the log generation it was built from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError, InvalidInputError
from ..filters import Filter, field_types, matches, type_warnings
from ..security.visibility import Rule
from ..types import Document
from .corpus import CorpusFile, Record, cancellable, check_image, parse_record
from .persist import check_manifest, publish, read_manifest

LOG_KIND = "changelog"


@dataclass(frozen=True)
class ChangeLog:
    """What changed since the corpus file: added documents (and their vectors), deleted rows."""

    docs: tuple[Document, ...] = ()
    vectors: np.ndarray | None = None  # (len(docs), dimension) float32; None without an embedder
    deleted: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # sorted rows
    generation: int = 0
    model: str | None = None  # the model of `vectors`

    @classmethod
    def load(cls, folder: Path, expected: dict[str, Any], images: bool = False) -> ChangeLog:
        """The published log in `folder` (an empty one if none), checked against the corpus;
        `images`: the documents are images (stored with absolute paths)."""
        manifest = read_manifest(folder)
        if manifest is None:
            return cls()
        check_manifest(manifest, expected, folder, "delete the folder to drop the added documents, "
                                                    "or restore the corpus it was made for")
        data = folder / manifest["data"]
        docs = tuple(parse_record(line, i, f"{data / 'added.jsonl'}:{i + 1}", folder if images else None)
                     for i, line in enumerate((data / "added.jsonl").read_bytes().splitlines()))
        vectors = np.load(data / "vectors.npy") if (data / "vectors.npy").is_file() else None
        return cls(docs, vectors, np.load(data / "deleted.npy"), int(manifest["generation"]), manifest.get("model"))

    def save(self, folder: Path, manifest: dict[str, Any]) -> None:
        def write(path: Path) -> None:
            path.mkdir()
            with (path / "added.jsonl").open("w", encoding="utf-8") as f:
                for d in self.docs:
                    rec = {**d.metadata, "id": d.id}
                    if rec.get("image_path") != d.text:  # an image's text is its path
                        rec["contents"] = d.text
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            if self.vectors is not None:
                np.save(path / "vectors.npy", self.vectors)
            np.save(path / "deleted.npy", self.deleted)

        publish(folder, {**manifest, "kind": LOG_KIND, "generation": self.generation, "model": self.model,
                         "dimension": None if self.vectors is None else int(self.vectors.shape[1]),
                         "added": len(self.docs), "deleted": len(self.deleted)}, write)


class Collection:
    """Row-addressed documents of the corpus and the change log; ids, texts, metadata, masks."""

    def __init__(self, base: CorpusFile | None, changes: ChangeLog = ChangeLog()) -> None:
        self.base = base
        self.changes = changes
        self.n_base = len(base) if base is not None else 0
        self.ids: list[str] = (base.ids if base is not None else []) + [d.id for d in changes.docs]
        self.live = np.ones(len(self.ids), dtype=bool)
        self.live[changes.deleted] = False
        self.all_live = not len(changes.deleted)
        self._visible: dict[tuple[str, str, frozenset[str]], np.ndarray] = {}  # per rule (security/visibility.py)

    def __len__(self) -> int:
        """Live documents."""
        return int(self.live.sum())

    @property
    def rows(self) -> int:
        """Rows ever used (live and deleted)."""
        return len(self.ids)

    @cached_property
    def row_of(self) -> dict[str, int]:
        """Id -> live row (built on first use: only adds and deletes need it)."""
        return {self.ids[row]: row for row in np.flatnonzero(self.live).tolist()}

    def get(self, row: int) -> Document:
        if row < self.n_base:
            return self.base.get(row)  # type: ignore[union-attr]
        return self.changes.docs[row - self.n_base]

    def records(self, rows: Sequence[int]) -> list[Record]:
        """Id, text and metadata of each of `rows`: the corpus's in one pass (CorpusFile.records)."""
        n, added = self.n_base, self.changes.docs
        base = iter(self.base.records([r for r in rows if r < n]) if self.base is not None else ())
        return [next(base) if r < n else ((d := added[r - n]).id, d.text, d.metadata) for r in rows]

    def texts(self, rows: Iterable[int]) -> Iterator[str]:
        for row in rows:
            yield self.get(row).text

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.live)

    def live_added(self) -> tuple[list[Document], np.ndarray | None]:
        """The added documents still live, with their vectors (None without an embedder)."""
        live = np.flatnonzero(self.live[self.n_base:])
        vectors = self.changes.vectors[live] if self.changes.vectors is not None else None
        return [self.changes.docs[i] for i in live.tolist()], vectors

    def mask(self, f: Filter) -> np.ndarray:
        """Live rows that pass the filter (the corpus part is cached by the corpus store)."""
        base = self.base.mask(f) if self.base is not None else np.empty(0, bool)
        docs = self.changes.docs
        added = np.fromiter((matches(f, docs[i].id, docs[i].metadata) for i in cancellable(len(docs))), dtype=bool,
                            count=len(docs))
        return np.concatenate([base, added]) & self.live

    def field_warnings(self, spec: Any) -> list[str]:
        """Why a filter cannot match here (filters.type_warnings); none for a collection whose
        documents live in the index backend (Milvus demo mode), which this cannot see."""
        if not self.rows:
            return []
        types = {k: set(v) for k, v in (self.base.field_types() if self.base is not None else {}).items()}
        return type_warnings(spec, field_types((d.metadata for d in self.changes.docs), types))

    def allowed(self, f: Filter | None, rule: Rule | None = None) -> np.ndarray | None:
        """The candidate rows of a search: None when every row may be returned. With `rule` (a caller
        that sees only some documents), only the rows it sees: a hidden row never reaches a ranking."""
        rows = (None if self.all_live else self.live) if f is None else self.mask(f)
        if rule is None:
            return rows
        seen = self.visible(rule)
        return seen if rows is None else rows & seen

    def visible(self, rule: Rule) -> np.ndarray:
        """Live rows `rule` sees, kept per rule (a collection is one generation: a write makes a new one)."""
        cached = self._visible.get(rule.key)
        if cached is None:
            seen = np.fromiter((rule.sees(self.get(row).metadata) for row in cancellable(self.rows)), dtype=bool,
                               count=self.rows)
            cached = seen & self.live
            if len(self._visible) >= 64:  # groups of many callers: the oldest dropped
                self._visible.pop(next(iter(self._visible)))
            self._visible[rule.key] = cached
        return cached

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = self.base.info() if self.base is not None else {"path": None}
        out.update(documents=len(self), added=len(self.changes.docs), deleted=len(self.changes.deleted))
        return out

    # ---- changes (new logs; nothing is written here) -------------------------------------------

    def with_added(self, docs: Sequence[Document], vectors: np.ndarray | None, model: str | None) -> ChangeLog:
        """The log after adding `docs`: an id that is live already is replaced (upsert)."""
        log = self.changes  # the change log so far
        if (log.vectors is None) != (vectors is None) and log.docs:
            raise InvalidInputError("the collection's added documents were stored without vectors (backend bm25);"
                                    " use the same backend for every add")
        if log.docs and log.model != model:
            raise InvalidInputError(f"the collection's added documents were embedded with {log.model!r}, this "
                                    f"session uses {model!r}; use the same model for every add")
        replaced = [self.row_of[d.id] for d in docs if d.id in self.row_of]
        stacked = vectors if log.vectors is None else np.concatenate([log.vectors, vectors])
        return ChangeLog(log.docs + tuple(docs), stacked, _union(log.deleted, replaced), log.generation + 1, model)

    def with_changes(self, docs: Sequence[Document], vectors: np.ndarray | None, model: str | None,
                     deleted: Iterable[int]) -> ChangeLog:
        """`docs` added and `deleted` rows tombstoned in one new log: a reader sees both or neither."""
        log = self.with_added(docs, vectors, model) if docs else self.with_deleted(())
        return replace(log, deleted=_union(log.deleted, deleted))

    def with_deleted(self, rows: Iterable[int]) -> ChangeLog:
        log = self.changes  # the change log so far
        return ChangeLog(log.docs, log.vectors, _union(log.deleted, rows), log.generation + 1, log.model)


def _union(deleted: np.ndarray, rows: Iterable[int]) -> np.ndarray:
    return np.union1d(deleted, np.fromiter(rows, dtype=np.int64)).astype(np.int64)


def parse_documents(documents: Any, images: Path | None = None,
                    inside: Callable[[str, str], Path] | None = None) -> list[Document]:
    """Tool input -> Documents: each `{"id", "contents"}` or `{"id", "title", "text"}`, other
    fields as metadata (or a `metadata` object); ids required and unique within the call. With
    `images` (the folder relative paths start from), each is an image `{"id", "image_path"}`, its
    file checked by `inside(path, what)` (the allowed folders) before it is opened."""
    if not isinstance(documents, list) or not documents:
        raise InvalidInputError("documents must be a non-empty list of objects with 'id' and 'contents'")
    out, seen = [], set()
    for i, rec in enumerate(documents):
        where = f"documents[{i}]"
        if not isinstance(rec, dict) or ("id" not in rec and "_id" not in rec):
            raise InvalidInputError(f"{where}: each document needs an 'id' (and 'contents' or 'title'/'text')")
        meta = rec.get("metadata")
        flat = {**meta, **{k: v for k, v in rec.items() if k != "metadata"}} if isinstance(meta, dict) else rec
        try:
            doc = parse_record(json.dumps(flat), i, where, images)
        except CorpusError as e:  # the same checks and messages as for a corpus line
            raise InvalidInputError(str(e)) from None
        if doc.id in seen:
            raise InvalidInputError(f"{where}: duplicate id {doc.id!r} in this call")
        if images is not None:
            if inside is not None:
                inside(doc.text, f"{where}.image_path")
            try:
                check_image(doc, where, None)
            except CorpusError as e:
                raise InvalidInputError(str(e)) from None
        seen.add(doc.id)
        out.append(doc)
    return out

