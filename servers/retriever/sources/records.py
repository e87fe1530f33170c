"""A parsed file as chunk records that cite where they come from: each section (a page, a slide,
the text under one heading) is cut on its own by the source's `chunking`, so a chunk never spans
two pages; a chunk's `start` / `end` are offsets in the document's text (its sections joined by a
blank line), and it carries its file's path, page, heading path, format, title and mtime."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ..config import ChunkingConfig
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


def chunk_records(doc_id: str, parsed: Parsed, stamp: FileStamp, chunking: ChunkingConfig,
                  most: int | None = None) -> list[dict[str, Any]]:
    """The file's chunks as corpus records `{id, contents, ...citation}`, ids `<doc_id>:<n>`."""
    out: list[dict[str, Any]] = []
    offset = 0
    base = {"source_id": doc_id, **stamp.fields(), "format": parsed.format}
    if parsed.title:
        base["doc_title"] = parsed.title
    for section in parsed.sections:
        for c in chunks_of(section.text, chunking, most):
            rec = {"id": f"{doc_id}:{len(out)}", "contents": section.text[c.start : c.end], **base,
                   "split_id": len(out), "start": offset + c.start, "end": offset + c.end}
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
