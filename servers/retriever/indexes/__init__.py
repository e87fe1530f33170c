"""Index backends: FAISS on disk (faiss/) and Milvus, Lite or server (milvus/), chosen by
backend_for; BM25 (bm25.py) and the learned-sparse inverted index (inverted.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from ..config import INDEX_BACKENDS
from ..errors import NotYetSupportedError
from .base import Change, HeldDocuments, VectorBackend, VectorIndex, View

if TYPE_CHECKING:
    from ..config import Config


def check_backend(cfg: Config) -> None:
    """Fail early on an index backend this release does not run."""
    if cfg.index_backend not in INDEX_BACKENDS:
        raise NotYetSupportedError(f"index_backend {cfg.index_backend!r} is not active in this release; use one of "
                                   f"{', '.join(INDEX_BACKENDS)}")


def backend_for(cfg: Config) -> tuple[VectorBackend, HeldDocuments | None]:
    """The index backend the config selects (its library imported only now): where the vectors
    live, and the document store when the backend holds the documents too (None: the local corpus
    and change log hold them). The one place a backend is chosen; mypy checks every name of
    config.INDEX_BACKENDS has its case."""
    check_backend(cfg)
    name = cfg.index_backend
    match name:
        case "milvus":
            from .milvus.backend import MilvusBackend

            mcfg = cfg.index_backend_configs.milvus
            if mcfg.full_text:  # Milvus holds everything, BM25 included (milvus/fulltext.py)
                from .milvus.fulltext import full_text_of

                terms = mcfg.terms_field_name if mcfg.full_text_analyzer == "bm25s" else None
                milvus = MilvusBackend(demo=True, full_text=full_text_of(cfg.backend_configs.bm25,
                                                                         mcfg.sparse_field_name, terms))
            else:
                milvus = MilvusBackend(demo=cfg.is_demo)
            return milvus, milvus if milvus.holds else None
        case "faiss":
            from .faiss.backend import FaissBackend

            return FaissBackend(), None
        case _:
            assert_never(name)


__all__ = ["Change", "HeldDocuments", "VectorBackend", "VectorIndex", "View", "backend_for", "check_backend"]
