"""mcp-retriever: an MCP tool server for dense, BM25 and (soon) hybrid retrieval.

`import retriever` stays light: heavy libraries load when a backend is first built.
"""

from importlib.metadata import PackageNotFoundError, version

from .config import Config, load_config
from .engine.retriever import Retriever
from .errors import RetrieverError
from .types import Document, Hit

__all__ = ["Config", "Document", "Hit", "Retriever", "RetrieverError", "load_config", "package_version"]
__version__ = "0.1.0"


def package_version() -> str:
    """The installed package's version (MCP's serverInfo, `retriever --version`)."""
    try:
        return version("mcp-retriever")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "0+unknown"
