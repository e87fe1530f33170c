"""Each request to the engine call that serves it and the reply it gets: the one place where a
tool's arguments meet the engine. Runs on a worker thread (the engine's calls block)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..search import deployed, rerank
from ..security import visibility
from ..security.limits import caller_progress, check_count
from ..types import Hits, Payload
from . import llm_calls
from .hits import FUSION, SEARCHED, depth, hits, shape
from .models import (
    SCORES,
    AddRequest,
    AgenticSearchRequest,
    BatchSearchRequest,
    BM25IndexRequest,
    BM25SearchRequest,
    DeleteRequest,
    DeployClientRequest,
    EmbedRequest,
    FanoutSearchRequest,
    GraphSearchRequest,
    HybridBatchSearchRequest,
    HybridSearchRequest,
    ImageCorpusRequest,
    IndexRequest,
    IngestRequest,
    InitRequest,
    ListCollectionsRequest,
    MultiQuerySearchRequest,
    NeighborsRequest,
    ProjectMemorySearchRequest,
    SearchRequest,
    SparseIndexRequest,
    SyncRequest,
)

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

def init(engine: Retriever, r: InitRequest) -> Payload:
    return engine.init(**r.model_dump())


def embed(engine: Retriever, r: EmbedRequest) -> Payload:
    opened = engine.need("retriever_embed").config.is_multimodal
    if r.is_multimodal is not None and r.is_multimodal != opened:  # UltraRAG passes it here too
        flag = str(r.is_multimodal).lower()
        raise InvalidInputError(f"retriever_embed(is_multimodal={flag}): retriever_init opened a corpus of "
                                f"{'images' if opened else 'text'}; call retriever_init with is_multimodal: {flag} "
                                "first")
    return engine.embed(r.embedding_path, r.overwrite)


def index(engine: Retriever, r: IndexRequest) -> Payload:
    engine.check_opened("retriever_index", r.collection_name, r.corpus_path)
    return engine.index(r.embedding_path, r.overwrite, r.index_path)


def project_memory_search(engine: Retriever, r: ProjectMemorySearchRequest) -> Payload:
    """UltraRAG's: the passages of a dense search of collection `user_<id>`."""
    user = str(r.current_user_id or "default").strip() or "default"
    # UltraRAG names collections for Milvus only: with FAISS its memory search reads the one index
    collection = None if engine.ultrarag and engine.config.index_backend != "milvus" else f"user_{user}"
    request = SearchRequest(query_list=r.query_list, top_k=r.top_k, query_instruction=r.query_instruction,
                            collection_name=collection, max_bytes=0)
    return {"project_memory_content": search(engine, request)["ret_psg"]}


def bm25_index(engine: Retriever, r: BM25IndexRequest) -> Payload:
    return engine.bm25_index(r.overwrite)


def sparse_index(engine: Retriever, r: SparseIndexRequest) -> Payload:
    return engine.sparse_index(r.overwrite)


def add(engine: Retriever, r: AddRequest) -> Payload:
    return engine.add(r.documents)


def ingest(engine: Retriever, r: IngestRequest) -> Payload:
    """A document from the call's text, or a file inside the allowed roots parsed by its format
    (sources/formats.py) into chunks that cite their page and heading; a folder inside the
    allowed roots is synced (its files' ids: the folder's id, '/', their path in it)."""
    from ..documents.parse import parse_text

    if (r.text is None) == (r.path is None):
        raise InvalidInputError("retriever_ingest takes `text` or `path`, one of them")
    if r.path is None:
        if not r.source_id:
            raise InvalidInputError("retriever_ingest: a document sent as text needs a source_id")
        parsed = parse_text(r.text or "", r.format)
        metadata = {**({"doc_title": parsed.title} if parsed.title else {}), **(r.metadata or {})}
        return engine.ingest(r.source_id, parsed.text, metadata)
    path = engine.resolve_path(r.path, "path")
    if not path.is_file() and not path.is_dir():
        raise InvalidInputError(f"retriever_ingest: no file or folder {r.path[:200]!r} (a path relative to the "
                                "server's parameter.yaml, inside the folders it allows)")
    source = r.source_id or _path_id(engine, r.path, path)
    if path.is_dir():
        from ..config import SourceConfig

        visibility.refuse(engine.config, "retriever_ingest of a folder", "a folder's files carry no visibility field of "
                                                                         "this call")

        if r.metadata:
            raise InvalidInputError("retriever_ingest: metadata is for one file; a folder's files carry their own")
        try:
            folder = SourceConfig(path=path, name=source)
        except ValueError as e:  # pydantic's: the name (a source_id or the folder's path) has a ':' or the like
            raise InvalidInputError(f"retriever_ingest: {source!r} cannot name a folder's documents: "
                                    f"{e.errors()[0]['msg'] if hasattr(e, 'errors') else e}") from None
        cfg = engine.config
        if any(s.name == folder.name and (s.collection or cfg.collection_name) == cfg.collection_name
               and s.path.resolve() != path.resolve() for s in cfg.sources):
            raise InvalidInputError(f"retriever_ingest: {source!r} names a source folder of this collection in "
                                    "parameter.yaml; give another source_id")
        return engine.sync([folder], progress=caller_progress())
    return engine.ingest_records(source, file_records(engine, path, source, r.metadata or {}))


