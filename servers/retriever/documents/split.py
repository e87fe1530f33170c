"""Splitting a document's text into chunks with character offsets: by sentence (pysbd, rule-based,
no model download), by word or by passage (blank lines), `length` units per chunk and `overlap`
units shared with the previous chunk; and a hierarchy (Haystack's hierarchical splitter): chunks
of `levels[0]` units, each split into chunks of `levels[1]`, ... with parent and level.

A chunk record (`chunk_records`) keeps the document's fields and adds `source_id`, `split_id`,
`start`, `end` (offsets in the document's text), `level`, `parent_id` and `children_ids`; its
id is
`<source id>:<split id>`."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..config import ChunkingConfig
from ..errors import InvalidInputError, MissingDependencyError
from ..security.limits import check_cancel

EVERY = 4096  # units or chunks between two looks at the caller's cancellation

SplitBy = Literal["sentence", "word", "passage"]
Span = tuple[int, int]
_WORD = re.compile(r"\S+")
_PASSAGE = re.compile(r"\S(?:.*?\S)?(?=\s*\n\s*\n|\s*$)", re.DOTALL)


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    level: int = 0
    parent: int | None = None  # position of the parent chunk in the same list


def units(text: str, by: SplitBy) -> list[Span]:
    """The spans of `text`'s sentences, words or passages, in order."""
    if by in ("word", "passage"):
        found: list[Span] = []
        for m in (_WORD if by == "word" else _PASSAGE).finditer(text):
            found.append(m.span())
            if len(found) % EVERY == 0:
                check_cancel("chunking")
        return found
    try:
        import pysbd
    except ImportError as e:
        raise MissingDependencyError("pysbd", "mcp-retriever[docs]") from e
    spans = []
    for s in pysbd.Segmenter(language="en", clean=False, char_span=True).segment(text):
        stripped = s.sent.strip()
        if stripped:
            start = s.start + s.sent.index(stripped[0])
            spans.append((start, start + len(stripped)))
    return spans


def windows(spans: Sequence[Span], length: int, overlap: int, most: int | None = None) -> list[Span]:
    """Consecutive groups of `length` spans, each sharing `overlap` with the previous one (no more
    than `most` + 1: enough to tell a caller the text is over its limit)."""
    if length < 1 or not 0 <= overlap < length:
        raise InvalidInputError(f"chunking: length must be at least 1 and overlap in 0..length-1 "
                                f"(got length {length}, overlap {overlap})")
    out: list[Span] = []
    step = length - overlap
    for first in range(0, len(spans), step):
        group = spans[first : first + length]
        out.append((group[0][0], group[-1][1]))
        if first + length >= len(spans) or (most is not None and len(out) > most):
            break
        if len(out) % EVERY == 0:
            check_cancel("chunking")
    return out


def split(text: str, by: SplitBy, length: int, overlap: int = 0, most: int | None = None) -> list[Chunk]:
    return [Chunk(s, e) for s, e in windows(units(text, by), length, overlap, most)]


def split_hierarchy(text: str, by: SplitBy, levels: Sequence[int], most: int | None = None) -> list[Chunk]:
    """Chunks of `levels[0]` units, each split into chunks of `levels[1]` units, and so on
    (parents listed before their children, without overlap)."""
    if not levels or any(b >= a for a, b in zip(levels, levels[1:])):
        raise InvalidInputError(f"chunking.levels must be decreasing sizes, e.g. [512, 128, 32]; got {list(levels)}")
    spans = units(text, by)
    out: list[Chunk] = []

    def descend(first: int, last: int, depth: int, parent: int | None) -> None:
        size = levels[depth]
        for start in range(first, last, size):
            if most is not None and len(out) > most:
                return
            if len(out) % EVERY == 0:
                check_cancel("chunking")
            end = min(start + size, last)
            out.append(Chunk(spans[start][0], spans[end - 1][1], depth, parent))
            if depth + 1 < len(levels) and end - start > levels[depth + 1]:
                descend(start, end, depth + 1, len(out) - 1)

    if spans:
        descend(0, len(spans), 0, None)
    return out


def chunks_of(text: str, cfg: ChunkingConfig, most: int | None = None) -> list[Chunk]:
    """`text` cut as the `chunking` settings say (by none: one chunk, the whole text); past `most`
    chunks the cutting stops (the list then has `most` + 1, for the caller to refuse)."""
    if cfg.by == "none":
        return [Chunk(0, len(text))] if text.strip() else []
    if cfg.levels:
        return split_hierarchy(text, cfg.by, cfg.levels, most)
    return split(text, cfg.by, cfg.length, cfg.overlap, most)


def chunk_records(record: dict[str, Any], text: str, chunks: Sequence[Chunk], source_id: str) -> Iterator[dict[str, Any]]:
    """The corpus records of a document's chunks: its own fields, the chunk's text and position."""
    fields = {k: v for k, v in record.items() if k not in ("id", "_id", "contents", "text")}  # a title stays
    children: list[list[str]] = [[] for _ in chunks]
    for n, c in enumerate(chunks):
        if c.parent is not None:
            children[c.parent].append(f"{source_id}:{n}")
    for n, c in enumerate(chunks):
        yield {**fields, "id": f"{source_id}:{n}", "contents": text[c.start : c.end], "source_id": source_id,
               "split_id": n, "start": c.start, "end": c.end, "level": c.level,
               "parent_id": None if c.parent is None else f"{source_id}:{c.parent}", "children_ids": children[n]}
