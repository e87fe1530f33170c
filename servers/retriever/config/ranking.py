"""parameter.yaml's ranking sections past dense and BM25: `rerank` (a cross-encoder stage on every
search, search/rerank.py) and `sparse` (a learned-sparse retriever, search/learned_sparse.py).

Both name a model or a server; those come from the operator's YAML only, never from a tool call
(security/guard.py refuses a call that changes them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from .base import ResolvedPath, Section

RerankAPI = Literal["cohere", "tei"]


class RerankConfig(Section):
    """A cross-encoder reranks each search's first `depth` hits; off while neither a model nor a
    URL is set. Failures keep the retrieval order, with a warning."""

    # a sentence-transformers CrossEncoder folder, run in this process
    model_name_or_path: str | None = None
    # or a rerank server: cohere = POST {url}/rerank {query, documents} -> results[index,
    # relevance_score] (Infinity, vLLM, Jina, Cohere); tei = TEI's own {query, texts} -> [index, score]
    url: str | None = None
    api: RerankAPI = "cohere"
    model_name: str | None = None  # the model name sent to the server (Infinity: --served-model-name)
    api_key: SecretStr | None = None  # sent as a bearer token; never logged
    timeout: float = Field(60.0, gt=0)  # seconds per request
    depth: int = Field(50, ge=1)  # hits per query reranked (a search of top_k > depth reranks top_k)
    batch_size: int = Field(32, ge=1)  # pairs per forward pass (in process) or documents per request (server)
    max_length: int | None = Field(None, ge=8)  # word pieces per pair; empty: the model's own
    # requests one search call sends to a rerank server; past them each query keeps its retrieval
    # order, with a warning naming this key (20 queries x top_k 1000 sent 640 requests)
    max_requests: int = Field(200, ge=1)

    @model_validator(mode="after")
    def _one_source(self) -> RerankConfig:
        if self.model_name_or_path and self.url:
            raise ValueError("rerank: set model_name_or_path (in process) or url (a rerank server), not both")
        return self

    @property
    def active(self) -> bool:
        return bool(self.model_name_or_path or self.url)


SparseInHybrid = Literal["off", "fused", "instead_of_bm25"]


class SparseConfig(Section):
    """A learned-sparse retriever (SPLADE and its kin): sentence-transformers' SparseEncoder over a
    masked-language-model folder, its vectors in an inverted index on disk (indexes/inverted.py)."""

    model_name_or_path: str | None = None  # a SPLADE-style folder (MLM head); empty: no sparse retriever
    save_path: ResolvedPath = Path("index/sparse")  # the default collection's index; a named one: collections_path/<name>/sparse
    batch_size: int = Field(32, ge=1)  # texts per forward pass
    max_seq_length: int | None = Field(256, ge=8)  # word pieces per text; empty: the model's own
    # hybrid search: off = dense + BM25; fused = dense + BM25 + sparse; instead_of_bm25 = dense + sparse
    hybrid: SparseInHybrid = "off"
