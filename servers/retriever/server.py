"""The MCP layer: thin tools over the engine, nothing else. Every parameter is described
(params.py), every tool annotated; errors become tool errors in one middleware; replies are
built in replies.py; the web tools are a server of their own (server_web.py), mounted."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import threading
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as ArgumentError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from .engine import Retriever
from .errors import CancelledWork, RetrieverError
from .guard import FROM_CLIENT
from .limits import CANCEL
from .params import (
    RRFK,
    BatchQueries,
    CandidateDepth,
    Collections,
    Documents,
    EmbeddingPath,
    Filters,
    Fusion,
    Ids,
    IndexPath,
    MaxBytes,
    MaxChars,
    Offset,
    Mode,
    Overwrite,
    Queries,
    QueryInstruction,
    QuestionList,
    ReturnMetadata,
    ReturnText,
    ScaleScore,
    ScoreThreshold,
    TopK,
    VectorWeight,
)
from .replies import Shape, reply
from .server_web import build_web_server

log = logging.getLogger(__name__)
T = TypeVar("T")


async def run(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`fn` on a worker thread; if the request is cancelled (the client gave up or went away),
    the work stops at its next chunk of queries (limits.py) instead of running on unseen."""
    event = threading.Event()
    ctx = contextvars.copy_context()
    ctx.run(CANCEL.set, event)
    ctx.run(FROM_CLIENT.set, True)  # paths, endpoints and settings from a client are checked (guard.py)
    name = getattr(fn, "__name__", "call")

    def work() -> T:
        try:
            return fn(*args, **kwargs)
        except CancelledWork as e:
            log.info("%s: %s", name, e)
            raise

    future = asyncio.get_running_loop().run_in_executor(None, ctx.run, work)
    try:
        return await future
    except asyncio.CancelledError:
        event.set()
        log.info("%s: request cancelled; its remaining work is dropped", name)
        raise


class ToolErrors(Middleware):
    """Every failure of a tool call becomes a tool error with a message, in one place: our errors
    with theirs, anything else as an internal error (logged with its traceback on stderr). Calls
    whose arguments are over limits.max_request_bytes are refused before they run."""

    def __init__(self, engine: Retriever) -> None:
        self.engine = engine

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        name = context.message.name
        limit = self.engine.base_config.limits.max_request_bytes
        size = len(json.dumps(context.message.arguments or {}, default=str))
        if size > limit:
            raise ToolError(f"{name}: the arguments are {size} bytes, over limits.max_request_bytes ({limit})")
        try:
            return await call_next(context)
        except ToolError:
            raise
        except RetrieverError as e:
            log.error("%s: %s", name, e)
            raise ToolError(str(e)) from e
        except (ArgumentError, ValidationError, ValueError, TypeError) as e:
            raise ToolError(f"{name}: invalid arguments: {_argument_problems(e)}") from e
        except Exception as e:
            log.exception("%s: unexpected error", name)
            raise ToolError(f"{name}: internal error ({type(e).__name__}); the server log has the details") from e


def _argument_problems(e: Exception) -> str:
    """`top_k: Input should be greater than or equal to 1 (got 0)` per wrong argument."""
    cause = e if isinstance(e, ValidationError) else e.__cause__
    if not isinstance(cause, ValidationError):
        return " ".join(str(e).split())
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                     + ("" if isinstance(err.get("input"), (dict, list)) else f" (got {err.get('input')!r})")
                     for err in cause.errors())


READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
BUILD = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
WRITE_TOOLS = frozenset({"retriever_embed", "retriever_index", "bm25_index", "retriever_add", "retriever_delete"})


