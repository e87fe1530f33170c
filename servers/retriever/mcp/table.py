"""The tool table: name -> request model -> engine call (api/calls.py) -> reply. A tool's
signature (and so its input schema) is made from its request model, whose fields are described."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastmcp.tools.base import ToolResult
from mcp.types import ToolAnnotations

from ..api import models as m
from ..api.calls import CALLS
from ..api.models import Request
from ..api.replies import reply
from ..pipeline.ultrarag import adapt
from .middleware import run

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from ..engine import Retriever

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
BUILD = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
OPEN_WORLD = ToolAnnotations(  # reads from a service elsewhere (web search, a deployed retriever)
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    request: type[Request]
    annotations: ToolAnnotations
    doc: str
    writes: bool = False  # left out when the server is read-only


TOOLS = (
    Tool("retriever_init", "Open a collection", m.InitRequest, CHANGE,
         "Load the corpus, the embedding model and any saved indexes. Arguments override parameter.yaml for this "
         "session (paths stay inside the folders the server allows; over HTTP the operator's settings cannot be "
         "changed unless the YAML allows it)."),
    Tool("retriever_embed", "Embed the corpus", m.EmbedRequest, BUILD,
         "Embed the corpus into an .npy file, a chunk at a time (progress on the server's stderr).", writes=True),
    Tool("retriever_index", "Build the dense index", m.IndexRequest, BUILD,
         "Build the FAISS index from the embedding file and save it with its manifest.", writes=True),
    Tool("retriever_search", "Dense search", m.SearchRequest, READ,
         "Dense search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first."),
    Tool("retriever_batch_search", "Dense search, grouped", m.BatchSearchRequest, READ,
         "Dense search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls."),
    Tool("retriever_hybrid_search", "Hybrid search", m.HybridSearchRequest, READ,
         "Dense + BM25 at once, fused. Adds ret_sources: per hit, its rank and score in each retriever."),
    Tool("retriever_hybrid_batch_search", "Hybrid search, grouped", m.HybridBatchSearchRequest, READ,
         "Hybrid search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls, ret_sources_ls."),
    Tool("retriever_multi_query_search", "Multi-query search", m.MultiQuerySearchRequest, READ,
         "Several phrasings per question, each searched with `mode`, fused with RRF into one ranking per question. "
         "Returns ret_psg, ret_ids, ret_scores (one list per question) and ret_sources."),
    Tool("retriever_fanout_search", "Search several collections", m.FanoutSearchRequest, READ,
         "One search over several collections, each with `mode`, fused with RRF into one list per query. Adds "
         "ret_collections (each hit's collection), ret_sources (its rank and score in each collection) and errors "
         "({collection: message} for those that failed)."),
    Tool("retriever_deploy_search", "Search a deployed retriever", m.DeployClientRequest, OPEN_WORLD,
         "Search the retriever service at retriever_url (`retriever deploy`, or UltraRAG's deploy server): UltraRAG's "
         "arguments plus mode (dense, bm25, hybrid), filters and the reply options. Returns ret_psg, ret_ids, "
         "ret_scores. Needs no retriever_init."),
    Tool("retriever_project_memory_search", "Search a user's memory", m.ProjectMemorySearchRequest, READ,
         "UltraRAG's project memory: a dense search of collection user_<current_user_id>. Returns "
         "project_memory_content (passages, one list per query)."),
    Tool("bm25_index", "Build the BM25 index", m.BM25IndexRequest, BUILD,
         "Build the BM25 index over the corpus and save it; searchable at once.", writes=True),
    Tool("bm25_search", "BM25 search", m.BM25SearchRequest, READ,
         "BM25 search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first."),
    Tool("retriever_add", "Add documents", m.AddRequest, CHANGE,
         "Add documents to the selected collection, embedded with the session's model and searchable at once by "
         "dense and BM25 search. An id that exists is replaced.", writes=True),
    Tool("retriever_ingest", "Ingest a document", m.IngestRequest, CHANGE,
         "Add a document (text as text/markdown/html, or a .txt/.md/.html/.pdf file the server may read): parsed, "
         "cut into chunks by the YAML's chunking settings, embedded and searchable at once. Returns the chunk ids "
         "(<source_id>:<n>); ingesting a source again replaces its chunks.", writes=True),
    Tool("retriever_build_image_corpus", "PDF pages to an image corpus", m.ImageCorpusRequest, BUILD,
         "Render every page of a PDF (or of each PDF in a folder) to a JPEG and write an image corpus "
         "({id, image_id, image_path, pdf, page} per page) for retriever_init(is_multimodal=true). Needs no "
         "retriever_init.", writes=True),
    Tool("retriever_rewrite_query", "Rewrite queries with the LLM", m.RewriteRequest, READ,
         "The LLM (llm section of parameter.yaml) rewrites each query into `n` search queries. Returns queries (one "
         "list per query; the query itself where the LLM failed) and warnings."),
    Tool("retriever_agentic_search", "Agentic search", m.AgenticSearchRequest, READ,
         "Search, let the LLM judge whether the hits answer the query, rewrite the query from what is missing and "
         "search again (rounds fused with RRF), until sufficient or max_rounds. Returns ret_psg, ret_ids, ret_scores, "
         "rounds (each round's query and judgement) and warnings (an LLM failure ends the rounds, keeping the hits)."),
    Tool("retriever_extract_triples", "Extract a knowledge graph", m.ExtractTriplesRequest, CHANGE,
         "The LLM extracts (subject, relation, object) triples from the collection's documents (or `ids`) into its "
         "graph, for retriever_graph_search. Returns counts and failed (document -> why).", writes=True),
    Tool("retriever_graph_search", "Graph search", m.GraphSearchRequest, READ,
         "Seed hits from a `mode` search, then hops over the collection's triples (shared entities, the best `beam` "
         "triples by cosine to the query per hop). Each hit's metadata has hop (0 = seed) and the triple that "
         "reached it. Returns ret_psg, ret_ids, ret_scores (ret_meta with return_metadata)."),
    Tool("retriever_infer_filters", "Infer filters with the LLM", m.InferFiltersRequest, READ,
         "The LLM writes the metadata filter each query implies, from a description of the collection's metadata; "
         "each is checked against the filter language. Returns filters (null where none) and warnings."),
    Tool("retriever_get_neighbors", "Chunks around a chunk", m.NeighborsRequest, READ,
         "A chunk and the chunks before and after it in its document: ids, texts and the merged text."),
    Tool("retriever_delete", "Delete documents", m.DeleteRequest, DELETE,
         "Delete documents by id and/or by filter (the filter language of the search tools).", writes=True),
    Tool("retriever_list_collections", "List collections", m.ListCollectionsRequest, READ,
         "The collections of the configured store, with document counts, model and dimension. Select one with "
         "retriever_init(collection_name=...)."),
)


def tool_function(name: str, model: type[Request], doc: str,
                  serve: Callable[[Request], Awaitable[dict[str, Any]]]) -> Callable[..., Awaitable[ToolResult]]:
    """An async function whose keyword parameters are `model`'s fields (with their descriptions,
    defaults and ranges), so FastMCP's input schema is the model's; it validates into the model
    and serves it."""
    fields = sorted(model.model_fields.items(), key=lambda item: not item[1].is_required())
    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[f.annotation, f],
                                default=inspect.Parameter.empty if f.is_required() else f.default)
              for n, f in fields]

    async def tool(**arguments: Any) -> ToolResult:
        return reply(await serve(model.model_validate(arguments)))

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = doc
    tool.__signature__ = inspect.Signature(params, return_annotation=ToolResult)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": ToolResult}
    return tool


def register(mcp: FastMCP, engine: Retriever, read_only: bool) -> None:
    for spec in TOOLS:
        if read_only and spec.writes:
            continue
        call = CALLS[spec.request]

        async def serve(request: Request, name: str = spec.name, call: Any = call) -> dict[str, Any]:
            if engine.ultrarag:
                request = adapt(request, engine.config.index_backend)
            return await run(name, call, engine, request)

        fn = tool_function(spec.name, spec.request, spec.doc, serve)
        mcp.tool(fn, output_schema=None, annotations=spec.annotations, title=spec.title)


def register_build(mcp: FastMCP, engine: Retriever) -> None:
    """UltraRAG's `build(parameter_file)`: server.yaml beside the parameter file."""
    from pathlib import Path

    from ..guard import check_path
    from ..pipeline.ultrarag import write_server_yaml

    tools: dict[str, type[Request]] = {t.name: t.request for t in TOOLS}
    tools["retriever_websearch"] = m.WebSearchRequest
    tools["retriever_batch_websearch"] = m.WebBatchSearchRequest

    def build(engine: Retriever, r: m.BuildRequest) -> dict[str, Any]:
        given = Path(r.parameter_file)
        path = check_path(given if given.is_absolute() else Path.cwd() / given, engine.base_config, engine.base_dir,
                          "parameter_file")
        return {"server_yaml": str(write_server_yaml(path, tools))}

    async def serve(request: Request) -> dict[str, Any]:
        return await run("build", build, engine, request)

    mcp.tool(tool_function("build", m.BuildRequest, "UltraRAG's build: write server.yaml (this server's tools, "
                           "their inputs and outputs) beside parameter_file.", serve),
             output_schema=None, annotations=CHANGE, title="Write UltraRAG's server.yaml")
