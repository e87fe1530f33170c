"""Splitting a document's text into chunks with character offsets: by sentence (pysbd, rule-based,
no model download), by word, by the embedding model's tokens (whole words, counted in its word
pieces: documents/pieces.py) or by passage (blank lines), `length` units per chunk and `overlap`
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
from .pieces import Pieces

EVERY = 4096  # units or chunks between two looks at the caller's cancellation

SplitBy = Literal["sentence", "word", "passage", "token"]
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
    """The spans of `text`'s sentences, words or passages, in order (by token: its words)."""
    if by in ("word", "passage", "token"):
        found: list[Span] = []
        for m in (_PASSAGE if by == "passage" else _WORD).finditer(text):
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


def weighted_windows(spans: Sequence[Span], weights: Sequence[int], length: int, overlap: int,
                     most: int | None = None) -> list[Span]:
    """Consecutive runs of spans weighing at most `length` together (a heavier span alone), each
    starting with the spans of the previous run's last `overlap` weight (`windows`, by weight)."""
    if length < 1 or not 0 <= overlap < length:
        raise InvalidInputError(f"chunking: length must be at least 1 and overlap in 0..length-1 "
                                f"(got length {length}, overlap {overlap})")
    import numpy as np

    before = np.concatenate(([0], np.cumsum(weights, dtype=np.int64)))  # weight of the spans before each
    out: list[Span] = []
    first, n = 0, len(spans)
    while first < n:
        last = max(first + 1, int(np.searchsorted(before, before[first] + length, side="right")) - 1)
        last = min(last, n)
        out.append((spans[first][0], spans[last - 1][1]))
        if last >= n or (most is not None and len(out) > most):
            break
        first = max(first + 1, int(np.searchsorted(before, before[last] - overlap, side="left")))
        if len(out) % EVERY == 0:
            check_cancel("chunking")
    return out


def split(text: str, by: SplitBy, length: int, overlap: int = 0, most: int | None = None,
          pieces: Pieces | None = None) -> list[Chunk]:
    spans = units(text, by)
    if by == "token":
        count = pieces or Pieces()
        found = weighted_windows(spans, count([text[s:e] for s, e in spans]), length, overlap, most)
    else:
        found = windows(spans, length, overlap, most)
    return [Chunk(s, e) for s, e in found]


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


def chunks_of(text: str, cfg: ChunkingConfig, most: int | None = None, pieces: Pieces | None = None,
              reserve: int = 0) -> list[Chunk]:
    """`text` cut as the `chunking` settings say (by none: one chunk, the whole text); past `most`
    chunks the cutting stops (the list then has `most` + 1, for the caller to refuse). By token,
    `pieces` counts (documents/pieces.py `pieces_for`), and `reserve` of each chunk's `length` is
    kept for a line the caller puts before it (its heading path), down to half the length."""
    if cfg.by == "none":
        return [Chunk(0, len(text))] if text.strip() else []
    if cfg.levels:
        return split_hierarchy(text, cfg.by, cfg.levels, most)
    length = max(cfg.length - reserve, cfg.length // 2, cfg.overlap + 1) if cfg.by == "token" else cfg.length
    return split(text, cfg.by, length, cfg.overlap, most, pieces)


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
