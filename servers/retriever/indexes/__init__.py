"""Vector index backends: FAISS on disk (faiss.py) and Milvus, Lite or server (milvus*.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotYetSupportedError
from .base import Change, VectorIndex

if TYPE_CHECKING:
    from ..config import Config

BACKENDS = ("faiss", "milvus")


def check_backend(cfg: Config) -> None:
    """Fail early on an index backend this release does not run."""
    if cfg.index_backend not in BACKENDS:
        raise NotYetSupportedError(f"index_backend {cfg.index_backend!r} is not active in this release; use one of "
                                   f"{', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "Change", "VectorIndex", "check_backend"]