_opening = threading.Lock()


def opened(engine: Retriever) -> None:
    """The operator's collection, opened on the first call (the agent's tools and the document
    resources have no init step)."""
    if engine.session is None:
        with _opening:
            if engine.session is None:
                engine.init()


def sync_sources(engine: Retriever, r: SyncRequest) -> Payload:
    """The YAML's sources that fill the served collection, synced (engine/sync.py); a source of
    another collection is named, not synced (`retriever sync` does every collection). The
    collection is opened if no retriever_init did (the sources come from the YAML alone)."""
    opened(engine)
    cfg = engine.need("sync_sources").config
    mine = [s for s in cfg.sources if (s.collection or cfg.collection_name) == cfg.collection_name]
    others = [{"name": s.name, "collection": s.collection} for s in cfg.sources if s not in mine]
    if not mine:
        raise InvalidInputError("sync_sources: no source folder fills this collection; list folders under `sources:` "
                                "in parameter.yaml")
    report = engine.sync(mine, progress=caller_progress())
    return {**report, "other_collections": others} if others else report


def _path_id(engine: Retriever, given: str, path: Path) -> str:
    """A file's id: its path relative to the YAML's folder where it lies inside it, else as given
    (two files of one name in two folders never share an id)."""
    base = (engine.base_dir or Path.cwd()).resolve()
    rel = path.relative_to(base).as_posix() if path.is_relative_to(base) else Path(given).as_posix()
    return rel.lstrip("/") or path.name


def file_records(engine: Retriever, path: Path, source: str, metadata: dict[str, Any]) -> list[dict[str, Any]]:
    from ..documents.pieces import pieces_for
    from ..engine.ingest import chunking
    from ..sources.formats import parse_path
    from ..sources.records import FileStamp, chunk_records
    from ..sources.walk import sha256_of

    limits = engine.config.limits
    parsed = parse_path(path, limits, source)
    st = path.stat()
    stamp = FileStamp(None, source, st.st_size, st.st_mtime_ns, sha256_of(path))
    cut = chunking(engine.config)
    records = chunk_records(source, parsed, stamp, cut, limits.max_chunks, pieces=pieces_for(engine.config, cut))
    check_count(f"retriever_ingest: chunks of {source!r}", len(records), "max_chunks", limits.max_chunks,
                "send a shorter document or cut it with larger chunking.length; nothing was added")
    return [{**metadata, **rec} for rec in records]


def image_corpus(engine: Retriever, r: ImageCorpusRequest) -> Payload:
    """PDF pages rendered into an image corpus for is_multimodal (documents/pdf_images.py)."""
    from ..documents.pdf_images import build_image_corpus

    return build_image_corpus(engine.resolve_path(r.parse_file_path, "parse_file_path"),
                              engine.resolve_path(r.image_corpus_save_path, "image_corpus_save_path"),
                              bool(engine.config.overwrite if r.overwrite is None else r.overwrite),
                              limits=engine.config.limits)


def neighbors(engine: Retriever, r: NeighborsRequest) -> Payload:
    """A chunk and the chunks around it in its document, merged without repeated overlaps."""
    from ..documents.windows import merge, neighbours

    fetch = engine.fetcher("retriever_get_neighbors")
    doc = fetch([r.id]).get(r.id)
    if doc is None:
        raise InvalidInputError(f"retriever_get_neighbors: no document {r.id!r}")
    around = neighbours(fetch, doc, r.before, r.after)
    out: Payload = {"ids": [d.id for d in around], "texts": [d.text for d in around], "merged": merge(around)}
    return _within_budget(engine, out)


