"""A hit with the chunks around it (Haystack's sentence window): the `window` chunks before and
after it of the same document, found by id (`<source>:<split>`, O(1) through the collection's id
map), merged into one text by their character offsets so that overlaps are not repeated."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ..store.collection import Collection
from ..types import Document, Hit

Fetch = Callable[[Sequence[str]], dict[str, Document]]  # ids -> the documents of those that exist


def neighbours(fetch: Fetch, doc: Document, before: int, after: int) -> list[Document]:
    """`doc` and up to `before` / `after` chunks of its document around it, in order; `fetch`
    reads them where the documents live (the collection, or the index backend holding them)."""
    source, split = doc.metadata.get("source_id"), doc.metadata.get("split_id")
    if source is None or not isinstance(split, int):
        return [doc]
    found = fetch([f"{source}:{n}" for n in range(split - before, split + after + 1) if n != split])
    return [doc if n == split else found[f"{source}:{n}"] for n in range(split - before, split + after + 1)
            if n == split or f"{source}:{n}" in found]


def whole(fetch: Fetch, source: str, most: int, block: int = 256) -> list[Document]:
    """All the chunks `<source>:0`, `<source>:1`, ... of a document, in order (at most `most`)."""
    out: list[Document] = []
    while len(out) < most:
        ids = [f"{source}:{n}" for n in range(len(out), min(len(out) + block, most))]
        found = fetch(ids)
        for i in ids:
            if i not in found:
                return out
            out.append(found[i])
    return out


def rows_of(collection: Collection) -> Fetch:
    """`fetch` over a collection's rows."""
    return lambda ids: {i: collection.get(collection.row_of[i]) for i in ids if i in collection.row_of}


def merge(chunks: Sequence[Document]) -> str:
    """The chunks' texts joined by offset (a sync's context line dropped): an overlap is written
    once, a gap becomes a space."""
    ordered = sorted(chunks, key=lambda d: d.metadata.get("start", 0))
    text, end = "", None
    for d in (_body(c) for c in ordered):
        start = d.metadata.get("start")
        if end is None or start is None:
            text, end = (text + " " if text else "") + d.text, (start or 0) + len(d.text)
        elif start < end:
            text += d.text[end - start:]
            end = max(end, start + len(d.text))
        else:
            text += " " + d.text
            end = start + len(d.text)
    return text


def _body(d: Document) -> Document:
    """A chunk without the context line a sync puts before its text (sources/records.py)."""
    skip = d.metadata.get("context_chars")
    return replace(d, text=d.text[skip:]) if isinstance(skip, int) and skip > 0 else d


def with_windows(fetch: Fetch, results: list[list[Hit]], window: int) -> list[list[Hit]]:
    """Each hit's text replaced by its window's; `window_ids` added to its metadata."""
    out = []
    for hits in results:
        row_hits = []
        for h in hits:
            around = neighbours(fetch, Document(h.id, h.text, h.metadata), window, window)
            row_hits.append(replace(h, text=merge(around), metadata={**h.metadata,
                                                                     "window_ids": [d.id for d in around]}))
        out.append(row_hits)
    return out
