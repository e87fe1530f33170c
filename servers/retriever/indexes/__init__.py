"""Vector index backends; `build_index(cfg)` / `load_index(cfg)` pick one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotYetSupportedError
from .base import VectorIndex

if TYPE_CHECKING:
    from ..config import Config


def index_backend(cfg: Config) -> type:
    match cfg.index_backend:
        case "faiss":
            from .faiss import FaissIndex

            return FaissIndex
        case "milvus":
            from .milvus_index import MilvusIndex

            return MilvusIndex
        case other:
            raise NotYetSupportedError(
                f"index_backend {other!r} is accepted in parameter.yaml but not active in this "
                "release; use index_backend: faiss"
            )


__all__ = ["VectorIndex", "index_backend"]
