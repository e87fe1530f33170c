"""The MCP layer: thin tools over the engine, nothing else.

Replies are lean. The result travels once, as `structuredContent`; a small result (under
`TEXT_COPY_LIMIT` bytes of JSON) is also given as compact JSON text for clients that read only
text, as the MCP spec suggests, while a large one (a batch of passages) gets a one-line note
instead of a second copy. `return_text=false` drops the passages and keeps ids and scores.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools.base import ToolResult
from mcp.types import TextContent

from .engine import Retriever
from .errors import RetrieverError
from .server_web import register_web_tools
from .types import Hit

log = logging.getLogger(__name__)
TEXT_COPY_LIMIT = 64 * 1024
F = TypeVar("F", bound=Callable[..., Any])


def format_hits(results: list[list[Hit]], return_text: bool = True, return_metadata: bool = False,
                fused: bool = False) -> dict[str, Any]:
    """UltraRAG's `ret_psg` plus `ret_ids` and `ret_scores` in the same nesting; for a fused search
    also `ret_sources` (empty when no hit is left), so every reply of a tool has the same keys."""
    out: dict[str, Any] = {}
    if return_text:
        out["ret_psg"] = [[h.text for h in hits] for hits in results]
    out["ret_ids"] = [[h.id for h in hits] for hits in results]
    out["ret_scores"] = [[round(h.score, 6) for h in hits] for hits in results]
    if return_metadata:
        out["ret_meta"] = [[h.metadata for h in hits] for hits in results]
    if fused:
        names = next((list(h.sources) for hits in results for h in hits if h.sources), [])
        out["ret_sources"] = {name: _source_columns(results, name) for name in names}
    return out


def _source_columns(results: list[list[Hit]], name: str) -> dict[str, list[list[Any]]]:
    """Per retriever, its rank and score of each fused hit (null where it did not find it), in
    the nesting of ret_ids: columns keep a large reply small."""
    cells = [[(h.sources or {}).get(name) for h in hits] for hits in results]
    return {
        "rank": [[c[0] if c else None for c in row] for row in cells],
        "score": [[round(c[1], 6) if c else None for c in row] for row in cells],
    }


def format_batch(groups: list[list[list[Hit]]], return_text: bool = True, return_metadata: bool = False,
                 fused: bool = False) -> dict[str, Any]:
    """`ret_psg_ls` (and `ret_ids_ls`, `ret_scores_ls`): one more level, one entry per group."""
    per_group = [format_hits(g, return_text, return_metadata, fused) for g in groups]
    keys = per_group[0].keys() if per_group else ()
    return {f"{k}_ls": [g[k] for g in per_group] for k in keys}


def _passage_chars(payload: dict[str, Any]) -> int:
    """Characters of passage text in a reply: a cheap lower bound of its JSON size."""
    psg = payload.get("ret_psg") or [g for groups in payload.get("ret_psg_ls", []) for g in groups]
    return sum(len(t) for hits in psg for t in hits)


def reply(payload: dict[str, Any]) -> ToolResult:
    """Structured content once; a JSON text copy only when it is small (see the module doc)."""
    text = None
    if _passage_chars(payload) <= TEXT_COPY_LIMIT:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    if text is None or len(text) > TEXT_COPY_LIMIT:
        text = f"results in structuredContent (keys: {', '.join(payload)}); not repeated as text to keep the reply lean"
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=payload)


def tool_errors(fn: F) -> F:
    """Our errors reach the client as tool errors with their message, nothing else."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RetrieverError as e:
            log.error("%s: %s", fn.__name__, e)
            raise ToolError(str(e)) from e

    return wrapper  # type: ignore[return-value]


