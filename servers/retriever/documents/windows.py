"""A hit with the chunks around it (Haystack's sentence window): the `window` chunks before and
after it of the same document, found by id (`<source>:<split>`, O(1) through the collection's id
map), merged into one text by their character offsets so that overlaps are not repeated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..store.collection import Collection
from ..types import Document, Hit


def neighbours(collection: Collection, doc: Document, before: int, after: int) -> list[Document]:
    """`doc` and up to `before` / `after` chunks of its document around it, in order."""
    source, split = doc.metadata.get("source_id"), doc.metadata.get("split_id")
    if source is None or not isinstance(split, int):
        return [doc]
    out = []
    for n in range(split - before, split + after + 1):
        row = collection.row_of.get(f"{source}:{n}") if n != split else None
        if n == split:
            out.append(doc)
        elif row is not None:
            out.append(collection.get(row))
    return out


def merge(chunks: Sequence[Document]) -> str:
    """The chunks' texts joined by offset: an overlap is written once, a gap becomes a space."""
    ordered = sorted(chunks, key=lambda d: d.metadata.get("start", 0))
    text, end = "", None
    for d in ordered:
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


def with_windows(collection: Collection, results: list[list[Hit]], window: int) -> list[list[Hit]]:
    """Each hit's text replaced by its window's; `window_ids` added to its metadata."""
    out = []
    for hits in results:
        row_hits = []
        for h in hits:
            around = neighbours(collection, collection.get(h.row), window, window)
            row_hits.append(replace(h, text=merge(around), metadata={**h.metadata,
                                                                     "window_ids": [d.id for d in around]}))
        out.append(row_hits)
    return out
