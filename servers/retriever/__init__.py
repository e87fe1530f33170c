"""mcp-retriever: an MCP tool server for dense, BM25 and hybrid retrieval.

`import retriever` stays light: its names load on first use (`retriever.Retriever`, ...), heavy
libraries when a backend is first built, so the command line decides what a start imports.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from . import imports  # noqa: F401 - bm25s and OpenVINO import without what we never use (imports.py)

if TYPE_CHECKING:
    from .config import Config, load_config
    from .engine.retriever import Retriever
    from .errors import RetrieverError
    from .types import Document, Hit

__all__ = ["Config", "Document", "Hit", "Retriever", "RetrieverError", "load_config", "package_version"]
__version__ = "0.1.0"

_WHERE = {"Config": ".config", "load_config": ".config", "Retriever": ".engine.retriever",
          "RetrieverError": ".errors", "Document": ".types", "Hit": ".types"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'retriever' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def package_version() -> str:
    """The installed package's version (MCP's serverInfo, `retriever --version`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-retriever")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "0+unknown"
