"""The requests of every tool, typed once. Each field is described (api/fields.py), and the
description lands in the MCP input schema; the MCP table (mcp/table.py) and the command line
build these models, and api/calls.py turns each into an engine call and a reply."""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ..errors import InvalidInputError
from ..indexes.base import ann_settings
from ..search.kinds import ANN, DEFAULT_MODE, FUSION, INSTRUCTION, KINDS, Kind
from .fields import (
    RRFK,
    Around,
    AutoMerge,
    Backend,
    BackendConfigs,
    BatchQueries,
    BatchSize,
    Beam,
    CandidateDepth,
    ChunkId,
    CollectionName,
    Collections,
    CorpusPath,
    DeployMode,
    Description,
    DocFormat,
    DocPath,
    Documents,
    EfSearch,
    EmbeddingPath,
    Filters,
    Fusion,
    GpuIds,
    Hops,
    Ids,
    ImageCorpusPath,
    IndexBackend,
    IndexBackendConfigs,
    IndexedCollection,
    IndexedCorpus,
    IndexPath,
    IngestText,
    IsDemo,
    IsMultimodal,
    LLMRerankOption,
    MaxBytes,
    MaxChars,
    Metadata,
    Mode,
    ModelName,
    NProbe,
    Offset,
    Overwrite,
    ParameterFile,
    PdfSource,
    Queries,
    QueryInstruction,
    QuestionList,
    RetrieverURL,
    ReturnMetadata,
    ReturnText,
    Rewrites,
    Rounds,
    ScaleScore,
    ScoreThreshold,
    Searched,
    SeedK,
    SourceId,
    Sufficiency,
    ThreadNum,
    TopK,
    TripleIds,
    UserId,
    VectorWeight,
    WebBackend,
    WebConfigs,
    Window,
    non_finite,
)


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    @model_validator(mode="after")
    def _finite(self) -> Request:
        return self.check_finite()

    def check_finite(self) -> Request:
        """NaN and infinities (JSON has neither) are refused in every argument, nested ones included (also run on
        a request built from arguments validated by signature: mcp/core.py). Not a ValueError: the frameworks
        that build requests inside a tool's body pass it on as the client's error, not as a bug."""
        for name in type(self).model_fields:
            where = non_finite(getattr(self, name))
            if where is not None:
                raise InvalidInputError(f"invalid arguments: {name}{where[:200]}: NaN and infinite numbers are "
                                        "refused (JSON has none); send a finite number, a string or null")
        return self

    def options(self, *names: str) -> dict[str, Any]:
        return {n: getattr(self, n) for n in names}


SCORES = ("score_threshold", "scale_score", "filters")  # the options of _Scores, as the engine takes them


# ---- lifecycle ----------------------------------------------------------------------------------


class InitRequest(Request):
    model_name_or_path: ModelName = None
    corpus_path: CorpusPath = None
    embedding_path: EmbeddingPath = None
    backend: Backend = None
    backend_configs: BackendConfigs = None
    index_backend: IndexBackend = None
    index_backend_configs: IndexBackendConfigs = None
    batch_size: BatchSize = None
    gpu_ids: GpuIds = None
    is_multimodal: IsMultimodal = None
    is_demo: IsDemo = None
    collection_name: CollectionName = None
    top_k: TopK = None
    query_instruction: QueryInstruction = None
    overwrite: Overwrite = None


class EmbedRequest(Request):
    embedding_path: EmbeddingPath = None
    overwrite: Overwrite = None
    is_multimodal: IsMultimodal = None


class IndexRequest(Request):
    embedding_path: EmbeddingPath = None
    overwrite: Overwrite = None
    index_path: IndexPath = None
    collection_name: IndexedCollection = None
    corpus_path: IndexedCorpus = None


class BM25IndexRequest(Request):
    overwrite: Overwrite = None


class SparseIndexRequest(Request):
    overwrite: Overwrite = None


class ImageCorpusRequest(Request):
    parse_file_path: PdfSource
    image_corpus_save_path: ImageCorpusPath
    overwrite: Overwrite = None


class AddRequest(Request):
    documents: Documents


