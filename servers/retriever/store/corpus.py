"""The corpus: a JSONL file read as a stream, and a row-addressed store over it.

Records are UltraRAG `{"id", "contents"}` or BEIR `{"_id", "title", "text"}` (title and text
joined by a space); other fields are kept as metadata. A record without an id gets its row
number. An image corpus (`is_multimodal`) holds `{"id", "image_path"}` records, the path relative
to the corpus file's folder (as UltraRAG's corpus server writes them): the document's text is the
image's absolute path, which the embedder reads (embedders/images.py) and search returns.

The store keeps only ids and byte offsets in memory and reads a document's text from the
memory-mapped file when a hit needs it.
"""

from __future__ import annotations

import hashlib
import json
import mmap
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic_core import from_json

from ..errors import CorpusError
from ..filters import Filter, field_types, matches
from ..security.limits import check_cancel
from ..types import Document

MASK_CACHE = 16  # filters whose row masks stay cached per corpus
CANCEL_EVERY = 4096  # documents a filter is evaluated on between two looks at the caller's cancel

Record = tuple[str, str, dict[str, Any]]  # a document's id, text and metadata

_ID_KEYS = ("id", "_id")
# the keys a record's metadata leaves out: a record with `contents` keeps its title (it is not in
# the text); BEIR's title is in the text
_CONTENTS_DROPPED = (*_ID_KEYS, "contents", "text")
_BEIR_DROPPED = (*_ID_KEYS, "title", "text")


def parse_record(raw: bytes | str, row: int, where: str, images: Path | None = None) -> Document:
    """One JSONL line -> Document; `where` (file:line) goes into every error. With `images` (the
    folder image paths are relative to) the record is an image."""
    return Document(*record_fields(raw, row, where, images))


def record_fields(raw: bytes | str, row: int, where: str, images: Path | None = None) -> Record:
    """One JSONL line -> its id, text and metadata (parse_record's Document, without the object:
    a search's hits are made from these)."""
    try:
        try:
            rec = from_json(raw)  # pydantic-core's parser: a SciFact line in a sixth of json.loads' time
        except ValueError:  # not JSON (or a lone surrogate): json.loads says where, or reads it
            rec = json.loads(raw)
    except json.JSONDecodeError as e:
        raise CorpusError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise CorpusError(f"{where}: not UTF-8 (byte 0x{e.object[e.start]:02x} at column {e.start + 1}); "
                          "convert the file to UTF-8") from None
    if not isinstance(rec, dict):
        raise CorpusError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
    if images is not None:
        return _image_record(rec, row, where, images)
    if "contents" in rec:
        text, dropped = rec["contents"], _CONTENTS_DROPPED
    elif "text" in rec or "title" in rec:
        title, body = rec.get("title") or "", rec.get("text") or ""
        if not (isinstance(title, str) and isinstance(body, str)):
            raise CorpusError(f"{where}: 'title' and 'text' must be strings")
        text, dropped = (f"{title} {body}" if title and body else title or body), _BEIR_DROPPED
    else:
        hint = "; an image record: set is_multimodal: true" if "image_path" in rec else ""
        raise CorpusError(
            f"{where}: no text field; a record needs 'contents' (UltraRAG) or 'title'/'text' (BEIR),"
            f" found keys {sorted(rec)}{hint}"
        )
    if not isinstance(text, str):
        raise CorpusError(f"{where}: the text field must be a string, got {type(text).__name__}")
    doc_id = _record_id(rec, row, where)
    for key in dropped:  # the parser's fresh dict, ours to change: what stays is the metadata, in order
        rec.pop(key, None)
    return doc_id, text, rec


def _record_id(rec: dict[str, Any], row: int, where: str) -> str:
    raw_id = rec["id"] if "id" in rec else rec.get("_id", row)
    if type(raw_id) is str:
        return raw_id
    if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
        raise CorpusError(f"{where}: the id must be a string or an integer, got {raw_id!r}")
    return str(raw_id)


def _image_record(rec: dict[str, Any], row: int, where: str, images: Path) -> Record:
    """An image record: text and metadata `image_path` are the image's absolute path; other
    fields (a caption in `contents`, UltraRAG's `image_id`) are metadata."""
    rel = rec.get("image_path")
    if not isinstance(rel, str) or not rel:
        raise CorpusError(f"{where}: no 'image_path'; with is_multimodal every record is an image "
                          f"({{\"id\", \"image_path\"}}, the path relative to the corpus file's folder), found keys "
                          f"{sorted(rec)}; keep text records in a corpus of their own")
    path = str((images / rel).resolve())
    metadata = {k: v for k, v in rec.items() if k not in _ID_KEYS} | {"image_path": path}
    return _record_id(rec, row, where), path, metadata


def check_image(doc: Document, where: str, root: Path | None) -> None:
    """An image record's file: inside `root` (if given), present, and an image PIL can open (the
    header is read; a file damaged further in is named when it is embedded)."""
    from PIL import Image, UnidentifiedImageError

    path = Path(doc.text)
    if root is not None and not path.is_relative_to(root.resolve()):
        raise CorpusError(f"{where}: the image {path} lies outside {root}; images must lie in the corpus file's "
                          "folder or below it")
    try:
        with Image.open(path) as im:
            im.size  # noqa: B018 - the header parsed
    except FileNotFoundError:
        raise CorpusError(f"{where}: image not found: {path}") from None
    except (UnidentifiedImageError, OSError) as e:
        raise CorpusError(f"{where}: cannot read the image {path}: {e}") from None


