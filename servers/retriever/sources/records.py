"""A parsed file as chunk records that cite where they come from: each section (a page, a slide,
the text under one heading) is cut on its own by the source's `chunking`, so a chunk never spans
two pages; a chunk's `start` / `end` are offsets in the document's text (its sections joined by a
blank line), and it carries its file's path, page, heading path, format, title and mtime."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ..config import ChunkingConfig
from ..documents.pieces import Pieces
from ..documents.split import chunks_of
from .formats import Parsed

SEP = "\n\n"
# the fields sync writes on every chunk (and reads back to know what a collection holds)
FILE_FIELDS = ("sync_source", "path", "size", "mtime_ns", "sha256")


@dataclass(frozen=True)
class FileStamp:
    """What a sync records of a file on its chunks, to tell next time whether it changed."""

    source: str | None  # the source's name (None: a file ingested on its own, which no sync removes)
    rel: str
    size: int
    mtime_ns: int
    sha256: str

    def fields(self) -> dict[str, Any]:
        when = dt.datetime.fromtimestamp(self.mtime_ns / 1e9, dt.UTC).isoformat(timespec="seconds")
        mark = {} if self.source is None else {"sync_source": self.source}
        return {**mark, "path": self.rel, "size": self.size, "mtime_ns": self.mtime_ns,
                "sha256": self.sha256, "modified": when}


def context_line(title: str | None, heading: tuple[str, ...]) -> str:
    """"Title > Heading > Subheading" (the title once where the first heading repeats it), or ""."""
    parts = [title] if title else []
    parts += list(heading[1:] if heading and title and heading[0] == title else heading)
    return " > ".join(p for p in parts if p.strip())


def chunk_records(doc_id: str, parsed: Parsed, stamp: FileStamp, chunking: ChunkingConfig,
                  most: int | None = None, context: bool = True, pieces: Pieces | None = None) -> list[dict[str, Any]]:
    """The file's chunks as corpus records `{id, contents, ...citation}`, ids `<doc_id>:<n>`. With
    `context`, a chunk's text starts with its document's title and heading path on a line of its
    own (`context_chars` long, newline included), indexed with it: on SciFact's sentences that won
    in every mode (bench/RESULTS.md, section context); `start` / `end` place the text after it.
    Cut by token (`pieces` counting), the line counts in the chunk's length."""
    out: list[dict[str, Any]] = []
    offset = 0
    base = {"source_id": doc_id, **stamp.fields(), "format": parsed.format}
    if parsed.title:
        base["doc_title"] = parsed.title
    for section in parsed.sections:
        line = context_line(parsed.title, section.heading) if context else ""
        reserve = sum((pieces or Pieces())(line.split())) if line and chunking.by == "token" else 0
        for c in chunks_of(section.text, chunking, most, pieces, reserve):
            text = section.text[c.start : c.end]
            rec = {"id": f"{doc_id}:{len(out)}", "contents": f"{line}\n{text}" if line else text, **base,
                   "split_id": len(out), "start": offset + c.start, "end": offset + c.end}
            if line:
                rec["context_chars"] = len(line) + 1
            if section.page is not None:
                rec["page"] = section.page
            if section.heading:
                rec["heading"] = " > ".join(section.heading)
            out.append(rec)
        offset += len(section.text) + len(SEP)
        if most is not None and len(out) > most:
            break
    return out


def document_text(parsed: Parsed) -> str:
    """The text the offsets point into."""
    return SEP.join(s.text for s in parsed.sections)
