"""Stored content read back by id (the agent's get_document) within the reply budget: repeated ids
collapsed, at most `limits.max_ids` distinct ids a call, documents sent in order while the reply
fits, and a document too large for the budget sent alone with its text cut. A cut reply says where
to go on (`next_offset` into the ids, `next_start` into the text), and the next page always starts
further on, so a caller paging through never loops."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..security.limits import check_cancel, check_count
from ..types import Payload
from .replies import Shape, _size, cut_text

if TYPE_CHECKING:
    from ..documents.windows import Fetch
    from ..engine.retriever import Retriever

BLOCK = 64  # ids fetched at a time: a page that fills early reads no further


def budget(engine: Retriever) -> int:
    """The reply budget of a tool that returns stored content: reply.max_bytes, over HTTP at most
    what the stock client accepts (0: none)."""
    return Shape.of(engine.base_config.reply, engine.shared, 0, None, None, True, True).max_bytes


def distinct(ids: list[str], limit: int) -> list[str]:
    """`ids` with repeats dropped (first place kept), refused over `limit` (limits.max_ids)."""
    out = list(dict.fromkeys(ids))
    check_count("get_document: distinct ids", len(out), "max_ids", limit,
                "ask for fewer ids per call (a search's hits carry their text already)")
    return out


def get_documents(engine: Retriever, ids: list[str], offset: int, start: int, around: int,
                  collection: str | None) -> Payload:
    """`documents` (from the id at `offset` on, the first one's text from character `start`) and
    `missing`, within the reply budget; `truncated` says how to read the rest."""
    ids = distinct(ids, engine.config.limits.max_ids)
    most = budget(engine)
    fetch = engine.fetcher("get_document", collection)
    docs: list[dict[str, Any]] = []
    missing: list[str] = []
    used = 0
    for first in range(offset, len(ids), BLOCK):
        block = ids[first:first + BLOCK]
        found = fetch(block)
        for i, doc_id in enumerate(block, first):
            check_cancel("get_document")
            skip = start if i == offset else 0
            entry = _entry(engine, fetch, found, doc_id, around, skip)
            size = _size(entry if entry is not None else doc_id) + 1
            if most and used + size > most:
                if docs or missing:  # the page is full: this id starts the next one
                    return _page(docs, missing, most, i, skip)
                if entry is None:  # an id alone over the budget: named as missing, its head
                    missing.append(cut_text(doc_id, most))
                    continue
                entry, sent = _cut(entry, most)
                docs.append(entry)
                if sent < 0:  # its text went whole (its metadata or context was cut)
                    return _page(docs, missing, most, i + 1, 0) if i + 1 < len(ids) else _page(docs, missing, most)
                return _page(docs, missing, most, i, skip + sent)
            if entry is None:
                missing.append(doc_id)
            else:
                docs.append(entry)
            used += size
    return {"documents": docs, "missing": missing}


def _entry(engine: Retriever, fetch: Fetch, found: dict[str, Any], doc_id: str, around: int,
           skip: int) -> dict[str, Any] | None:
    """One document's reply entry (None: no such document), its text from character `skip`: a
    stored document (with `around` chunks of context), or a file's id, its chunks merged."""
    from ..documents.windows import merge, neighbours, whole

    doc = found.get(doc_id)
    if doc is None:
        chunks = whole(fetch, doc_id, engine.config.limits.max_chunks)
        if not chunks:
            return None
        meta = {k: v for k, v in chunks[0].metadata.items() if k not in ("start", "end", "split_id", "page", "heading")}
        return {"id": doc_id, "text": merge(chunks)[skip:], "metadata": {**meta, "chunks": len(chunks)}}
    entry: dict[str, Any] = {"id": doc.id, "text": doc.text[skip:], "metadata": doc.metadata}
    if around:
        chunks = neighbours(fetch, doc, around, around)
        entry["context"] = {"ids": [d.id for d in chunks], "text": merge(chunks)}
    return entry


def _cut(entry: dict[str, Any], room: int) -> tuple[dict[str, Any], int]:
    """`entry` cut to `room` bytes of JSON: its metadata emptied where that alone is over, its text
    cut to what is left (at least one character, so paging progresses), then its context's text.
    And the characters of its text sent, -1 where the text went whole."""
    out = {**entry, "text": ""}
    if "context" in out:
        out["context"] = {**out["context"], "text": ""}
    if _size(out) > room:
        out["metadata"] = {}
        out["metadata_cut"] = True
    text = cut_text(entry["text"], room - _size(out) + 2) or entry["text"][:1]
    out["text"] = text
    if "context" in out:
        out["context"]["text"] = cut_text(entry["context"]["text"], room - _size(out) + 2)
        if len(out["context"]["text"]) < len(entry["context"]["text"]):
            out["context_cut"] = True
    return out, (-1 if len(text) == len(entry["text"]) else len(text))


def _page(docs: list[dict[str, Any]], missing: list[str], most: int, next_offset: int | None = None,
          next_start: int = 0) -> Payload:
    out: Payload = {"documents": docs, "missing": missing}
    if next_offset is None:
        return {**out, "truncated": _note(most, None, 0)} if any("metadata_cut" in d for d in docs) else out
    return {**out, "truncated": _note(most, next_offset, next_start)}


def _note(most: int, next_offset: int | None, next_start: int) -> dict[str, Any]:
    how = f"the reply budget ({most} bytes) was reached"
    if next_offset is None:
        return {"how": f"{how}: a document's metadata alone was over it and was left out (metadata_cut)"}
    return {"next_offset": next_offset, "next_start": next_start,
            "how": f"{how}; call get_document again with the same ids, offset={next_offset} and start={next_start} "
                   "for the rest (a document marked metadata_cut or context_cut had that part over the budget "
                   "and left out)"}