class IngestRequest(Request):
    text: IngestText = None
    format: DocFormat = "text"
    path: DocPath = None
    source_id: SourceId = None
    metadata: Metadata = None


class SyncRequest(Request):
    """No arguments: the folders are the YAML's `sources` (a call names no path)."""


class NeighborsRequest(Request):
    id: ChunkId
    before: Around = 1
    after: Around = 1


class DeleteRequest(Request):
    ids: Ids = None
    filters: Filters = None


class ListCollectionsRequest(Request):
    pass


# ---- search -------------------------------------------------------------------------------------


class _Scores(Request):
    score_threshold: ScoreThreshold = None
    scale_score: ScaleScore = False
    filters: Filters = None


class _Reply(Request):
    """How the hits come back: text, metadata, paging and the reply budget (api/replies.py)."""

    window: Window = 0
    auto_merge: AutoMerge = None
    return_text: ReturnText = True
    return_metadata: ReturnMetadata = False
    offset: Offset = 0
    max_bytes: MaxBytes = None
    max_chars: MaxChars = None


class BM25SearchRequest(_Scores, _Reply):
    kind: ClassVar[str] = "bm25"  # the kind of search (search/kinds.py) this request asks for
    query_list: Queries
    top_k: TopK = None
    collection_name: Searched = None
    llm_rerank: LLMRerankOption = None


class SparseSearchRequest(BM25SearchRequest):
    """A learned-sparse search (the `sparse` kind: parameter.yaml's sparse model); BM25's options."""

    kind: ClassVar[str] = "sparse"


class _Ann(Request):
    """Search-time effort of an approximate (ANN) dense index, for this call."""

    nprobe: NProbe = None
    ef_search: EfSearch = None

    def ann(self) -> dict[str, int] | None:
        """FAISS's names for the parameters set (None: the YAML's)."""
        return ann_settings(self) or None


class SearchRequest(BM25SearchRequest, _Ann):
    kind: ClassVar[str] = "dense"
    query_instruction: QueryInstruction = None


class BatchSearchRequest(_Scores, _Reply, _Ann):
    batch_query_list: BatchQueries
    top_k: TopK = None
    query_instruction: QueryInstruction = None
    collection_name: Searched = None


class _Fusion(Request):
    fusion: Fusion = None
    vector_weight: VectorWeight = None
    rrf_k: RRFK = None
    candidate_depth: CandidateDepth = None


class HybridSearchRequest(SearchRequest, _Fusion):
    kind: ClassVar[str] = "hybrid"


class HybridBatchSearchRequest(BatchSearchRequest, _Fusion):
    pass


# The request of each search kind (search/kinds.py KINDS), derived from its record: a tool's own
# request where a tool searches that kind (UltraRAG's names), else one made with the options the
# kind takes. The CLI, the deploy service, the agent's search and the LLM tools read it.
_OPTIONS: dict[tuple[str, ...], type[BM25SearchRequest]] = {
    (): BM25SearchRequest, (INSTRUCTION, ANN): SearchRequest, (INSTRUCTION, ANN, FUSION): HybridSearchRequest}
_TOOLS = {c.kind: c for c in (BM25SearchRequest, SparseSearchRequest, SearchRequest, HybridSearchRequest)}


def _request_of(k: Kind) -> type[BM25SearchRequest]:
    if k.name in _TOOLS:
        return _TOOLS[k.name]
    base = _OPTIONS[k.options]
    return type(f"{k.name.title()}SearchRequest", (base,), {"kind": k.name, "__module__": __name__,
                                                          "__annotations__": {"kind": "ClassVar[str]"}})


SEARCH_REQUESTS: dict[str, type[BM25SearchRequest]] = {name: _request_of(k) for name, k in KINDS.items()}


class _Modes(_Scores, _Reply):
    """A search that runs a retriever kind (`mode`) per phrasing or per collection, then fuses."""

    top_k: TopK = None
    mode: Mode = DEFAULT_MODE
    query_instruction: QueryInstruction = None
    candidate_depth: CandidateDepth = None


class MultiQuerySearchRequest(_Modes):
    question_list: QuestionList


class FanoutSearchRequest(_Modes):
    query_list: Queries
    collections: Collections


