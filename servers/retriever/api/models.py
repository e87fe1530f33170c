"""The requests of every tool, typed once. Each field is described (api/fields.py), and the
description lands in the MCP input schema; the MCP table (mcp/table.py) and the command line
build these models, and api/calls.py turns each into an engine call and a reply.

The base every request shares is request.py's and the search tools' requests (with the request of
every kind of search, SEARCH_REQUESTS) are search_requests.py's; both are imported from here too."""

from __future__ import annotations

from ..errors import InvalidInputError
from ..search.kinds import DEFAULT_MODE, FUSION, INSTRUCTION, KINDS
from .fields import (
    Around,
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
    EmbeddingPath,
    Filters,
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
    Metadata,
    Mode,
    ModelName,
    Overwrite,
    ParameterFile,
    PdfSource,
    Queries,
    QueryInstruction,
    QuestionList,
    RetrieverURL,
    Rewrites,
    Rounds,
    Searched,
    SeedK,
    SourceId,
    Sufficiency,
    ThreadNum,
    TopK,
    TripleIds,
    UserId,
    WebBackend,
    WebConfigs,
)
from .request import Request
from .request import argument_problems as argument_problems  # re-exported: the faces import these here
from .request import unreadable_json as unreadable_json
from .search_requests import SCORES as SCORES
from .search_requests import SEARCH_REQUESTS, BM25SearchRequest, _Fusion, _Reply, _Scores
from .search_requests import BatchSearchRequest as BatchSearchRequest
from .search_requests import HybridBatchSearchRequest as HybridBatchSearchRequest
from .search_requests import HybridSearchRequest as HybridSearchRequest
from .search_requests import SearchRequest as SearchRequest
from .search_requests import SparseSearchRequest as SparseSearchRequest

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


# ---- search (the search tools' own requests: search_requests.py) ---------------------------------




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