def build_server(engine: Retriever, read_only: bool | None = None) -> FastMCP:
    """The MCP server over `engine`. `read_only` (default: security.read_only in the YAML) leaves
    out the tools that write (embed, index, bm25_index, add, delete)."""
    read_only = engine.base_config.security.read_only if read_only is None else read_only
    mcp = FastMCP("retriever", middleware=[ToolErrors(engine)], instructions=(
        "Dense, BM25 and hybrid search over a local corpus. Call retriever_init first. Search tools take "
        "`filters`: {'field': 'meta.<key>' or 'id', 'operator': '==', '!=', '>', '>=', '<', '<=', 'in' or "
        "'not in', 'value': ...} or {'operator': 'AND'|'OR'|'NOT', 'conditions': [...]}."))

    def deeper(top_k: int | None, offset: int) -> int | None:
        """Search `offset` deeper, so the page after the first `offset` hits is full."""
        return top_k if not offset else (engine.config.top_k if top_k is None else top_k) + offset

    def shape(offset: int, max_bytes: int | None, max_chars: int | None, return_text: bool, return_metadata: bool,
              fused: bool = False) -> Shape:
        return Shape.of(engine.base_config.reply, engine.shared, offset, max_bytes, max_chars, return_text,
                        return_metadata, fused)

    def tool(annotations: ToolAnnotations, title: str) -> Callable[[Callable[..., Any]], Any]:
        def register(fn: Callable[..., Any]) -> Any:
            if read_only and fn.__name__ in WRITE_TOOLS:
                return fn
            return mcp.tool(output_schema=None, annotations=annotations, title=title)(fn)
        return register

    @tool(ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False),
          "Open a collection")
    async def retriever_init(
        model_name_or_path: Annotated[str | None, Field(description="Embedding model: a MiniLM alias or a path "
                                                        "inside the allowed folders. Default: the YAML's.")] = None,
        corpus_path: Annotated[str | None, Field(description="JSONL corpus inside the allowed folders "
                                                 "('' = none: a collection filled by retriever_add).")] = None,
        embedding_path: EmbeddingPath = None,
        backend: Annotated[str | None, Field(description="sentence_transformers, openai, infinity or bm25.")] = None,
        backend_configs: Annotated[dict[str, Any] | None, Field(
            description="Per-backend settings, merged over the YAML's (URLs and keys only from the YAML).")] = None,
        index_backend: Annotated[str | None, Field(description="faiss or milvus.")] = None,
        index_backend_configs: Annotated[dict[str, Any] | None, Field(
            description="Per-index-backend settings, merged over the YAML's (Milvus URIs and tokens only from "
            "the YAML).")] = None,
        batch_size: Annotated[int | None, Field(ge=1, description="Texts per embedding batch.")] = None,
        gpu_ids: Annotated[str | int | None, Field(description="GPU ids, e.g. '0' (null: CPU).")] = None,
        is_multimodal: Annotated[bool | None, Field(description="Accepted; not active in this release.")] = None,
        is_demo: Annotated[bool | None, Field(description="Milvus demo mode: every document lives in "
                                              "Milvus.")] = None,
        collection_name: Annotated[str | None, Field(description="The collection: letters, digits and _ "
                                                     "('' = the default one).")] = None,
        top_k: TopK = None,
        query_instruction: QueryInstruction = None,
        overwrite: Overwrite = None,
    ) -> ToolResult:
        """Load the corpus, the embedding model and any saved indexes. Arguments override parameter.yaml
        for this session (paths must stay inside the folders the server allows; over HTTP the operator's
        settings cannot be changed unless the YAML allows it)."""
        return reply(await run(
            engine.init, model_name_or_path=model_name_or_path, corpus_path=corpus_path,
            embedding_path=embedding_path, backend=backend, backend_configs=backend_configs,
            index_backend=index_backend, index_backend_configs=index_backend_configs, batch_size=batch_size,
            gpu_ids=gpu_ids, is_multimodal=is_multimodal, is_demo=is_demo, collection_name=collection_name,
            top_k=top_k, query_instruction=query_instruction, overwrite=overwrite))

    @tool(BUILD, "Embed the corpus")
    async def retriever_embed(embedding_path: EmbeddingPath = None, overwrite: Overwrite = None) -> ToolResult:
        """Embed the corpus into an .npy file, a chunk at a time (progress on the server's stderr)."""
        return reply(await run(engine.embed, embedding_path, overwrite))

    @tool(BUILD, "Build the dense index")
    async def retriever_index(embedding_path: EmbeddingPath = None, overwrite: Overwrite = None,
                              index_path: IndexPath = None) -> ToolResult:
        """Build the FAISS index from the embedding file and save it with its manifest."""
        return reply(await run(engine.index, embedding_path, overwrite, index_path))

    @tool(READ, "Dense search")
    async def retriever_search(
        query_list: Queries, top_k: TopK = None, query_instruction: QueryInstruction = None,
        score_threshold: ScoreThreshold = None, scale_score: ScaleScore = False, filters: Filters = None,
        return_text: ReturnText = True, return_metadata: ReturnMetadata = False,
        offset: Offset = 0, max_bytes: MaxBytes = None, max_chars: MaxChars = None,
    ) -> ToolResult:
        """Dense search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first."""
        hits = await run(engine.search, query_list, deeper(top_k, offset), query_instruction, score_threshold,
                         scale_score, filters)
        return reply(shape(offset, max_bytes, max_chars, return_text, return_metadata).hits(hits))

    @tool(READ, "Dense search, grouped")
    async def retriever_batch_search(
        batch_query_list: BatchQueries, top_k: TopK = None, query_instruction: QueryInstruction = None,
        score_threshold: ScoreThreshold = None, scale_score: ScaleScore = False, filters: Filters = None,
        return_text: ReturnText = True, return_metadata: ReturnMetadata = False,
        offset: Offset = 0, max_bytes: MaxBytes = None, max_chars: MaxChars = None,
    ) -> ToolResult:
        """Dense search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls."""
        groups = await run(engine.batch_search, batch_query_list, deeper(top_k, offset), query_instruction,
                           score_threshold, scale_score, filters)
        return reply(shape(offset, max_bytes, max_chars, return_text, return_metadata).batch(groups))

    @tool(READ, "Hybrid search")
    async def retriever_hybrid_search(
        query_list: Queries, top_k: TopK = None, query_instruction: QueryInstruction = None,
        fusion: Fusion = None, vector_weight: VectorWeight = None, rrf_k: RRFK = None,
        candidate_depth: CandidateDepth = None, score_threshold: ScoreThreshold = None,
        scale_score: ScaleScore = False, filters: Filters = None, return_text: ReturnText = True,
        return_metadata: ReturnMetadata = False, offset: Offset = 0, max_bytes: MaxBytes = None, max_chars: MaxChars = None,
    ) -> ToolResult:
        """Dense + BM25 at once, fused. Adds ret_sources: per hit, its rank and score in each retriever."""
        hits = await run(engine.hybrid_search, query_list, deeper(top_k, offset), query_instruction, fusion,
                         vector_weight, rrf_k, candidate_depth, score_threshold, scale_score, filters)
        return reply(shape(offset, max_bytes, max_chars, return_text, return_metadata, True).hits(hits))

    @tool(READ, "Hybrid search, grouped")
    async def retriever_hybrid_batch_search(
        batch_query_list: BatchQueries, top_k: TopK = None, query_instruction: QueryInstruction = None,
        fusion: Fusion = None, vector_weight: VectorWeight = None, rrf_k: RRFK = None,
        candidate_depth: CandidateDepth = None, score_threshold: ScoreThreshold = None,
        scale_score: ScaleScore = False, filters: Filters = None, return_text: ReturnText = True,
        return_metadata: ReturnMetadata = False, offset: Offset = 0, max_bytes: MaxBytes = None, max_chars: MaxChars = None,
    ) -> ToolResult:
        """Hybrid search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls, ret_sources_ls."""
        groups = await run(
            engine.hybrid_batch_search, batch_query_list, deeper(top_k, offset), query_instruction=query_instruction,
            fusion=fusion,
            vector_weight=vector_weight, rrf_k=rrf_k, candidate_depth=candidate_depth,
            score_threshold=score_threshold, scale_score=scale_score, filters=filters)
        return reply(shape(offset, max_bytes, max_chars, return_text, return_metadata, True).batch(groups))

    @tool(READ, "Multi-query search")
    async def retriever_multi_query_search(
        question_list: QuestionList, top_k: TopK = None, mode: Mode = "hybrid",
        query_instruction: QueryInstruction = None, candidate_depth: CandidateDepth = None,
        score_threshold: ScoreThreshold = None, scale_score: ScaleScore = False, filters: Filters = None,
        return_text: ReturnText = True, return_metadata: ReturnMetadata = False,
        offset: Offset = 0, max_bytes: MaxBytes = None, max_chars: MaxChars = None,
    ) -> ToolResult:
        """Several phrasings per question, each searched with `mode`, fused with RRF into one ranking per
        question. Returns ret_psg, ret_ids, ret_scores (one list per question) and ret_sources."""
        hits = await run(engine.multi_query_search, question_list, deeper(top_k, offset), mode, query_instruction,
                         candidate_depth, score_threshold, scale_score, filters)
        return reply(shape(offset, max_bytes, max_chars, return_text, return_metadata, True).hits(hits))

    @tool(READ, "Search several collections")
    async def retriever_fanout_search(
        query_list: Queries, collections: Collections, top_k: TopK = None, mode: Mode = "hybrid",
        query_instruction: QueryInstruction = None, candidate_depth: CandidateDepth = None,
        score_threshold: ScoreThreshold = None, scale_score: ScaleScore = False, filters: Filters = None,
        return_text: ReturnText = True, return_metadata: ReturnMetadata = False,
        offset: Offset = 0, max_bytes: MaxBytes = None, max_chars: MaxChars = None,
    ) -> ToolResult:
        """One search over several collections, each with `mode`, fused with RRF into one list per query.
        Adds ret_collections (each hit's collection), ret_sources (its rank and score in each collection) and
        errors ({collection: message} for those that failed)."""
        hits, errors = await run(
            engine.fanout_search, query_list, collections, top_k=deeper(top_k, offset), mode=mode,
            query_instruction=query_instruction,
            candidate_depth=candidate_depth, filters=filters, score_threshold=score_threshold, scale_score=scale_score)
        return reply({**shape(offset, max_bytes, max_chars, return_text, return_metadata, True).hits(hits, collections=True),
                      "errors": errors})

    @tool(BUILD, "Build the BM25 index")
    async def bm25_index(overwrite: Overwrite = None) -> ToolResult:
        """Build the BM25 index over the corpus and save it; searchable at once."""
        return reply(await run(engine.bm25_index, overwrite))

    @tool(READ, "BM25 search")
    async def bm25_search(
        query_list: Queries, top_k: TopK = None, score_threshold: ScoreThreshold = None,
        scale_score: ScaleScore = False, filters: Filters = None, return_text: ReturnText = True,
        return_metadata: ReturnMetadata = False, offset: Offset = 0, max_bytes: MaxBytes = None, max_chars: MaxChars = None,
    ) -> ToolResult:
        """BM25 search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first."""
        hits = await run(engine.bm25_search, query_list, deeper(top_k, offset), score_threshold, scale_score, filters)
        return reply(shape(offset, max_bytes, max_chars, return_text, return_metadata).hits(hits))

    @tool(ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False),
          "Add documents")
    async def retriever_add(documents: Documents) -> ToolResult:
        """Add documents to the selected collection, embedded with the session's model and searchable at
        once by dense and BM25 search. An id that exists is replaced."""
        return reply(await run(engine.add, documents))

    @tool(ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False),
          "Delete documents")
    async def retriever_delete(ids: Ids = None, filters: Filters = None) -> ToolResult:
        """Delete documents by id and/or by filter (the filter language of the search tools)."""
        return reply(await run(engine.delete, ids, filters))

    @tool(READ, "List collections")
    async def retriever_list_collections() -> ToolResult:
        """The collections of the configured store, with document counts, model and dimension.
        Select one with retriever_init(collection_name=...)."""
        return reply(await run(engine.list_collections))

    mcp.mount(build_web_server(engine))  # retriever_websearch, retriever_{exa,tavily,zhipuai}_search
    return mcp
