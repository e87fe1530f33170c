"""The requests of every tool, typed once. Each field is described (api/fields.py), and the
description lands in the MCP input schema; the MCP table (mcp/table.py) and the command line
build these models, and api/calls.py turns each into an engine call and a reply."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from .fields import (
    RRFK,
    Backend,
    BackendConfigs,
    BatchQueries,
    BatchSize,
    CandidateDepth,
    CollectionName,
    Collections,
    CorpusPath,
    Documents,
    EmbeddingPath,
    Filters,
    Fusion,
    GpuIds,
    Ids,
    IndexBackend,
    IndexBackendConfigs,
    IndexPath,
    IsDemo,
    IsMultimodal,
    MaxBytes,
    MaxChars,
    Mode,
    ModelName,
    Offset,
    Overwrite,
    Queries,
    QueryInstruction,
    QuestionList,
    ReturnMetadata,
    ReturnText,
    ScaleScore,
    ScoreThreshold,
    ThreadNum,
    TopK,
    VectorWeight,
    WebBackend,
)


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def options(self, *names: str) -> dict[str, Any]:
        return {n: getattr(self, n) for n in names}


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


class IndexRequest(Request):
    embedding_path: EmbeddingPath = None
    overwrite: Overwrite = None
    index_path: IndexPath = None


class BM25IndexRequest(Request):
    overwrite: Overwrite = None


class AddRequest(Request):
    documents: Documents


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

    return_text: ReturnText = True
    return_metadata: ReturnMetadata = False
    offset: Offset = 0
    max_bytes: MaxBytes = None
    max_chars: MaxChars = None


class BM25SearchRequest(_Scores, _Reply):
    query_list: Queries
    top_k: TopK = None


class SearchRequest(BM25SearchRequest):
    query_instruction: QueryInstruction = None


class BatchSearchRequest(_Scores, _Reply):
    batch_query_list: BatchQueries
    top_k: TopK = None
    query_instruction: QueryInstruction = None


class _Fusion(Request):
    fusion: Fusion = None
    vector_weight: VectorWeight = None
    rrf_k: RRFK = None
    candidate_depth: CandidateDepth = None


class HybridSearchRequest(SearchRequest, _Fusion):
    pass


class HybridBatchSearchRequest(BatchSearchRequest, _Fusion):
    pass


class _Modes(_Scores, _Reply):
    """A search that runs a retriever kind (`mode`) per phrasing or per collection, then fuses."""

    top_k: TopK = None
    mode: Mode = "hybrid"
    query_instruction: QueryInstruction = None
    candidate_depth: CandidateDepth = None


class MultiQuerySearchRequest(_Modes):
    question_list: QuestionList


class FanoutSearchRequest(_Modes):
    query_list: Queries
    collections: Collections


# ---- web ----------------------------------------------------------------------------------------


class ProviderSearchRequest(Request):
    query_list: Queries
    top_k: TopK = None
    retrieve_thread_num: ThreadNum = None


class WebSearchRequest(ProviderSearchRequest):
    websearch_backend: WebBackend = None


class WebBatchSearchRequest(Request):
    batch_query_list: BatchQueries
    top_k: TopK = None
    websearch_backend: WebBackend = None
    retrieve_thread_num: ThreadNum = None
