"""The typed `index_backend_configs.milvus` section (UltraRAG's keys plus `metadata_field_name`).

Kept apart from config/__init__.py, which imports `MilvusConfig` from here; the Milvus layer
(indexes/milvus*.py) reads its names and fields from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

NAME_PATTERN = re.compile(r"[A-Za-z0-9_]{1,255}")  # a collection's name


@dataclass(frozen=True)
class MilvusFields:
    """Field names and VARCHAR limits of a collection's schema."""

    id: str = "id"
    vector: str = "vector"
    text: str = "contents"
    metadata: str = "metadata"
    id_max_length: int = 256
    text_max_length: int = 65535




class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class MilvusConfig(_Model):
    """`uri`: a local path ending in `.db` is Milvus Lite; `http://host:port` is a Milvus server.

    `token` is "user:password" or an API key; prefer the MILVUS_TOKEN environment variable to
    writing it in the YAML. It never appears in logs or errors.
    """

    uri: str = "index/milvus.db"
    token: str | None = None
    id_field_name: str = "id"
    vector_field_name: str = "vector"
    text_field_name: str = "contents"
    metadata_field_name: str = "metadata"  # an extension: the record's other fields as JSON
    id_max_length: int = Field(256, ge=1, le=65535)
    text_max_length: int = Field(65535, ge=1, le=65535)  # UTF-8 bytes; longer texts are refused
    metric_type: Literal["IP", "COSINE", "L2"] = "IP"
    index_params: dict[str, Any] | None = None  # default: exact FLAT with metric_type
    search_params: dict[str, Any] | None = None  # e.g. {"params": {"ef": 64}} for HNSW
    index_chunk_size: int = Field(1000, ge=1)
    # Reads right after this process's own write are Strong (they see it); other reads use this
    # level. Strong costs ~200 ms a query on a server; set it where another process writes.
    read_consistency: Literal["Strong", "Bounded", "Session", "Eventually"] = "Bounded"
    # Milvus holds everything: documents, dense vectors and a BM25 sparse vector made by Milvus's
    # BM25 function (analyzer from backend_configs.bm25.lang), so dense, BM25 and hybrid search run
    # against Milvus alone, with no local corpus or index files (as is_demo, plus BM25). Needs Milvus
    # 2.5 or newer, or Milvus Lite 3.x (checked at retriever_init). indexes/milvus/fulltext.py
    full_text: bool = False
    sparse_field_name: str = "sparse"  # the BM25 sparse vector field (full_text)
    # Who analyses the text for Milvus's BM25 (full_text). bm25s: this server, as the local BM25 does
    # (lowercase, stop words, Snowball stems: backend_configs.bm25); Milvus's BM25 function reads those
    # terms from a field of their own (terms_field_name), the text stays as it was in its field.
    # milvus: Milvus's analyzer reads the text field itself (no stemming on Milvus Lite).
    full_text_analyzer: Literal["bm25s", "milvus"] = "bm25s"
    terms_field_name: str = "terms"  # the analysed terms (full_text_analyzer: bm25s)

    @field_validator("id_field_name", "vector_field_name", "text_field_name", "metadata_field_name", "sparse_field_name",
                     "terms_field_name")
    @classmethod
    def _field_name(cls, value: str) -> str:
        if not NAME_PATTERN.fullmatch(value):
            raise ValueError(f"{value!r} is not a valid Milvus field name: use letters, digits and _, at most 255")
        return value

    def fields(self) -> MilvusFields:
        return MilvusFields(
            id=self.id_field_name,
            vector=self.vector_field_name,
            text=self.text_field_name,
            metadata=self.metadata_field_name,
            id_max_length=self.id_max_length,
            text_max_length=self.text_max_length,
        )