def iter_lines(path: Path, digest: Any = None) -> Iterator[tuple[int, int, bytes]]:
    """(line number from 1, byte offset, line) for every non-blank line; feeds `digest` all bytes."""
    offset = 0
    with path.open("rb") as f:
        for lineno, line in enumerate(f, start=1):
            if digest is not None:
                digest.update(line)
            if line.strip():
                yield lineno, offset, line
            offset += len(line)


class CorpusFile:
    """Ids and byte offsets of every record; texts are read on demand."""

    def __init__(self, path: Path, ids: list[str], starts: np.ndarray, ends: np.ndarray, fingerprint: str,
                 images: Path | None = None):
        self.path = path
        self.images = images  # an image corpus: the folder its image paths are relative to
        self.ids = ids
        self._starts = starts
        self._ends = ends
        self.fingerprint = fingerprint
        self._file = path.open("rb")
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self._masks: dict[Filter, np.ndarray] = {}
        self._field_types: dict[str, set[str]] | None = None

    @classmethod
    def open(cls, path: str | Path, duplicate_ids: str = "error", images: bool = False) -> CorpusFile:
        """Validate the whole file in one streaming pass; record ids, offsets and a sha256.
        A repeated id is an error, or with `duplicate_ids="number"` its n-th repeat is `<id>#<n>`
        (UltraRAG's chunked corpora repeat a document's id in its chunks). With `images`, every
        record is an image (checked to exist and open)."""
        path = Path(path)
        if not path.is_file():
            raise CorpusError(f"corpus file not found: {path} (set corpus_path in parameter.yaml)")
        folder = path.parent if images else None
        digest = hashlib.sha256()
        ids: list[str] = []
        seen: dict[str, int] = {}
        starts: list[int] = []
        ends: list[int] = []
        for lineno, offset, line in iter_lines(path, digest):
            doc = parse_record(line, len(ids), f"{path}:{lineno}", folder)
            if folder is not None:
                check_image(doc, f"{path}:{lineno}", folder)
            doc_id = doc.id
            if doc_id in seen:
                if duplicate_ids != "number":
                    raise CorpusError(f"{path}:{lineno}: duplicate id {doc_id!r} (first seen on line {seen[doc_id]}); "
                                      "ids must be unique, or set duplicate_ids: number")
                repeat = 1
                while f"{doc.id}#{repeat}" in seen:
                    repeat += 1
                doc_id = f"{doc.id}#{repeat}"
            seen[doc_id] = lineno
            ids.append(doc_id)
            starts.append(offset)
            ends.append(offset + len(line))
        if not ids:
            raise CorpusError(f"{path}: the corpus is empty (no records)")
        return cls(path, ids, np.asarray(starts, np.int64), np.asarray(ends, np.int64), digest.hexdigest(), folder)

    def __len__(self) -> int:
        return len(self.ids)

    def get(self, row: int) -> Document:
        raw = self._map[int(self._starts[row]) : int(self._ends[row])]
        doc = parse_record(raw, row, f"{self.path}:row {row}", self.images)
        return doc if doc.id == self.ids[row] else replace(doc, id=self.ids[row])  # a numbered repeat

    def records(self, rows: Sequence[int]) -> list[Record]:
        """Id, text and metadata of each of `rows`, as `get` reads them, the offsets read in one
        numpy call (a search's hits)."""
        at = np.asarray(rows, dtype=np.int64)
        where, ids, data, images = f"{self.path}:row ", self.ids, self._map, self.images
        out = []
        for row, start, end in zip(rows, self._starts[at].tolist(), self._ends[at].tolist()):
            _, text, metadata = record_fields(data[start:end], row, f"{where}{row}", images)
            out.append((ids[row], text, metadata))  # ids[row]: a numbered repeat's, as get gives
        return out

    def texts(self, rows: Iterable[int] | None = None) -> Iterator[str]:
        """Texts of `rows` (default: every row in order), read from the file as a stream."""
        for row in range(len(self)) if rows is None else rows:
            yield self.get(row).text

    def release(self) -> None:
        """Drop the file's pages read so far from this process's memory (they are read again from
        the file when needed): a pass over a large corpus does not keep it all resident."""
        if hasattr(mmap, "MADV_DONTNEED") and len(self._map):
            self._map.madvise(mmap.MADV_DONTNEED)

    def mask(self, f: Filter) -> np.ndarray:
        """Rows that pass the filter (a boolean array), read in one pass and kept for the next
        calls with the same filter (a few at a time)."""
        cached = self._masks.get(f)
        if cached is None:
            cached = np.fromiter((matches(f, d.id, d.metadata) for d in map(self.get, cancellable(len(self)))),
                                 dtype=bool, count=len(self))
            if len(self._masks) >= MASK_CACHE:
                self._masks.pop(next(iter(self._masks)))
            self._masks[f] = cached
        return cached

    def field_types(self) -> dict[str, set[str]]:
        """`meta.<key>` -> the JSON types of its values over the corpus (one pass, kept)."""
        if self._field_types is None:
            self._field_types = field_types(self.get(row).metadata for row in range(len(self)))
        return self._field_types

    def sizes(self) -> np.ndarray:
        """Bytes of each record: a free proxy for its length in tokens."""
        return self._ends - self._starts

    def info(self) -> dict[str, Any]:
        return {"path": str(self.path), "documents": len(self), "fingerprint": self.fingerprint}


def cancellable(count: int) -> Iterator[int]:
    """0 .. count - 1, stopping (CancelledWork) when the caller cancels or goes away: a filter's pass
    over the documents is cancellable like a search."""
    for start in range(0, count, CANCEL_EVERY):
        check_cancel("a filter's pass over the documents")
        yield from range(start, min(start + CANCEL_EVERY, count))
