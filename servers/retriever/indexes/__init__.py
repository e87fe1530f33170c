"""Vector index backends: FAISS on disk (faiss.py) and Milvus, Lite or server (milvus*.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotYetSupportedError
from .base import Change, IndexBackend, VectorIndex, View

if TYPE_CHECKING:
    from ..config import Config

BACKENDS = ("faiss", "milvus")


def check_backend(cfg: Config) -> None:
    """Fail early on an index backend this release does not run."""
    if cfg.index_backend not in BACKENDS:
        raise NotYetSupportedError(f"index_backend {cfg.index_backend!r} is not active in this release; use one of "
                                   f"{', '.join(BACKENDS)}")


def backend_for(cfg: Config) -> IndexBackend:
    """The index backend the config selects (its library imported only now)."""
    check_backend(cfg)
    if cfg.index_backend == "milvus":
        from .milvus_backend import MilvusBackend

        mcfg = cfg.index_backend_configs.milvus
        if mcfg.full_text:  # Milvus holds everything, BM25 included (milvus_fulltext.py)
            from .milvus_fulltext import full_text_of

            terms = mcfg.terms_field_name if mcfg.full_text_analyzer == "bm25s" else None
            return MilvusBackend(demo=True, full_text=full_text_of(cfg.backend_configs.bm25, mcfg.sparse_field_name, terms))
        return MilvusBackend(demo=cfg.is_demo)
    from .faiss_backend import FaissBackend

    return FaissBackend()


__all__ = ["BACKENDS", "Change", "IndexBackend", "VectorIndex", "View", "backend_for", "check_backend"]
