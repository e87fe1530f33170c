"""The tool registry: every tool once, with its request model, its call, the reply keys it
declares, its effects, the profiles that list it and when it can work. Every face reads this
table and keeps no list of its own: the MCP server (mcp/), the deploy service's `/tools/<tool>`
(service/), `retriever run` and UltraRAG's `build` (pipeline/, api/ultrarag.py), the CLI and
the docs' tool reference (docs/tools.md, `python -m retriever.api.reference`).

Profiles (`tools.profile` in the YAML, `retriever serve --tools`), as GitHub's MCP server has
toolsets:

- `agent` (a plain `serve`): a few tools with agent-shaped replies (api/agent.py).
- `ultrarag` (`serve --ultrarag`): UltraRAG's retriever tools with its names, inputs, outputs and
  reply shapes, our extensions in the same shapes, and `build`.
- `full`: everything but `build`, which writes where a call says (UltraRAG's opt-in).

A tool whose `needs` is not met by the loaded configuration (a web provider with a key, an `llm`
section, a `retriever_url`, the images extra) is listed in no profile until it is."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from . import agent, calls, llm_calls, web_calls
from . import models as m
from .tool import ULTRARAG, Effects, Need, Tool

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

PROFILES = ("agent", "ultrarag", "full")
AGENT, FULL = {"agent", "full"}, {"full"}


OPEN = Effects(read_only=True, open_world=True)
BUILD = Effects(read_only=False, destructive=True, operator=True)  # writes an output; overwrite replaces it
WRITE = Effects(read_only=False, destructive=True)  # adds documents; an id that exists is replaced
DELETE = Effects(read_only=False, destructive=True)
SETUP = Effects(read_only=False, operator=True)  # retriever_init: changes the session (every HTTP caller's), writes nothing



def _llm(engine: Retriever) -> str | None:
    """an `llm` section"""
    return None if engine.base_config.llm.base_url else "an llm section in parameter.yaml (llm.base_url, llm.model)"


def _sources(engine: Retriever) -> str | None:
    """folders under `sources`"""
    return None if engine.base_config.sources else "folders under `sources:` in parameter.yaml"


def _deploy(engine: Retriever) -> str | None:
    """a `retriever_url` (or URLs from calls)"""
    cfg = engine.config
    if cfg.retriever_url or cfg.security.client_endpoints:
        return None
    return "retriever_url in parameter.yaml (a `retriever deploy` service)"


def _provider_key(engine: Retriever, provider: str) -> bool:
    from ..websearch.base import ENV_VARS

    cfg = engine.config
    key = getattr(cfg.websearch_backend_configs, provider).api_key
    return bool((key and key.get_secret_value().strip()) or os.environ.get(ENV_VARS[provider], "").strip())


def _web(provider: str | None = None) -> Need:
    """A provider with a key (the YAML's websearch_backend for the tools that default to it), or
    keys that calls may bring (security.client_endpoints, UltraRAG's mode)."""

    def need(engine: Retriever) -> str | None:
        cfg = engine.config
        if cfg.security.client_endpoints:
            return None
        name = provider or cfg.websearch_backend
        if name is None:
            return "websearch_backend in parameter.yaml and that provider's key"
        if _provider_key(engine, name):
            return None
        from ..websearch.base import key_hint

        return f"a {name} key: {key_hint(name)}"

    need.__doc__ = f"a {provider} key (or keys from calls)" if provider else "a web provider with a key"
    return need


def _memory(engine: Retriever) -> str | None:
    """Milvus, or UltraRAG's mode"""
    if engine.ultrarag or engine.config.index_backend == "milvus":
        return None
    return "index_backend milvus (UltraRAG's project memory is a Milvus collection per user)"


def _sparse(engine: Retriever) -> str | None:
    """a sparse model (sparse.model_name_or_path)"""
    if engine.config.sparse.model_name_or_path:
        return None
    return "sparse.model_name_or_path in parameter.yaml (a SPLADE-style folder; scripts/splade_tiny.sh fetches one)"


def _images(engine: Retriever) -> str | None:
    """the images extra"""
    if importlib.util.find_spec("pypdfium2") is None:
        return "the images extra: pip install 'mcp-retriever[images]'"
    return None


def build(engine: Retriever, r: m.BuildRequest) -> dict[str, Any]:
    """UltraRAG's `build(parameter_file)`: server.yaml beside the parameter file, listing the tools
    of the ultrarag profile (api/ultrarag.py)."""
    from pathlib import Path

    from ..security.guard import check_path
    from .ultrarag import write_server_yaml

    given = Path(r.parameter_file)
    path = check_path(given if given.is_absolute() else Path.cwd() / given, engine.base_config, engine.base_dir,
                      "parameter_file")
    return {"server_yaml": str(write_server_yaml(path, in_profile("ultrarag")))}


def _t(name: str, title: str, request: type[m.Request], call: Callable[..., Any], doc: str, outputs: str = "",
       **kw: Any) -> Tool:
    profiles = frozenset(kw.pop("profiles", ULTRARAG))
    return Tool(name, title, request, call, doc, tuple(filter(None, outputs.split(","))), profiles=profiles, **kw)


HITS = "ret_psg,ret_ids,ret_scores"
HITS_LS = "ret_psg_ls,ret_ids_ls,ret_scores_ls"
WEB = "ret_psg,ret_urls,ret_titles,ret_scores,errors"

TOOLS: tuple[Tool, ...] = (
    # ---- the agent's face (api/agent.py) ------------------------------------------------------
    _t("search", "Search the collection", agent.SearchRequest, agent.search, agent.SEARCH_DOC, "results",
       profiles=AGENT, output_schema=agent.SEARCH_SCHEMA, cli="search", compute=True),
    _t("get_document", "Read documents by id", agent.GetRequest, agent.get_document, agent.GET_DOC, "documents",
       profiles=AGENT, output_schema=agent.GET_SCHEMA),
    _t("add_documents", "Add documents", agent.AddRequest, agent.add_documents, agent.ADD_DOC, "added,replaced",
       effects=WRITE, profiles=AGENT, output_schema=agent.WRITE_SCHEMA, cli="add"),
    _t("ingest_document", "Ingest a document", agent.IngestRequest, agent.ingest_document, agent.INGEST_DOC, "ids",
       effects=WRITE, profiles=AGENT, output_schema=agent.INGEST_SCHEMA, long=True),
    _t("delete_documents", "Delete documents", agent.DeleteRequest, agent.delete_documents, agent.DELETE_DOC,
       "deleted", effects=DELETE, profiles=AGENT, output_schema=agent.DELETE_SCHEMA, cli="delete"),
    _t("list_collections", "List collections", agent.ListRequest, agent.list_collections, agent.LIST_DOC,
       "collections", profiles=AGENT, output_schema=agent.LIST_SCHEMA),
    _t("web_search", "Search the web", agent.WebRequest, agent.web_search, agent.WEB_DOC, "results",
       effects=OPEN, profiles=AGENT, needs=_web(), output_schema=agent.WEB_SCHEMA),
    # ---- lifecycle -------------------------------------------------------------------------------
    _t("retriever_init", "Open a collection", m.InitRequest, calls.init,
       "Load the corpus, the embedding model and any saved indexes. Arguments override parameter.yaml for this "
       "session (paths stay inside the folders the server allows; over HTTP the operator's settings cannot be "
       "changed unless the YAML allows it).", effects=SETUP,
       ultrarag_inputs="model_name_or_path,backend_configs,batch_size,corpus_path,gpu_ids,is_multimodal,backend,"
                       "index_backend,index_backend_configs,is_demo,collection_name"),
    _t("retriever_embed", "Embed the corpus", m.EmbedRequest, calls.embed,
       "Embed the corpus into an .npy file, a chunk at a time (progress on the server's stderr).", effects=BUILD,
       ultrarag_inputs="embedding_path,overwrite,is_multimodal", cli="index", long=True),
    _t("retriever_index", "Build the dense index", m.IndexRequest, calls.index,
       "Build the FAISS index from the embedding file and save it with its manifest.", effects=BUILD,
       ultrarag_inputs="embedding_path,overwrite,collection_name,corpus_path", cli="index", long=True),
    _t("retriever_search", "Dense search", m.SearchRequest, calls.search,
       "Dense search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first.", HITS,
       ultrarag_inputs="q_ls,top_k,query_instruction,collection_name", cli="search", compute=True),
    _t("retriever_batch_search", "Dense search, grouped", m.BatchSearchRequest, calls.batch_search,
       "Dense search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls.", HITS_LS,
       ultrarag_inputs="batch_query_list,top_k,query_instruction,collection_name"),
    _t("retriever_hybrid_search", "Hybrid search", m.HybridSearchRequest, calls.search,
       "Dense + BM25 at once, fused. Adds ret_sources: per hit, its rank and score in each retriever.",
       f"{HITS},ret_sources", cli="search", compute=True),
    _t("retriever_hybrid_batch_search", "Hybrid search, grouped", m.HybridBatchSearchRequest,
       calls.hybrid_batch_search,
       "Hybrid search for groups of queries. Returns ret_psg_ls, ret_ids_ls, ret_scores_ls, ret_sources_ls.",
       f"{HITS_LS},ret_sources_ls"),
    _t("retriever_multi_query_search", "Multi-query search", m.MultiQuerySearchRequest, calls.multi_query_search,
       "Several phrasings per question, each searched with `mode`, fused with RRF into one ranking per question. "
       "Returns ret_psg, ret_ids, ret_scores (one list per question) and ret_sources.", f"{HITS},ret_sources"),
    _t("retriever_fanout_search", "Search several collections", m.FanoutSearchRequest, calls.fanout_search,
       "One search over several collections, each with `mode`, fused with RRF into one list per query. Adds "
       "ret_collections (each hit's collection), ret_sources (its rank and score in each collection) and errors "
       "({collection: message} for those that failed).", f"{HITS},ret_collections,errors"),
    _t("retriever_deploy_search", "Search a deployed retriever", m.DeployClientRequest, calls.deploy_search,
       "Search the retriever service at retriever_url (`retriever deploy`, or UltraRAG's deploy server): UltraRAG's "
       "arguments plus mode (dense, bm25, hybrid), filters and the reply options. Returns ret_psg, ret_ids, "
       "ret_scores. Needs no retriever_init.", "ret_psg", effects=OPEN, needs=_deploy,
       ultrarag_inputs="retriever_url,q_ls,top_k,query_instruction"),
    _t("retriever_project_memory_search", "Search a user's memory", m.ProjectMemorySearchRequest,
       calls.project_memory_search,
       "UltraRAG's project memory: a dense search of collection user_<current_user_id>. Returns "
       "project_memory_content (passages, one list per query).", "project_memory_content", needs=_memory,
       ultrarag_inputs="q_ls,top_k,query_instruction,current_user_id"),
    _t("bm25_index", "Build the BM25 index", m.BM25IndexRequest, calls.bm25_index,
       "Build the BM25 index over the corpus and save it; searchable at once.", effects=BUILD,
       ultrarag_inputs="overwrite", cli="index", long=True),
    _t("sparse_index", "Build the learned-sparse index", m.SparseIndexRequest, calls.sparse_index,
       "Encode the corpus with parameter.yaml's sparse model (SPLADE-style) into an inverted index and save it "
       "(progress on the server's stderr); later adds join it at once. Searched with mode sparse, and in hybrid "
       "per sparse.hybrid.", effects=BUILD, needs=_sparse, cli="index"),
    _t("bm25_search", "BM25 search", m.BM25SearchRequest, calls.search,
       "BM25 search. Returns ret_psg, ret_ids, ret_scores: one list per query, best first.", HITS,
       ultrarag_inputs="q_ls,top_k", cli="search"),
    _t("retriever_add", "Add documents", m.AddRequest, calls.add,
       "Add documents to the selected collection, embedded with the session's model: searchable at once by dense "
       "search, and by BM25 and hybrid once the collection has a BM25 index (bm25_index; later adds join it at "
       "once). An id that exists is replaced.", effects=WRITE, cli="add"),
    _t("retriever_ingest", "Ingest a document", m.IngestRequest, calls.ingest,
       "Add a document (text as text/markdown/html, or a .txt/.md/.html/.pdf file the server may read): parsed, "
       "cut into chunks by the YAML's chunking settings, embedded and searchable at once. Returns the chunk ids "
       "(<source_id>:<n>); ingesting a source again replaces its chunks.", "ids", effects=WRITE),
    _t("sync_sources", "Sync the source folders", m.SyncRequest, calls.sync_sources,
       "Bring the collection in step with the folders under `sources:` in parameter.yaml: new and changed files "
       "parsed, chunked and embedded, moved ones re-filed, removed ones dropped; unchanged files are skipped. "
       "Returns counts, per-file errors and seconds per stage.", "files,new,changed,deleted,errors", effects=WRITE,
       profiles=FULL, needs=_sources, long=True),
    _t("retriever_build_image_corpus", "PDF pages to an image corpus", m.ImageCorpusRequest, calls.image_corpus,
       "Render every page of a PDF (or of each PDF in a folder) to a JPEG and write an image corpus "
       "({id, image_id, image_path, pdf, page} per page) for retriever_init(is_multimodal=true). Needs no "
       "retriever_init.", effects=BUILD, needs=_images),
    _t("retriever_rewrite_query", "Rewrite queries with the LLM", m.RewriteRequest, llm_calls.rewrite_query,
       "The LLM (llm section of parameter.yaml) rewrites each query into `n` search queries. Returns queries (one "
       "list per query; the query itself where the LLM failed) and warnings.", "queries", effects=OPEN, needs=_llm),
    _t("retriever_agentic_search", "Agentic search", m.AgenticSearchRequest, calls.agentic_search,
       "Search, let the LLM judge whether the hits answer the query, rewrite the query from what is missing and "
       "search again (rounds fused with RRF), until sufficient or max_rounds. Returns ret_psg, ret_ids, ret_scores, "
       "rounds (each round's query and judgement) and warnings (an LLM failure ends the rounds, keeping the hits).",
       f"{HITS},rounds", effects=OPEN, needs=_llm),
    _t("retriever_extract_triples", "Extract a knowledge graph", m.ExtractTriplesRequest, llm_calls.extract_triples,
       "The LLM extracts (subject, relation, object) triples from the collection's documents (or `ids`) into its "
       "graph, for retriever_graph_search. Returns counts and failed (document -> why).",
       effects=Effects(read_only=False, destructive=True, open_world=True), needs=_llm),
    _t("retriever_graph_search", "Graph search", m.GraphSearchRequest, calls.graph_search,
       "Seed hits from a `mode` search, then hops over the collection's triples (shared entities, the best `beam` "
       "triples by cosine to the query per hop). Each hit's metadata has hop (0 = seed) and the triple that "
       "reached it. Returns ret_psg, ret_ids, ret_scores (ret_meta with return_metadata).", HITS),
    _t("retriever_infer_filters", "Infer filters with the LLM", m.InferFiltersRequest, llm_calls.infer_filters,
       "The LLM writes the metadata filter each query implies, from a description of the collection's metadata; "
       "each is checked against the filter language. Returns filters (null where none) and warnings.", "filters",
       effects=OPEN, needs=_llm),
    _t("retriever_get_neighbors", "Chunks around a chunk", m.NeighborsRequest, calls.neighbors,
       "A chunk and the chunks before and after it in its document: ids, texts and the merged text.",
       "ids,texts,merged"),
    _t("retriever_delete", "Delete documents", m.DeleteRequest, calls.delete,
       "Delete documents by id and/or by filter (the filter language of the search tools).", effects=DELETE,
       cli="delete"),
    _t("retriever_list_collections", "List collections", m.ListCollectionsRequest, calls.list_collections,
       "The collections of the configured store, with document counts, model and dimension. Select one with "
       "retriever_init(collection_name=...).", "collections"),
    # ---- web (websearch/) ----------------------------------------------------------------------
    *(_t(f"retriever_{p}_search", f"Web search ({p})", m.ProviderSearchRequest, web_calls.provider(p),
         f"Web search through {p}, at most retrieve_thread_num queries at a time. Returns ret_psg, ret_urls, "
         "ret_titles, ret_scores (one list per query) and errors (per query null or why it failed).", WEB,
         effects=OPEN, needs=_web(p)) for p in web_calls.PROVIDERS),
    _t("retriever_websearch", "Web search", m.WebSearchRequest, web_calls.websearch,
       "Web search through websearch_backend (default: parameter.yaml's). Returns ret_psg, ret_urls, ret_titles, "
       "ret_scores and errors (per query null or why it failed).", "ret_psg", effects=OPEN, needs=_web(),
       ultrarag_inputs="q_ls,top_k,retrieve_thread_num,websearch_backend,websearch_backend_configs"),
    _t("retriever_batch_websearch", "Web search, grouped", m.WebBatchSearchRequest, web_calls.batch,
       "Web search for groups of queries, all in one concurrent pool. Returns ret_psg_ls, ret_urls_ls, "
       "ret_titles_ls, ret_scores_ls and errors_ls.", "ret_psg_ls", effects=OPEN, needs=_web(),
       ultrarag_inputs="batch_query_list,top_k,retrieve_thread_num,websearch_backend,websearch_backend_configs"),
    # ---- UltraRAG's build (api/ultrarag.py) ----------------------------------------------------
    _t("build", "Write UltraRAG's server.yaml", m.BuildRequest, build,
       "UltraRAG's build: write server.yaml (this server's tools, their inputs and outputs) beside parameter_file.",
       "server_yaml", effects=BUILD, profiles={"ultrarag"}),  # writes where a call says: UltraRAG's opt-in only
)
BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
# A request type's tool (the CLI and the Python API build requests): the classic tool where two share one
BY_REQUEST: dict[type[m.Request], Tool] = {t.request: t for t in reversed(TOOLS)}


def selected(profile: str = "agent", include: Iterable[str] = (), exclude: Iterable[str] = (),
             read_only: bool = False) -> list[Tool]:
    """The tools of `profile`, plus `include`, less `exclude`; `read_only` drops every tool that
    writes. exclude and read_only always win; a write left out takes its other face's twin with
    it (`-retriever_delete` leaves out `delete_documents` too), so no way to do it stays listed."""
    if profile not in PROFILES:
        raise ConfigError(f"tools.profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    unknown = [n for n in (*include, *exclude) if n not in BY_NAME]
    if unknown:
        raise ConfigError(f"tools.include / tools.exclude: no tool named {', '.join(map(repr, unknown))}; tools: "
                          f"{', '.join(BY_NAME)}")
    names = {t.name for t in TOOLS if profile in t.profiles} | set(include)
    names -= {*exclude, *(twin for n in exclude for twin in WRITE_TWINS.get(n, ()))}
    return [t for t in TOOLS if t.name in names and not (read_only and t.writes)]


# the agent's write and the classic one that does the same (both in the full profile)
_PAIRS = (("add_documents", "retriever_add"), ("ingest_document", "retriever_ingest"),
          ("delete_documents", "retriever_delete"))
WRITE_TWINS: dict[str, tuple[str, ...]] = {**{a: (b,) for a, b in _PAIRS}, **{b: (a,) for a, b in _PAIRS}}


def in_profile(profile: str) -> list[Tool]:
    return [t for t in TOOLS if profile in t.profiles]


def call(engine: Retriever, request: m.Request) -> Any:
    """Serve one request (the Python and command-line entry to the same code the tools run): the
    registry's tool that takes this request type."""
    return BY_REQUEST[type(request)].call(engine, request)


# ---- what a client is told -----------------------------------------------------------------------

def listed_input(engine: Retriever, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as tools/list gives it now: a `mode` that searches here offers
    `sparse` only where the configuration has a sparse model (retriever_deploy_search's mode is
    the deployed server's to judge)."""
    mode = schema.get("properties", {}).get("mode")
    if name == "retriever_deploy_search" or not mode or "sparse" not in mode.get("enum", ()) or not _sparse(engine):
        return schema
    narrowed = {**mode, "enum": [m for m in mode["enum"] if m != "sparse"]}
    return {**schema, "properties": {**schema["properties"], "mode": narrowed}}


FILTERS = ("Filters: {'field': 'meta.<key>' or 'id', 'operator': '==', '!=', '>', '>=', '<', '<=', 'in' or 'not in', "
           "'value': ...} or {'operator': 'AND'|'OR'|'NOT', 'conditions': [...]}; a filter that cannot match (a field "
           "no document has, a value of another type) comes back with a warning. ")
BUDGET = ("Large replies are cut to a budget: the reply's `truncated` says what was left out and the offset to page "
          "on.")


def instructions(engine: Retriever, tools: Iterable[Tool]) -> str:
    """What the tools are for, as this server is now: its profile's tools that the configuration
    lets work (those are listed; web_search without a key is not) and whether a collection is open."""
    names = {t.name for t in tools if t.unavailable(engine) is None}
    if "search" in names:
        text = ("Search a document collection. `search` finds passages (mode hybrid by default, the best; dense for "
                "meaning, bm25 for exact words); `get_document` reads a hit in full and the chunks around it")
        writes = [n for n in ("add_documents", "ingest_document", "delete_documents") if n in names]
        if writes:
            text += f"; {', '.join(writes)} change the collection"
        if "list_collections" in names:
            text += "; list_collections names the collections `search` can take"
        if "web_search" in names:
            text += "; web_search searches the web"
        return f"{text}. The server opens its collection on the first call. {FILTERS}{BUDGET}"
    start = ("A collection is open; retriever_init opens another. " if engine.session is not None
             else "Call retriever_init first (it opens the collection parameter.yaml names). ")
    return (f"Dense, BM25 and hybrid search over a local corpus, UltraRAG's retriever tools and more. {start}"
            "retriever_hybrid_search is the best ranking; retriever_search is dense only, bm25_search BM25 only. "
            f"Search tools take `filters`. {FILTERS}{BUDGET}")
