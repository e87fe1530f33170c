"""Embedding backends; `build_embedder(cfg)` picks one."""

from __future__ import annotations

from ..config import Config
from ..errors import NotYetSupportedError
from .base import Embedder


def build_embedder(cfg: Config) -> Embedder:
    match cfg.backend:
        case "sentence_transformers":
            from .sentence_transformers import SentenceTransformerEmbedder

            return SentenceTransformerEmbedder(cfg)
        case "openai":
            from .remote import ServerEmbedder, openai_settings

            return ServerEmbedder(openai_settings(cfg), cfg)
        case "infinity":
            from .remote import ServerEmbedder, infinity_settings

            return ServerEmbedder(infinity_settings(cfg), cfg)
        case "bm25":
            raise NotYetSupportedError(
                "backend 'bm25' has no dense embedder; use bm25_index / bm25_search, "
                "or set backend: sentence_transformers for dense search"
            )
        case other:
            raise NotYetSupportedError(
                f"backend {other!r} is accepted in parameter.yaml but not active in this release; "
                "use backend: sentence_transformers"
            )


__all__ = ["Embedder", "build_embedder"]