class RewriteRequest(Request):
    query_list: Queries
    n: Rewrites = 3


class AgenticSearchRequest(_Modes):
    query_list: Queries
    max_rounds: Rounds = 3
    sufficiency: Sufficiency = 0.7
    collection_name: Searched = None


class ExtractTriplesRequest(Request):
    ids: TripleIds = None


class GraphSearchRequest(_Scores, _Reply):
    query_list: Queries
    top_k: TopK = None
    mode: Mode = "dense"
    query_instruction: QueryInstruction = None
    seed_k: SeedK = 5
    hops: Hops = 2
    beam: Beam = 5
    collection_name: Searched = None


class InferFiltersRequest(Request):
    query_list: Queries
    description: Description = None


class ProjectMemorySearchRequest(Request):
    """UltraRAG's retriever_project_memory_search: a dense search of collection `user_<id>`."""

    query_list: Queries
    top_k: TopK = None
    query_instruction: QueryInstruction = None
    current_user_id: UserId = ""


class BuildRequest(Request):
    """UltraRAG's build tool (served with `retriever serve --ultrarag`)."""

    parameter_file: ParameterFile


# ---- a deployed retriever (`retriever deploy`) ---------------------------------------------------


class DeploySearchRequest(_Scores, _Reply, _Fusion):
    """`POST /search` of `retriever deploy`: UltraRAG's deploy API (query_list, top_k,
    query_instruction, collection_name) and our options, for one search of `mode`."""

    query_list: Queries
    top_k: TopK = None
    query_instruction: QueryInstruction = None
    collection_name: Searched = None
    mode: DeployMode = None

    def as_search(self, default: str = DEFAULT_MODE) -> BM25SearchRequest:
        """The search tool's request this one is (SearchRequest, BM25SearchRequest or
        HybridSearchRequest); without a mode, `default` (the engine's default_mode: hybrid where
        the collection answers it). UltraRAG's collection_name "" means the service's own collection."""
        mode = self.mode or default
        fusion = {k: v for k, v in self.options(*_Fusion.model_fields).items() if v is not None}
        if fusion and FUSION not in KINDS[mode].options:
            raise InvalidInputError(f"{', '.join(fusion)} apply to mode 'hybrid', not {mode!r}")
        data = self.model_dump(exclude={"mode", *_Fusion.model_fields})
        data["collection_name"] = self.collection_name or None
        if INSTRUCTION not in KINDS[mode].options:
            data.pop("query_instruction")  # UltraRAG's clients always send one; BM25 has no use for it
        return SEARCH_REQUESTS[mode](**data, **fusion)


class DeployClientRequest(DeploySearchRequest):
    """retriever_deploy_search: the same request, sent to the service at `retriever_url`."""

    retriever_url: RetrieverURL = None


# ---- web ----------------------------------------------------------------------------------------


class ProviderSearchRequest(Request):
    query_list: Queries
    top_k: TopK = None
    retrieve_thread_num: ThreadNum = None


class WebSearchRequest(ProviderSearchRequest):
    websearch_backend: WebBackend = None
    websearch_backend_configs: WebConfigs = None


class WebBatchSearchRequest(Request):
    batch_query_list: BatchQueries
    top_k: TopK = None
    websearch_backend: WebBackend = None
    retrieve_thread_num: ThreadNum = None
    websearch_backend_configs: WebConfigs = None


def unreadable_json(e: ValueError | RecursionError) -> str:
    """What makes JSON unreadable to Python (a number past its int <-> str limit, nesting past the
    recursion limit), said for the client who sent it."""
    if isinstance(e, RecursionError):
        return "the JSON is nested too deeply"
    if "integer string conversion" in str(e):
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return " ".join(str(e).split())


def argument_problems(e: Exception) -> str:
    """`top_k: Input should be greater than or equal to 1 (got 0)` per wrong argument."""
    cause = e if isinstance(e, ValidationError) else e.__cause__
    if not isinstance(cause, ValidationError):
        return " ".join(str(e).split())
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                     + ("" if isinstance(err.get("input"), (dict, list)) else f" (got {err.get('input')!r})")
                     for err in cause.errors())
