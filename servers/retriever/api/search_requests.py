"""The search requests: each search tool's (`bm25_search`, `sparse_search`, `retriever_search`,
`retriever_hybrid_search` and their batches) and, derived from each kind's record (search/kinds.py
KINDS), the request of every kind of search (SEARCH_REQUESTS). models.py holds the other tools'
requests and imports these."""

from __future__ import annotations

from typing import ClassVar

from ..indexes.base import ann_settings
from ..search.kinds import ANN, FUSION, INSTRUCTION, KINDS, Kind
from .fields import (
    RRFK,
    AutoMerge,
    BatchQueries,
    CandidateDepth,
    EfSearch,
    Filters,
    Fusion,
    LLMRerankOption,
    MaxBytes,
    MaxChars,
    NProbe,
    Offset,
    Queries,
    QueryInstruction,
    ReturnMetadata,
    ReturnText,
    ScaleScore,
    ScoreThreshold,
    Searched,
    TopK,
    VectorWeight,
    Window,
)
from .request import Request

SCORES = ("score_threshold", "scale_score", "filters")  # the options of _Scores, as the engine takes them


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