def _within_budget(engine: Retriever, out: Payload) -> Payload:
    """A neighbourhood within the reply budget: over it, `merged` gets half and the chunks' texts
    share the rest, each cut to its part, and `truncated` says so (get_document reads a chunk whole)."""
    from .reading import budget
    from .replies import _size, cut_text

    most = budget(engine)
    if not most or _size(out) <= most:
        return out
    share = max(64, most // 2 // max(1, len(out["texts"])) - 64)
    return {**out, "texts": [cut_text(t, share) for t in out["texts"]], "merged": cut_text(out["merged"], most // 2 - 256),
            "truncated": {"reason": f"the reply is over reply.max_bytes ({most}): texts cut to fit; get_document reads "
                                    "a chunk whole, page by page"}}


def delete(engine: Retriever, r: DeleteRequest) -> Payload:
    return engine.delete(r.ids, r.filters)


def list_collections(engine: Retriever, r: ListCollectionsRequest) -> Payload:
    return engine.list_collections()


def windowed(engine: Retriever, r: Any, hits: Hits) -> Hits:
    """Hits through the document stages asked for: auto-merging (documents/merging.py), then each
    hit with the `window` chunks around it (documents/windows.py)."""
    if not r.window and r.auto_merge is None:
        return hits
    from ..documents.merging import auto_merge
    from ..documents.windows import with_windows

    collection_name = getattr(r, "collection_name", None)
    if r.auto_merge is not None:
        s = engine.searched("auto_merge", collection_name)
        hits = auto_merge(s.collection, hits, r.auto_merge, visibility.rule(s.config))  # a hidden parent stays out
    return with_windows(engine.fetcher("window", collection_name), hits, r.window) if r.window else hits


def hits_reply(engine: Retriever, r: SearchRequest | BM25SearchRequest, hits: Hits) -> Payload:
    """The reply of a one-list search from its hits, with `warnings` where its filter cannot match
    (a field no document has, a value of another type; UltraRAG sends no filters)."""
    out = shape(engine, r, fused=isinstance(r, HybridSearchRequest)).hits(windowed(engine, r, hits))
    warnings = filter_warnings(engine, r.collection_name, r.filters)
    return {**out, "warnings": warnings} if warnings else out


def filter_warnings(engine: Retriever, collection: str | None, filters: dict[str, Any] | None) -> list[str]:
    """Why a filter cannot match in the searched collection; a warning, not an error (a real "no
    match" stays possible)."""
    if filters is None or visibility.rule(engine.config) is not None:  # a field only hidden documents have stays untold
        return []
    return engine.searched("search", collection).collection.field_warnings(filters)


def search(engine: Retriever, r: SearchRequest | BM25SearchRequest) -> Payload:
    if r.llm_rerank is None:
        with rerank.collecting() as failed:  # the YAML's cross-encoder stage (search/rerank.py)
            found = hits(engine, r)
        out = hits_reply(engine, r, found)
        return {**out, "warnings": [*out.get("warnings", []), *failed]} if failed else out
    k = depth(engine, r)
    found, extra = llm_calls.reranked(engine, r, lambda deep: hits(engine, r.model_copy(
        update={"top_k": deep, "offset": 0})), k)
    return {**hits_reply(engine, r, found), **extra}


def agentic_search(engine: Retriever, r: AgenticSearchRequest) -> Payload:
    hits, extra = llm_calls.agentic_search(engine, r)
    return {**shape(engine, r, fused=True).hits(windowed(engine, r, hits)), **extra}


def graph_search(engine: Retriever, r: GraphSearchRequest) -> Payload:
    return shape(engine, r).hits(windowed(engine, r, llm_calls.graph_search(engine, r)))


def batch_search(engine: Retriever, r: BatchSearchRequest) -> Payload:
    groups = engine.batch_search(r.batch_query_list, depth(engine, r), r.query_instruction, **r.options(*SEARCHED),
                                 ann=r.ann())
    return shape(engine, r).batch([windowed(engine, r, g) for g in groups])


def hybrid_batch_search(engine: Retriever, r: HybridBatchSearchRequest) -> Payload:
    groups = engine.hybrid_batch_search(r.batch_query_list, depth(engine, r), query_instruction=r.query_instruction,
                                        **r.options(*FUSION, *SEARCHED), ann=r.ann())
    return shape(engine, r, fused=True).batch([windowed(engine, r, g) for g in groups])


def deploy_search(engine: Retriever, r: DeployClientRequest) -> Payload:
    """The same search, served by the deployed retriever at `retriever_url` (search/deployed.py); the
    reply budget is this server's, applied there."""
    cfg = engine.base_config
    payload = r.model_dump(exclude={"retriever_url"}, exclude_defaults=True) | {"query_list": r.query_list}
    if r.max_bytes is None:
        payload["max_bytes"] = shape(engine, r).max_bytes
    return deployed.deploy_search(cfg, deployed.target(cfg, r.retriever_url), payload)


def multi_query_search(engine: Retriever, r: MultiQuerySearchRequest) -> Payload:
    hits = engine.multi_query_search(r.question_list, depth(engine, r), r.mode, r.query_instruction,
                                     r.candidate_depth, **r.options(*SCORES))
    return shape(engine, r, fused=True).hits(windowed(engine, r, hits))


def fanout_search(engine: Retriever, r: FanoutSearchRequest) -> Payload:
    if r.window or r.auto_merge is not None:
        raise InvalidInputError("retriever_fanout_search: window and auto_merge apply to searches of one collection")
    hits, errors = engine.fanout_search(r.query_list, r.collections, top_k=depth(engine, r), mode=r.mode,
                                        query_instruction=r.query_instruction, candidate_depth=r.candidate_depth,
                                        **r.options(*SCORES))
    return {**shape(engine, r, fused=True).hits(hits, collections=True), "errors": errors}
