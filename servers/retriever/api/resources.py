"""Documents as MCP resources: a file's chunks cite `retriever://documents/<id>` (the id
percent-encoded: a path's '/' is %2F), and a client reads the whole document there (its chunks
merged by offset) or any chunk by its own id. One resource template, read by both MCP servers
(mcp/server.py, mcp/stdio.py); `resources/list` stays empty: a collection may hold millions of
documents, found by `search`. A read is a read of the session's collection: the caller needs the
`read` scope and a read grant on it, as a read tool does (api/grants.py read_refusal), and a caller
without them is not shown the template either."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from ..errors import ForbiddenError, InvalidInputError
from ..security.principals import PRINCIPAL
from .grants import read_refusal

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

PREFIX = "retriever://documents/"
TEMPLATE = {"uriTemplate": PREFIX + "{id}", "name": "document", "mimeType": "text/plain",
            "description": "A document of the served collection by id: a file's whole text (a hit's source.document) "
                           "or one chunk."}


def served(tool_names: Iterable[str]) -> bool:
    """Documents are resources where the tools that read them (get_document) are served."""
    return "get_document" in set(tool_names)


WHAT = "resources/read"


def refusal(engine: Retriever) -> str | None:
    """Why the caller (principals.PRINCIPAL) may not read documents by URI (None: it may)."""
    return read_refusal(PRINCIPAL.get(), WHAT, engine)


def uri(doc_id: str) -> str:
    return PREFIX + quote(doc_id, safe="")


def doc_id(address: str) -> str:
    if not address.startswith(PREFIX) or len(address) == len(PREFIX):
        raise InvalidInputError(f"not a document of this server: {address[:200]!r} (expected {PREFIX}<id>)")
    return unquote(address[len(PREFIX):])


def read(engine: Retriever, key: str) -> dict[str, Any] | None:
    """The text of document `key` (None: no such document), cut at the reply budget; ForbiddenError
    for a caller without the read scope or a read grant on the session's collection."""
    from ..documents.windows import merge, whole
    from .calls import opened

    why = refusal(engine)
    if why is not None:
        raise ForbiddenError(why)
    opened(engine)
    fetch = engine.fetcher(WHAT)
    doc = fetch([key]).get(key)
    if doc is not None:
        text = doc.text
    else:
        chunks = whole(fetch, key, engine.config.limits.max_chunks)
        if not chunks:
            return None
        text = merge(chunks)
    raw = text.encode("utf-8")
    most = engine.config.reply.max_bytes or len(raw)
    if len(raw) > most:
        text = (f"{raw[:most].decode('utf-8', 'ignore')}\n[cut at {most} of {len(raw)} bytes (reply.max_bytes); read "
                f"the rest with get_document(ids=[\"{key}:<n>\"]) chunk by chunk]")
    return {"uri": uri(key), "mimeType": "text/plain", "text": text}
