"""The agent's face: a few tools with short schemas and replies read at a glance. Each opens the
operator's collection on first use (no init tool), searches with the best kind by default
(hybrid), and answers per query a list of hits `{id, text, score, metadata}` where `score` has
one meaning in every mode: relevance mapped to 0..1, higher is better (scale_score)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from ..errors import IndexMissingError
from ..search import rerank
from ..search.kinds import DEFAULT_MODE, MODES
from ..search.results import as_queries
from ..types import Payload
from . import calls, resources
from .fields import Filters, MetadataMap
from .models import SEARCH_REQUESTS, BM25SearchRequest, Request
from .models import AddRequest as ClassicAdd
from .replies import AGENT_MORE, budgeted

if TYPE_CHECKING:
    from ..engine.retriever import Retriever
    from ..types import Hit


Mode = Literal[MODES]  # type: ignore[valid-type]
Query = Annotated[str | list[str], Field(description="A query, or a list of queries (one result per query).")]
Collection = Annotated[str | None, Field(description="Collection to use (list_collections); default: the server's.")]


opened = calls.opened  # the operator's collection, opened on the first call (the agent has no init tool)


# A chunk of a file (sync, ingest by path) cites where it is: these fields go to the hit's `source`
CITATION = ("path", "page", "heading", "start", "end", "modified", "doc_title", "format")
BOOKKEEPING = ("source_id", "sync_source", "size", "mtime_ns", "sha256", "split_id", "context_chars")  # sync's own, not shown


def _hit(h: Hit, collection: str | None = None) -> dict[str, Any]:
    """A hit; a file's chunk also cites its place (`source`), with the document's URI in the served
    collection (api/resources.py: a client reads the whole file there)."""
    meta = h.metadata
    if "path" not in meta or "source_id" not in meta:
        return {"id": h.id, "text": h.text, "score": round(h.score, 4), "metadata": meta}
    source = {"document": meta["source_id"], **{k: meta[k] for k in CITATION if k in meta}}
    if collection is None:
        source["uri"] = resources.uri(str(meta["source_id"]))
    rest = {k: v for k, v in meta.items() if k not in CITATION and k not in BOOKKEEPING}
    return {"id": h.id, "text": h.text, "score": round(h.score, 4), "source": source, "metadata": rest}


# ---- search -----------------------------------------------------------------------------------

SEARCH_DOC = ("Search the document collection. mode: hybrid (default, best: meaning + keywords), dense (meaning) "
              "or bm25 (exact words). Returns per query its hits, best first: id, text, score (0..1, higher is "
              "better, comparable within one mode), metadata; a file's chunk adds `source` (path, page, heading) to cite. "
              "Read more with get_document.")


class SearchRequest(Request):
    query: Query
    mode: Annotated[Mode, Field(description="hybrid, dense or bm25.")] = DEFAULT_MODE
    top_k: Annotated[int | None, Field(ge=1, le=1000, description="Hits per query (default 5).")] = None
    filters: Filters = None
    collection: Collection = None
    window: Annotated[int, Field(ge=0, le=20, description="Add this many neighbouring chunks around each hit.")] = 0
    offset: Annotated[int, Field(ge=0, description="Skip the first hits (paging; a cut reply says where).")] = 0


_HIT = {"type": "object", "properties": {"id": {"type": "string"}, "text": {"type": "string"},
                                         "score": {"type": "number"}, "metadata": {"type": "object"},
                                         "source": {"type": "object"}},
        "required": ["id", "text", "score"]}
_WARNINGS = {"type": "array", "items": {"type": "string"}}
SEARCH_SCHEMA = {"type": "object", "properties": {
    "results": {"type": "array", "items": {"type": "object", "properties": {
        "query": {"type": "string"}, "hits": {"type": "array", "items": _HIT}}}},
    "warnings": _WARNINGS, "truncated": {"type": "object"}}, "required": ["results"]}


def as_kind(r: SearchRequest) -> BM25SearchRequest:
    """The request of the kind `r.mode` names (api/models.py SEARCH_REQUESTS), built from `r`'s values
    without validating them again: each was validated as `r` was (with ranges as narrow as the kind's
    or narrower: top_k, window, offset; the same types: query, filters, collection; finite numbers),
    the two constants are valid, and every other field takes its default (tests/test_one_validation.py
    re-validates what this builds)."""
    return SEARCH_REQUESTS[r.mode].built(
        query_list=r.query, top_k=r.top_k, filters=r.filters, window=r.window, offset=r.offset,
        collection_name=r.collection, scale_score=True, return_metadata=True)


def search(engine: Retriever, r: SearchRequest) -> Payload:
    opened(engine)
    request = as_kind(r)
    try:
        with rerank.collecting() as failed:  # the YAML's cross-encoder stage: its warnings are the agent's too
            found = calls.hits(engine, request)
    except IndexMissingError as e:  # the agent has no build tools: the operator builds indexes
        raise IndexMissingError(f"{e}. This server's operator builds the indexes (`retriever index`); until then "
                                f"try another mode") from None
    hits = calls.windowed(engine, request, found)
    s = calls.shape(engine, request)
    lists, note = budgeted([h[r.offset:] for h in hits], r.offset, s.max_bytes, s.max_chars, True, True,
                           AGENT_MORE)
    out: Payload = {"results": [{"query": q, "hits": [_hit(h, r.collection) for h in row]}
                                for q, row in zip(as_queries(r.query), lists)]}
    warnings = [*calls.filter_warnings(engine, r.collection, r.filters), *failed]
    if warnings:
        out["warnings"] = warnings
    return {**out, "truncated": note} if note else out


# ---- documents --------------------------------------------------------------------------------

GET_DOC = ("Read documents by id: text and metadata, and with `around` the chunks before and after each; "
           "source.document gives a whole file. A reply over the size budget is cut and says how to read on.")


class GetRequest(Request):
    ids: Annotated[str | list[str], Field(description="A document id, or a list of ids.")]
    around: Annotated[int, Field(ge=0, le=20, description="Also this many chunks before and after.")] = 0
    collection: Collection = None
    offset: Annotated[int, Field(ge=0, description="Skip the first ids (paging; a cut reply says where).")] = 0
    start: Annotated[int, Field(ge=0, description="Skip the first characters of the first document's text.")] = 0


GET_SCHEMA = {"type": "object", "properties": {
    "documents": {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string"}, "text": {"type": "string"}, "metadata": {"type": "object"},
        "context": {"type": "object"}}}},
    "missing": {"type": "array", "items": {"type": "string"}}, "truncated": {"type": "object"}},
    "required": ["documents", "missing"]}


def get_document(engine: Retriever, r: GetRequest) -> Payload:
    from .reading import get_documents

    opened(engine)
    return get_documents(engine, as_queries(r.ids, "ids"), r.offset, r.start, r.around, r.collection)


ADD_DOC = ("Add documents to the server's collection, searchable at once: each {id, contents, ...metadata}. "
           "An id that exists is replaced.")
AddRequest = ClassicAdd
WRITE_SCHEMA = {"type": "object", "properties": {"added": {"type": "integer"}, "replaced": {"type": "integer"},
                                                 "documents": {"type": "integer"}}}


def add_documents(engine: Retriever, r: ClassicAdd) -> Payload:
    opened(engine)
    return engine.add(r.documents)


INGEST_DOC = ("Add one document from text (text, markdown or html) or a file or folder the server may read "
              "(PDF, DOCX, PPTX, HTML, ...), cut into chunks <source_id>:<n>; ingesting a source again replaces "
              "its chunks.")
INGEST_SCHEMA = {"type": "object", "properties": {
    "source_id": {"type": "string"}, "ids": {"type": "array", "items": {"type": "string"}},
    "replaced": {"type": "integer"}, "removed": {"type": "integer"}, "documents": {"type": "integer"}}}


class IngestRequest(Request):
    text: Annotated[str | None, Field(description="The document's text (or give path).")] = None
    format: Annotated[Literal["text", "markdown", "html"], Field(description="How to read text.")] = "text"
    path: Annotated[str | None, Field(description="A file inside the folders the server allows.")] = None
    source_id: Annotated[str | None, Field(description="The document's id (default with a path: the path as given).")] = None
    metadata: Annotated[MetadataMap | None, Field(description="Fields kept on every chunk.")] = None


def ingest_document(engine: Retriever, r: IngestRequest) -> Payload:
    from .models import IngestRequest as ClassicIngest

    opened(engine)
    return calls.ingest(engine, ClassicIngest(**r.model_dump()))


DELETE_DOC = "Delete documents by id and/or by filter (the filter language of search)."


class DeleteRequest(Request):
    ids: Annotated[str | list[str] | None, Field(description="Ids to delete.")] = None
    filters: Filters = None


DELETE_SCHEMA = {"type": "object", "properties": {"deleted": {"type": "integer"},
                                                  "not_found": {"type": "array", "items": {"type": "string"}},
                                                  "documents": {"type": "integer"}}}


def delete_documents(engine: Retriever, r: DeleteRequest) -> Payload:
    opened(engine)
    return engine.delete(r.ids, r.filters)


LIST_DOC = "The collections of the store, with their document counts; search one with `collection`."


class ListRequest(Request):
    pass


LIST_SCHEMA = {"type": "object", "properties": {"collections": {"type": "array", "items": {"type": "object"}}},
               "required": ["collections"]}


def list_collections(engine: Retriever, r: ListRequest) -> Payload:
    return engine.list_collections()


# ---- web --------------------------------------------------------------------------------------

WEB_DOC = "Search the web (the provider parameter.yaml configures). Returns per query its hits: url, title, text."


class WebRequest(Request):
    query: Query
    top_k: Annotated[int | None, Field(ge=1, le=50, description="Hits per query (default 5).")] = None


WEB_SCHEMA = {"type": "object", "properties": {"results": {"type": "array", "items": {"type": "object"}}},
              "required": ["results"]}


async def web_search(engine: Retriever, r: WebRequest) -> Payload:
    from .web_calls import search as web

    queries = as_queries(r.query)
    found = await web(engine, None, queries, r.top_k, None)
    return {"results": [{"query": q, "hits": [{"url": h.url, "title": h.title, "text": h.text} for h in res.hits],
                         **({"error": res.error} if res.error else {})} for q, res in zip(queries, found)]}