def build_server(engine: Retriever) -> FastMCP:
    mcp = FastMCP("retriever", instructions=(
        "Dense, BM25 and hybrid search over a local corpus. Call retriever_init first. Search tools take "
        "`filters`: {'field': 'meta.<key>' or 'id', 'operator': '==', '!=', '>', '>=', '<', '<=', 'in' or "
        "'not in', 'value': ...} or {'operator': 'AND'|'OR'|'NOT', 'conditions': [...]}."))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_init(
        model_name_or_path: str | None = None,
        corpus_path: str | None = None,
        embedding_path: str | None = None,
        backend: str | None = None,
        backend_configs: dict[str, Any] | None = None,
        index_backend: str | None = None,
        index_backend_configs: dict[str, Any] | None = None,
        batch_size: int | None = None,
        gpu_ids: str | int | None = None,
        is_multimodal: bool | None = None,
        is_demo: bool | None = None,
        collection_name: str | None = None,
        top_k: int | None = None,
        query_instruction: str | None = None,
        overwrite: bool | None = None,
    ) -> ToolResult:
        """Load the corpus, the embedding model and any saved indexes. Arguments override parameter.yaml."""
        return reply(engine.init(
            model_name_or_path=model_name_or_path, corpus_path=corpus_path, embedding_path=embedding_path,
            backend=backend, backend_configs=backend_configs, index_backend=index_backend,
            index_backend_configs=index_backend_configs, batch_size=batch_size, gpu_ids=gpu_ids,
            is_multimodal=is_multimodal, is_demo=is_demo, collection_name=collection_name, top_k=top_k,
            query_instruction=query_instruction, overwrite=overwrite,
        ))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_embed(embedding_path: str | None = None, overwrite: bool | None = None) -> ToolResult:
        """Embed the corpus into an .npy file, a chunk at a time (progress on the server's stderr)."""
        return reply(engine.embed(embedding_path, overwrite))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_index(
        embedding_path: str | None = None, overwrite: bool | None = None, index_path: str | None = None
    ) -> ToolResult:
        """Build the FAISS index from the embedding file and save it with its manifest."""
        return reply(engine.index(embedding_path, overwrite, index_path))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_search(
        query_list: list[str] | str,
        top_k: int | None = None,
        query_instruction: str | None = None,
        score_threshold: float | None = None,
        scale_score: bool = False,
        filters: dict[str, Any] | None = None,
        return_text: bool = True,
        return_metadata: bool = False,
    ) -> ToolResult:
        """Dense search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first.
        scale_score maps scores to 0..1 (cosine: (s+1)/2); score_threshold drops hits below it."""
        hits = engine.search(query_list, top_k, query_instruction, score_threshold, scale_score, filters)
        return reply(format_hits(hits, return_text, return_metadata))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_batch_search(
        batch_query_list: list[list[str] | str],
        top_k: int | None = None,
        query_instruction: str | None = None,
        score_threshold: float | None = None,
        scale_score: bool = False,
        filters: dict[str, Any] | None = None,
        return_text: bool = True,
        return_metadata: bool = False,
    ) -> ToolResult:
        """Dense search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls."""
        groups = engine.batch_search(batch_query_list, top_k, query_instruction, score_threshold, scale_score,
                                     filters)
        return reply(format_batch(groups, return_text, return_metadata))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_hybrid_search(
        query_list: list[str] | str,
        top_k: int | None = None,
        query_instruction: str | None = None,
        fusion: Literal["rrf", "convex"] | None = None,
        vector_weight: float | None = None,
        rrf_k: float | None = None,
        candidate_depth: int | None = None,
        score_threshold: float | None = None,
        scale_score: bool = False,
        filters: dict[str, Any] | None = None,
        return_text: bool = True,
        return_metadata: bool = False,
    ) -> ToolResult:
        """Dense + BM25 at once, fused (rrf: sum of w/(k+rank); convex: weighted min-max scores).
        vector_weight is the dense share. Adds ret_sources: per hit, its rank and score in each retriever."""
        hits = engine.hybrid_search(query_list, top_k, query_instruction, fusion, vector_weight, rrf_k,
                                    candidate_depth, score_threshold, scale_score, filters)
        return reply(format_hits(hits, return_text, return_metadata, fused=True))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_hybrid_batch_search(
        batch_query_list: list[list[str] | str],
        top_k: int | None = None,
        query_instruction: str | None = None,
        fusion: Literal["rrf", "convex"] | None = None,
        vector_weight: float | None = None,
        rrf_k: float | None = None,
        candidate_depth: int | None = None,
        score_threshold: float | None = None,
        scale_score: bool = False,
        filters: dict[str, Any] | None = None,
        return_text: bool = True,
        return_metadata: bool = False,
    ) -> ToolResult:
        """Hybrid search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls, ret_sources_ls."""
        groups = engine.hybrid_batch_search(
            batch_query_list, top_k, query_instruction=query_instruction, fusion=fusion, vector_weight=vector_weight,
            rrf_k=rrf_k, candidate_depth=candidate_depth, score_threshold=score_threshold, scale_score=scale_score,
            filters=filters)
        return reply(format_batch(groups, return_text, return_metadata, fused=True))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_multi_query_search(
        question_list: list[list[str] | str],
        top_k: int | None = None,
        mode: Literal["hybrid", "dense", "bm25"] = "hybrid",
        query_instruction: str | None = None,
        candidate_depth: int | None = None,
        score_threshold: float | None = None,
        scale_score: bool = False,
        filters: dict[str, Any] | None = None,
        return_text: bool = True,
        return_metadata: bool = False,
    ) -> ToolResult:
        """Several phrasings per question: each searched with `mode`, fused with RRF into one ranking
        per question. Returns ret_psg, ret_ids, ret_scores (one list per question) and ret_sources."""
        hits = engine.multi_query_search(question_list, top_k, mode, query_instruction, candidate_depth,
                                         score_threshold, scale_score, filters)
        return reply(format_hits(hits, return_text, return_metadata, fused=True))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_fanout_search(
        query_list: list[str] | str,
        collections: list[str],
        top_k: int | None = None,
        mode: Literal["hybrid", "dense", "bm25"] = "hybrid",
        query_instruction: str | None = None,
        candidate_depth: int | None = None,
        score_threshold: float | None = None,
        scale_score: bool = False,
        filters: dict[str, Any] | None = None,
        return_text: bool = True,
        return_metadata: bool = False,
    ) -> ToolResult:
        """One search over several collections ("" = the default one), each with `mode`, fused with RRF
        into one list per query. Adds ret_collections (each hit's collection), ret_sources (its rank and
        score in each collection) and errors ({collection: message} for those that failed)."""
        hits, errors = engine.fanout_search(
            query_list, collections, top_k=top_k, mode=mode, query_instruction=query_instruction,
            candidate_depth=candidate_depth, filters=filters, score_threshold=score_threshold, scale_score=scale_score)
        out = format_hits(hits, return_text, return_metadata, fused=True)
        out["ret_collections"] = [[h.collection for h in row] for row in hits]
        return reply({**out, "errors": errors})

    @mcp.tool(output_schema=None)
    @tool_errors
    def bm25_index(overwrite: bool | None = None) -> ToolResult:
        """Build the BM25 index over the corpus and save it; searchable at once."""
        return reply(engine.bm25_index(overwrite))

    @mcp.tool(output_schema=None)
    @tool_errors
    def bm25_search(
        query_list: list[str] | str,
        top_k: int | None = None,
        score_threshold: float | None = None,
        scale_score: bool = False,
        filters: dict[str, Any] | None = None,
        return_text: bool = True,
        return_metadata: bool = False,
    ) -> ToolResult:
        """BM25 search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first.
        scale_score maps scores to 0..1 with expit(s/8); score_threshold drops hits below it."""
        hits = engine.bm25_search(query_list, top_k, score_threshold, scale_score, filters)
        return reply(format_hits(hits, return_text, return_metadata))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_add(documents: list[dict[str, Any]]) -> ToolResult:
        """Add documents to the selected collection: each {"id", "contents", ...metadata} (or "title"/"text",
        or a "metadata" object). An id that exists is replaced. Embedded with the session's model and
        searchable at once by dense and BM25 search."""
        return reply(engine.add(documents))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_delete(ids: list[str] | str | None = None, filters: dict[str, Any] | None = None) -> ToolResult:
        """Delete documents by id and/or by filter (the filter language of the search tools)."""
        return reply(engine.delete(ids, filters))

    @mcp.tool(output_schema=None)
    @tool_errors
    def retriever_list_collections() -> ToolResult:
        """The collections of the configured store, with document counts, model and dimension.
        Select one with retriever_init(collection_name=...)."""
        return reply(engine.list_collections())

    register_web_tools(mcp, engine)  # retriever_websearch, retriever_{exa,tavily,zhipuai}_search (server_web.py)
    return mcp
