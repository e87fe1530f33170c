"""Vector index backends; `build_index(cfg)` / `load_index(cfg)` pick one."""

from __future__ import annotations

from ..config import Config
from ..errors import NotYetSupportedError
from .base import VectorIndex


def index_backend(cfg: Config) -> type:
    match cfg.index_backend:
        case "faiss":
            from .faiss import FaissIndex

            return FaissIndex
        case other:
            raise NotYetSupportedError(
                f"index_backend {other!r} is accepted in parameter.yaml but not active in this "
                "release; use index_backend: faiss"
            )


__all__ = ["VectorIndex", "index_backend"]
